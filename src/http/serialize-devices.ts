import type { DeviceAttributeRow } from '../db/repositories/devices.js';
import type { DeviceEventRow } from '../db/repositories/events.js';
import type { Device } from '../db/schema.js';
import type { DeviceDetails, UserDeviceErasure, Written } from '../services/devices.js';
import { eventKey, iso } from './serialize.js';

// The device records of the API: a part of src/http/serialize.ts, the one place rows become the API's shapes.

/** The public API's platform names; an erased device has none. */
const PLATFORM_NAMES = { ios: 'iOS', android: 'Android', web: 'Web', huawei: 'Huawei' } as const;

/**
 * The device record of the public API (its names and JSON types: `email`, `push_token`, `platform` "iOS"|"Android",
 * `location` with lat/lng as strings, ...), followed by our own fields. The same record wherever a device appears.
 */
export function deviceView({ device: d, attributes, events }: DeviceDetails) {
  const custom = customView(attributes);
  const erased = d.erased_at !== null;
  return {
    id: d.id,
    user_id: d.user_id,
    email: d.user_email,
    user_email: d.user_email,
    push_enabled: d.notifications_allowed === 'Enabled',
    push_token: d.token,
    platform: erased ? ('Unknown' as const) : PLATFORM_NAMES[d.platform],
    installed_at: erased ? null : iso(d.created_at),
    last_opened: iso(d.last_opened_at),
    user_attributes: custom,
    user_events: eventsView(events),
    location: locationView(d),
    tags: d.tags,
    erased_at: iso(d.erased_at),
    // ours
    token: d.token,
    development: d.development,
    locale: d.locale,
    time_zone: d.time_zone,
    os_name: d.os_name,
    os_version: d.os_version,
    app_version: d.app_version,
    sdk_version: d.sdk_version,
    marketing_name: d.marketing_name,
    badge: d.badge,
    country: d.country,
    notifications_allowed: d.notifications_allowed,
    // what the `sdk_location` filter tests (`location` tests GPS, else GeoIP)
    sdk_location: d.sdk_latitude !== null && d.sdk_longitude !== null ? { latitude: d.sdk_latitude, longitude: d.sdk_longitude } : null,
    custom,
    created_at: iso(d.created_at)!,
    registered_at: iso(d.registered_at)!,
    token_invalidated_at: iso(d.token_invalidated_at),
  };
}

/** A device of the uninstalled listing: the record, when and why its token was rejected. */
export function uninstalledView(details: DeviceDetails) {
  return { ...deviceView(details), uninstalled_at: iso(details.device.token_invalidated_at)!, reason: details.device.token_invalid_reason };
}

/** `{gps: {lat, lng}, geoip: {lat, lng, city, country}}`, coordinates as strings; `gps` is `{}` without a fix. */
function locationView(d: Device) {
  const coordinate = (v: number | null) => (v === null ? null : String(v));
  const gps: { lat: string; lng: string } | Record<string, never> =
    d.sdk_latitude !== null && d.sdk_longitude !== null ? { lat: String(d.sdk_latitude), lng: String(d.sdk_longitude) } : {};
  return {
    gps,
    geoip: { lat: coordinate(d.ip_latitude), lng: coordinate(d.ip_longitude), city: d.ip_city, country: d.ip_country },
  };
}

/** The keys of deviceView that show a device field, where they are not the field's own name. */
const VIEW_KEYS: Partial<Record<Written['fields'][number], string[]>> = {
  token: ['token', 'push_token'],
  user_email: ['user_email', 'email'],
  notifications_allowed: ['notifications_allowed', 'push_enabled'],
  sdk_latitude: ['sdk_location'],
  sdk_longitude: ['sdk_location'],
};

/**
 * The answer to registering a token the app already has: the device's id, its platform and what this request
 * wrote, as stored; nothing else of the existing record (its e-mail, location, other attributes, events).
 */
export function writtenView(details: DeviceDetails, written: Written): Partial<ReturnType<typeof deviceView>> {
  const custom = new Set(written.custom);
  const view = deviceView({ ...details, attributes: details.attributes.filter((a) => custom.has(a.name)), events: [] });
  const shown = new Set([
    'id',
    'platform',
    ...written.fields.flatMap((f) => VIEW_KEYS[f] ?? [f]),
    ...(custom.size > 0 ? ['custom', 'user_attributes'] : []),
  ]);
  return Object.fromEntries(Object.entries(view).filter(([key]) => shown.has(key)));
}

const ERASURE_STATUS = { erased: 200, gone: 404, out_of_range: 416 } as const;

/** DELETE /users/:id/devices: a status per device and the counts of each. */
export function userErasureResponse(erasures: UserDeviceErasure[]) {
  const count = (outcome: UserDeviceErasure['outcome']) => erasures.filter((e) => e.outcome === outcome).length;
  return {
    devices: erasures.map((e) => ({ device_id: e.id, status: ERASURE_STATUS[e.outcome] })),
    metadata: { success: count('erased'), failure: count('gone'), out_of_range: count('out_of_range'), total: erasures.length },
  };
}

type CustomView = Record<string, { type: string; value: unknown }>;

function customView(rows: DeviceAttributeRow[]): CustomView {
  const out: CustomView = {};
  for (const r of rows) {
    const value = r.str_value ?? r.num_value ?? (r.date_value ? iso(r.date_value) : null) ?? r.bool_value;
    const entry = (out[r.name] ??= { type: r.type, value: r.is_array ? [] : value });
    if (r.is_array) (entry.value as unknown[]).push(value);
  }
  return out;
}

/** Keyed as in filter names without `events.`: `<name>` for SDK events, `<source>.<name>` otherwise. */
function eventsView(rows: DeviceEventRow[]) {
  return Object.fromEntries(
    rows.map((e) => [
      eventKey(e),
      { count: Number(e.count), first_happened_at: iso(e.first_happened_at), last_happened_at: iso(e.last_happened_at) },
    ]),
  );
}
