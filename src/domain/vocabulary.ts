/**
 * The words of the API a client needs without its validators: filter attribute names and the kind each compares
 * as, custom attribute types, distance units, permission values, interruption levels. The console bundles this.
 */
export type AttributeKind = 'string' | 'number' | 'date' | 'boolean' | 'tags' | 'geo' | 'enum';

/** Device attributes of the contract, and the column kind each one compares as. */
export const DEVICE_ATTRIBUTES = {
  locale: 'string',
  time_zone: 'string',
  created_at: 'date',
  registered_at: 'date',
  badge: 'number',
  os_name: 'string',
  os_version: 'string',
  app_version: 'string',
  sdk_version: 'string',
  device_id: 'string',
  country: 'string',
  marketing_name: 'string',
  user_id: 'string',
  user_email: 'string',
  development: 'boolean',
  location: 'geo',
  sdk_location: 'geo',
  notifications_allowed: 'enum',
  tags: 'tags',
  // one of PLATFORM_VALUES, as the device record shows it
  platform: 'string',
} as const satisfies Record<string, AttributeKind>;

export type DeviceAttribute = keyof typeof DEVICE_ATTRIBUTES;
export const CUSTOM_TYPES = ['string', 'integer', 'float', 'date', 'boolean'] as const;
export type CustomType = (typeof CUSTOM_TYPES)[number];
export const NOTIFICATIONS_ALLOWED_VALUES = ['Enabled', 'Disabled', 'Unknown'] as const;
/** The platform names of the device record, which a `platform` filter compares with. */
export const PLATFORM_VALUES = ['iOS', 'Android', 'Web', 'Huawei'] as const;
export const ATTRIBUTE_NAME = /^[A-Za-z0-9_-]{1,255}$/;

/** Distance units of the contract, in metres. */
export const DISTANCE_UNITS_IN_METERS: Record<string, number> = {
  in: 0.0254,
  inch: 0.0254,
  yd: 0.9144,
  yards: 0.9144,
  ft: 0.3048,
  feet: 0.3048,
  km: 1000,
  kilometers: 1000,
  nauticalmiles: 1852,
  mi: 1609.344,
  miles: 1609.344,
  m: 1,
  meters: 1,
};

export const INTERRUPTION_LEVELS = ['passive', 'active', 'time-sensitive', 'critical'] as const;
