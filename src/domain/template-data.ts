import { z } from 'zod';
import { jsonBytes } from './push-mapping.js';
import { DEVICE_COLUMNS, type TemplateVariables } from './templates.js';

/**
 * Per-send values of templates: `data` (the same for every device of the send) and `data_by` (per user id or device
 * id), given with a notification or a transactional send by a write key, stored with the notification, read by
 * `data.*` at render. A journey's send adds the entrants' events (`event_by`), which no request can set.
 */

/** `data`, and each entry of `data_by`, as JSON. */
export const TEMPLATE_DATA_MAX_BYTES = 4_096;
/** `data_by` as JSON, every entry together. */
export const TEMPLATE_DATA_BY_MAX_BYTES = 262_144;

const object = (what: string) =>
  z
    .record(z.string(), z.unknown(), { error: `must be a JSON object (${what})` })
    .refine((o) => jsonBytes(o) <= TEMPLATE_DATA_MAX_BYTES, `must be at most ${TEMPLATE_DATA_MAX_BYTES} bytes as JSON`);

const byId = (what: string) =>
  z.record(z.string().min(1).max(255), object(`the data of one ${what}`), { error: `must be an object of ${what}s` });

export const templateDataFields = {
  data: object('the values templates read as data.*').optional(),
  data_by: z
    .strictObject(
      { user_id: byId('user id').optional(), device_id: byId('device id').optional() },
      { error: (issue) => (issue.code === 'invalid_type' ? 'must be {"user_id": {...}, "device_id": {...}}' : undefined) },
    )
    .refine((o) => jsonBytes(o) <= TEMPLATE_DATA_BY_MAX_BYTES, `must be at most ${TEMPLATE_DATA_BY_MAX_BYTES} bytes as JSON`)
    .optional(),
};

export type TemplateEvent = NonNullable<TemplateVariables['event']>;

/** What a notification stores for its renders (null when it has none): the request's data, a journey's events. */
export interface TemplateData {
  data?: Record<string, unknown>;
  data_by?: { user_id?: Record<string, Record<string, unknown>>; device_id?: Record<string, Record<string, unknown>> };
  /** each entrant's event, by its user id or device id (a journey's send) */
  event_by?: { user_id?: Record<string, TemplateEvent>; device_id?: Record<string, TemplateEvent> };
}

/** The stored form of a request's data (null: none). */
export function templateDataOf(fields: { data?: Record<string, unknown>; data_by?: TemplateData['data_by'] }): TemplateData | null {
  if (!fields.data && !fields.data_by) return null;
  return { ...(fields.data && { data: fields.data }), ...(fields.data_by && { data_by: fields.data_by }) };
}

/** Whether the data differs between devices, so a template naming `data` or `event` renders per device. */
export function perDeviceData(stored: TemplateData | null): boolean {
  return !!(stored?.data_by || stored?.event_by);
}

/** A device's `data` (the send's, then its user's, then its own, each key overriding) and `event`. */
export function deviceData(
  stored: TemplateData | null,
  device: { id: string; userId: string | null },
): Pick<TemplateVariables, 'data' | 'event'> {
  if (!stored) return {};
  const byUser = own(stored.data_by?.user_id, device.userId);
  const byDevice = own(stored.data_by?.device_id, device.id);
  const event = own(stored.event_by?.device_id, device.id) ?? own(stored.event_by?.user_id, device.userId);
  return { data: { ...stored.data, ...byUser, ...byDevice }, ...(event && { event }) };
}

/** An id's entry, never a property the object inherits (a user id may be any string). */
function own<T>(by: Record<string, T> | undefined, id: string | null): T | undefined {
  return by && id !== null && Object.hasOwn(by, id) ? by[id] : undefined;
}

/** A stored device's columns a render reads: its fields (`device.*`) and its user. */
export const TEMPLATE_DEVICE_COLUMNS = [...DEVICE_COLUMNS, 'user_id', 'user_email'] as const;

export type TemplateDevice = { id: string; platform: string; badge: number | null; tags: string[] } & Record<
  Exclude<(typeof TEMPLATE_DEVICE_COLUMNS)[number], 'id' | 'platform' | 'badge' | 'tags'>,
  string | null
>;

/** A custom attribute's row as a render reads it (typed as stored; an array's values one row each, in order). */
export interface StoredAttribute {
  name: string;
  is_array: boolean;
  str_value: string | null;
  num_value: number | null;
  date_value: Date | null;
  bool_value: boolean | null;
}

/** A stored device as its render reads it: its fields, its custom attributes (typed as stored) and its user. */
export function deviceVariables(d: TemplateDevice, attributes: StoredAttribute[]): Pick<TemplateVariables, 'device' | 'custom' | 'user'> {
  const { user_id, user_email, ...fields } = d;
  return {
    device: { ...fields, language: d.locale?.slice(0, 2) ?? null },
    custom: customVariables(attributes),
    user: user_id !== null ? { id: user_id, email: user_email } : null,
  };
}

/** A device's custom attributes as `custom.*` reads them. */
export function customVariables(attributes: StoredAttribute[]): Record<string, unknown> {
  // a Map, then own properties: an attribute may be named __proto__
  const custom = new Map<string, unknown>();
  for (const a of attributes) {
    const value = a.str_value ?? (a.num_value !== null ? Number(a.num_value) : null) ?? a.date_value?.toISOString() ?? a.bool_value;
    if (!a.is_array) custom.set(a.name, value);
    else if (custom.has(a.name)) (custom.get(a.name) as unknown[]).push(value);
    else custom.set(a.name, [value]);
  }
  return Object.fromEntries(custom);
}
