import { isTimeZone } from './schedule.js';
import { parseIsoDate } from './date-math.js';
import { ValidationError } from './errors.js';
import { isPlainObject } from './filters.js';
import { ATTRIBUTE_NAME, CUSTOM_TYPES, NOTIFICATIONS_ALLOWED_VALUES, type CustomType } from './vocabulary.js';
import { snapCoordinate } from './geo.js';
import { AUTH_HASH_FIELD, IDENTITY_FIELDS, LEAVING_HASH_FIELD, type IdentityField } from './identity.js';
import { parseSubscription } from './web-push.js';
import { hmsTokenProblem } from './hms.js';

/** The request field that carries a device's credential (src/domain/device-credential.ts). */
export const CREDENTIAL_FIELD = 'credential';

/**
 * What a client may write on a device, checked field by field. Invalid parts are dropped and reported so the
 * valid rest is stored (the public API's habit); only a missing or invalid platform, or an invalid token on
 * registration, rejects the request.
 */
export const LIMITS = {
  customAttributes: 50,
  stringLength: 255,
  arrayLength: 50,
  tags: 50,
  tokenLength: 4096,
  events: 1000,
  /** distinct events (source and name) a device holds: an extracted sdk key must not grow one without end */
  distinctEvents: 500,
  /** an event's properties as JSON, and how deep they nest: kept with journey entrants, read by templates */
  eventPropertiesBytes: 4096,
  eventPropertiesDepth: 5,
} as const;

const INT32 = { min: -(2 ** 31), max: 2 ** 31 - 1 };

export interface Dropped {
  field: string;
  error: string;
}

export type Platform = 'ios' | 'android' | 'web' | 'huawei';
export type NotificationsAllowed = (typeof NOTIFICATIONS_ALLOWED_VALUES)[number];

/** Device columns a client sets; absent = unchanged, null = cleared. */
export interface DeviceFields {
  platform?: Platform;
  token?: string | null;
  development?: boolean;
  locale?: string | null;
  time_zone?: string | null;
  os_name?: string | null;
  os_version?: string | null;
  app_version?: string | null;
  sdk_version?: string | null;
  marketing_name?: string | null;
  badge?: number | null;
  user_id?: string | null;
  user_email?: string | null;
  tags?: string[];
  country?: string | null;
  notifications_allowed?: NotificationsAllowed | null;
  sdk_latitude?: number | null;
  sdk_longitude?: number | null;
  /** a web device's subscription keys (its endpoint is `token`) */
  web_push_p256dh?: string | null;
  web_push_auth?: string | null;
}

export type CustomValue = string | number | boolean | Date;
export interface CustomAttribute {
  type: CustomType;
  values: CustomValue[];
  isArray: boolean;
}
/** Attribute name -> its new value, or null to remove it. */
export type CustomChanges = Map<string, CustomAttribute | null>;

export interface DeviceInput {
  fields: DeviceFields;
  custom: CustomChanges;
  dropped: Dropped[];
  /** the proofs sent for user_id and user_email (`user_id_auth_hash`, …), as sent: checked, never stored */
  authHashes: Partial<Record<IdentityField, unknown>>;
  /** the proofs of the values a change of user_id or user_email leaves (`previous_user_id_auth_hash`, …), as sent */
  leavingHashes: Partial<Record<IdentityField, unknown>>;
  /** `token` came from `subscription` (a web device's), not from `token` (a phone's) */
  subscribed: boolean;
  /** the device credential sent (`credential`, src/domain/device-credential.ts), as sent: checked, never stored */
  credential?: unknown;
}

/** Options of parseDeviceInput: the endpoints a web subscription may name beside the push services. */
export interface DeviceInputOptions {
  webPushOrigins: readonly string[];
}

/** `user_id_auth_hash` -> `user_id`, … */
const PROVES = new Map<string, IdentityField>(IDENTITY_FIELDS.map((field) => [AUTH_HASH_FIELD[field], field]));
/** `previous_user_id_auth_hash` -> `user_id`, … */
const LEAVES = new Map<string, IdentityField>(IDENTITY_FIELDS.map((field) => [LEAVING_HASH_FIELD[field], field]));

/** `at` locates an error below the field, e.g. `[3]` for an array element. */
type Parsed<T> = { value: T } | { error: string; at?: string };
const ok = <T>(value: T): Parsed<T> => ({ value });
const fail = (error: string, at?: string): Parsed<never> => (at ? { error, at } : { error });

function text(v: unknown): Parsed<string | null> {
  if (v === null || v === '') return ok(null);
  if (typeof v !== 'string') return fail('must be a string');
  return v.length <= LIMITS.stringLength ? ok(v) : fail(`must be at most ${LIMITS.stringLength} characters`);
}

const TIME_ZONES = new Map(Intl.supportedValuesOf('timeZone').map((tz) => [tz.toLowerCase(), tz]));
const NOT_COUNTRIES = new Set(['AC', 'CP', 'DG', 'EA', 'EU', 'EZ', 'IC', 'QO', 'TA', 'UK', 'UN', 'ZZ']);
const regionNames = new Intl.DisplayNames(['en'], { type: 'region', fallback: 'none' });

/** Field name (as clients send it) -> column and parser. `hardware_name` is what the SDKs send. */
const FIELDS: Record<string, { column: keyof DeviceFields; parse: (v: unknown) => Parsed<unknown> }> = {
  token: {
    column: 'token',
    parse: (v) =>
      v === null
        ? ok(null)
        : typeof v === 'string' && /^[\x21-\x7e]+$/.test(v) && v.length <= LIMITS.tokenLength
          ? ok(v)
          : fail(`must be an APNs or FCM push token: 1 to ${LIMITS.tokenLength} visible ASCII characters`),
  },
  development: { column: 'development', parse: (v) => (typeof v === 'boolean' ? ok(v) : fail('must be a boolean')) },
  locale: {
    column: 'locale',
    parse: (v) => {
      if (v === null || v === '') return ok(null);
      const m = typeof v === 'string' ? /^([A-Za-z]{2})[_-]([A-Za-z]{2})$/.exec(v) : null;
      return m ? ok(`${m[1]!.toLowerCase()}_${m[2]!.toUpperCase()}`) : fail('must be <language>_<COUNTRY>, e.g. en_US');
    },
  },
  time_zone: {
    column: 'time_zone',
    parse: (v) => {
      if (v === null || v === '') return ok(null);
      return typeof v === 'string' && isTimeZone(v) ? ok(TIME_ZONES.get(v.toLowerCase()) ?? v) : fail('must be an IANA time zone name');
    },
  },
  os_name: { column: 'os_name', parse: text },
  os_version: { column: 'os_version', parse: text },
  app_version: { column: 'app_version', parse: text },
  sdk_version: { column: 'sdk_version', parse: text },
  marketing_name: { column: 'marketing_name', parse: text },
  hardware_name: { column: 'marketing_name', parse: text },
  user_id: { column: 'user_id', parse: text },
  user_email: { column: 'user_email', parse: email },
  // the device record shows user_email as `email` too
  email: { column: 'user_email', parse: email },
  badge: {
    column: 'badge',
    parse: (v) =>
      v === null
        ? ok(null)
        : Number.isInteger(v) && (v as number) >= 0 && (v as number) <= INT32.max
          ? ok(v)
          : fail('must be an integer >= 0'),
  },
  tags: { column: 'tags', parse: parseTags },
  country: {
    column: 'country',
    parse: (v) => {
      if (v === null || v === '') return ok(null);
      const code = typeof v === 'string' && /^[A-Za-z]{2}$/.test(v) ? v.toUpperCase() : null;
      return code && !NOT_COUNTRIES.has(code) && regionNames.of(code) ? ok(code) : fail('must be an ISO 3166-1 alpha-2 country code');
    },
  },
  notifications_allowed: {
    column: 'notifications_allowed',
    parse: (v) => {
      if (v === null) return ok(null);
      if (typeof v === 'boolean') return ok(v ? 'Enabled' : 'Disabled');
      return (NOTIFICATIONS_ALLOWED_VALUES as readonly unknown[]).includes(v)
        ? ok(v)
        : fail(`must be one of ${NOTIFICATIONS_ALLOWED_VALUES.join(', ')}`);
    },
  },
};

const READ_ONLY = new Set([
  'id',
  'device_id',
  'created_at',
  'registered_at',
  'erased_at',
  'installed_at',
  'last_opened',
  'user_events',
  'ip_address',
]);

function email(v: unknown): Parsed<string | null> {
  const t = text(v);
  if ('error' in t || t.value === null) return t;
  return /^[^\s@]+@[^\s@]+$/.test(t.value) ? t : fail('must be an e-mail address');
}

function parseTags(v: unknown): Parsed<string[]> {
  if (v === null) return ok([]);
  if (!Array.isArray(v)) return fail('must be an array of strings');
  if (v.length > LIMITS.tags) return fail(`must hold at most ${LIMITS.tags} tags`);
  const bad = v.findIndex((t) => typeof t !== 'string' || t.length === 0 || t.length > LIMITS.stringLength);
  if (bad >= 0) return fail(`must be a non-empty string of at most ${LIMITS.stringLength} characters`, `[${bad}]`);
  return ok([...new Set(v as string[])]);
}

function parseLocation(v: unknown): Parsed<{ latitude: number; longitude: number } | null> {
  if (v === null) return ok(null);
  if (!isPlainObject(v)) return fail('must be {"latitude": <number>, "longitude": <number>}');
  const { latitude, longitude } = v;
  if (typeof latitude !== 'number' || !Number.isFinite(latitude) || latitude < -90 || latitude > 90)
    return fail('latitude must be between -90 and 90');
  if (typeof longitude !== 'number' || !Number.isFinite(longitude) || longitude < -180 || longitude > 180)
    return fail('longitude must be between -180 and 180');
  return ok({ latitude: snapCoordinate(latitude), longitude: snapCoordinate(longitude) });
}

/**
 * Parses the `device` object of a register (`create`) or update request. Throws ValidationError only for
 * the platform and a registration's token; everything else invalid lands in `dropped`.
 */
export function parseDeviceInput(
  raw: Record<string, unknown>,
  mode: 'create' | 'update',
  options: DeviceInputOptions = { webPushOrigins: [] },
): DeviceInput {
  const fields: DeviceFields = {};
  const dropped: Dropped[] = [];
  const custom: CustomChanges = new Map();
  const authHashes: DeviceInput['authHashes'] = {};
  const leavingHashes: DeviceInput['leavingHashes'] = {};
  let credential: unknown;

  if (mode === 'create' && raw.platform === undefined) throw new ValidationError('device.platform: is required');
  if (raw.platform !== undefined) {
    // any case: the device record shows the public API's "iOS" and "Android", which a client may send back
    const platform = typeof raw.platform === 'string' ? raw.platform.toLowerCase() : null;
    if (platform !== 'ios' && platform !== 'android' && platform !== 'web' && platform !== 'huawei')
      throw new ValidationError('device.platform: must be one of ios, android, web, huawei');
    fields.platform = platform;
  }
  const subscribed = raw.subscription !== undefined;
  if (subscribed) webSubscription(raw.subscription, fields, options);
  if ((subscribed || fields.platform === 'web') && raw.token !== undefined)
    throw new ValidationError('device.token: a web device gives its push subscription as device.subscription');
  // marketing_name wins over its alias when both are sent.
  const keys = Object.keys(raw).sort((a, b) => Number(a === 'marketing_name') - Number(b === 'marketing_name'));
  for (const key of keys) {
    const value = raw[key];
    if (key === 'platform' || key === 'subscription' || value === undefined) continue;
    // registering with no token yet is fine; with "" as well, as an SDK may send before the phone has one
    if (mode === 'create' && key === 'token' && value === '') continue;
    const field = Object.hasOwn(FIELDS, key) ? FIELDS[key] : undefined; // not "toString" or "constructor" of Object
    const proven = PROVES.get(key);
    const left = LEAVES.get(key);
    if (proven) authHashes[proven] = value;
    else if (left) leavingHashes[left] = value;
    else if (key === CREDENTIAL_FIELD) credential = value;
    else if (field) {
      const r = field.parse(value);
      // A device registered without the token it was sent with could never be reached, and with no token to be
      // found by, each retry would register another device: so a registration's bad token is refused, not dropped.
      if ('error' in r && mode === 'create' && key === 'token') throw new ValidationError(`device.token: ${r.error}`);
      if ('error' in r) dropped.push({ field: `${key}${r.at ?? ''}`, error: r.error });
      else if (!(mode === 'create' && r.value === null)) (fields as Record<string, unknown>)[field.column] = r.value;
    } else if (key === 'location') {
      const r = parseLocation(value);
      if ('error' in r) dropped.push({ field: key, error: r.error });
      else if (!(mode === 'create' && r.value === null)) {
        fields.sdk_latitude = r.value?.latitude ?? null;
        fields.sdk_longitude = r.value?.longitude ?? null;
      }
    } else if (key === 'custom' || key === 'user_attributes') {
      const r = parseCustomAttributes(value, key);
      for (const [name, attr] of r.custom) custom.set(name, attr);
      dropped.push(...r.dropped);
    } else {
      dropped.push({ field: key, error: READ_ONLY.has(key) ? 'is read-only' : 'is not a device field' });
    }
  }
  if (fields.platform === 'huawei') checkHuaweiToken(fields.token);
  return { fields, custom, dropped, authHashes, leavingHashes, subscribed, ...(credential !== undefined && { credential }) };
}

/** A Huawei device's token must be an HMS push token: anything else would only come back as 80300007 at each send. */
export function checkHuaweiToken(token: string | null | undefined): void {
  const problem = typeof token === 'string' ? hmsTokenProblem(token) : null;
  if (problem) throw new ValidationError(`device.token: ${problem}`);
}

/**
 * A web device's `subscription` (null: it unsubscribed) sets its token, the endpoint, and its keys; refused, not
 * dropped, when it is not one pushd may send to, as a phone's platform is.
 */
function webSubscription(raw: unknown, fields: DeviceFields, options: DeviceInputOptions): void {
  if (fields.platform !== undefined && fields.platform !== 'web')
    throw new ValidationError('device.subscription: only a web device (platform "web") has a push subscription');
  const subscription = raw === null ? null : parseSubscription(raw, options.webPushOrigins);
  fields.token = subscription?.endpoint ?? null;
  fields.web_push_p256dh = subscription?.p256dh ?? null;
  fields.web_push_auth = subscription?.auth ?? null;
}

/** `{"name": {"type": ..., "value": ...}}`; `"name": null` (or a null/empty value) removes the attribute. */
export function parseCustomAttributes(raw: unknown, prefix: string): { custom: CustomChanges; dropped: Dropped[] } {
  const custom: CustomChanges = new Map();
  const dropped: Dropped[] = [];
  if (!isPlainObject(raw))
    return { custom, dropped: [{ field: prefix, error: 'must be an object of {"type", "value"} by attribute name' }] };
  for (const [name, spec] of Object.entries(raw)) {
    const field = `${prefix}.${name}`;
    if (!ATTRIBUTE_NAME.test(name)) {
      dropped.push({ field, error: 'name must be 1-255 characters of A-Z a-z 0-9 _ -' });
      continue;
    }
    const r = parseCustomAttribute(spec);
    if ('error' in r) dropped.push({ field: `${field}${r.at ?? ''}`, error: r.error });
    else custom.set(name, r.value);
  }
  return { custom, dropped };
}

function parseCustomAttribute(spec: unknown): Parsed<CustomAttribute | null> {
  if (spec === null) return ok(null);
  if (!isPlainObject(spec)) return fail('must be {"type": <type>, "value": <value>} or null');
  const type = spec.type as CustomType;
  if (!(CUSTOM_TYPES as readonly unknown[]).includes(type)) return fail(`type must be one of ${CUSTOM_TYPES.join(', ')}`);
  const extra = Object.keys(spec).find((k) => k !== 'type' && k !== 'value');
  if (extra) return fail(`unknown key ${extra}`);
  const value = spec.value;
  if (value === null || value === undefined) return ok(null);
  if (Array.isArray(value)) {
    if (type === 'boolean') return fail('boolean attributes cannot be arrays');
    if (value.length > LIMITS.arrayLength) return fail(`arrays hold at most ${LIMITS.arrayLength} elements`);
    if (value.length === 0) return ok(null);
    const values: CustomValue[] = [];
    for (const [i, element] of value.entries()) {
      const r = customScalar(type, element);
      if ('error' in r) return fail(r.error, `[${i}]`);
      values.push(r.value);
    }
    return ok({ type, values, isArray: true });
  }
  const r = customScalar(type, value);
  return 'error' in r ? r : ok({ type, values: [r.value], isArray: false });
}

function customScalar(type: CustomType, v: unknown): Parsed<CustomValue> {
  switch (type) {
    case 'string':
      if (typeof v !== 'string') return fail('must be a string');
      return v.length <= LIMITS.stringLength ? ok(v) : fail(`must be at most ${LIMITS.stringLength} characters`);
    case 'integer':
      return Number.isInteger(v) && (v as number) >= INT32.min && (v as number) <= INT32.max
        ? ok(v as number)
        : fail('must be a 32-bit signed integer');
    case 'float':
      return typeof v === 'number' && Number.isFinite(v) ? ok(v) : fail('must be a finite number');
    case 'date': {
      const d = typeof v === 'string' ? parseIsoDate(v) : null;
      return d ? ok(d) : fail('must be an ISO 8601 date within years 1 to 9999');
    }
    case 'boolean':
      return typeof v === 'boolean' ? ok(v) : fail('must be a boolean');
  }
}

/**
 * Which of the requested new attribute names fit under the per-device limit, in request order. Attributes
 * the device already has may always be rewritten.
 */
export function admitAttributes(
  existing: Iterable<string>,
  changes: CustomChanges,
  prefix = 'custom',
): { admitted: CustomChanges; dropped: Dropped[] } {
  const names = new Set(existing);
  for (const [name, attr] of changes) if (attr === null) names.delete(name);
  const admitted: CustomChanges = new Map();
  const dropped: Dropped[] = [];
  for (const [name, attr] of changes) {
    if (attr !== null && !names.has(name)) {
      if (names.size >= LIMITS.customAttributes) {
        dropped.push({ field: `${prefix}.${name}`, error: `a device holds at most ${LIMITS.customAttributes} custom attributes` });
        continue;
      }
      names.add(name);
    }
    admitted.set(name, attr);
  }
  return { admitted, dropped };
}

// ---- events ----

export interface EventInput {
  source: string;
  name: string;
  date: Date;
  /** what happened (`{"items": [...]}`): kept where journeys need it, never in the per-device aggregates */
  properties?: Record<string, unknown>;
}

/** One aggregate per (source, name), as the upsert must not touch a row twice in one statement. */
export interface EventAggregate {
  source: string;
  name: string;
  count: number;
  first: Date;
  last: Date;
}

const SOURCE = /^[^.]{1,255}$/;

/**
 * `{"events": [{"name", "date"?, "source"?, "properties"?}]}`: all or nothing (400 naming the first bad field). The source
 * segment comes from the key: none for the SDK key, `Public Api` for a write key, which may also name a
 * third-party source (an analytics import).
 */
export function parseEvents(raw: unknown, opts: { defaultSource: string; mayNameSource: boolean; now: Date }): EventInput[] {
  if (!isPlainObject(raw) || !Array.isArray(raw.events))
    throw new ValidationError('events: must be an array of {"name", "date"?, "properties"?}');
  const events = raw.events as unknown[];
  if (events.length === 0) throw new ValidationError('events: must hold at least one event');
  if (events.length > LIMITS.events) throw new ValidationError(`events: at most ${LIMITS.events} events a request`);
  return events.map((e, i) => {
    const at = `events[${i}]`;
    if (!isPlainObject(e)) throw new ValidationError(`${at}: must be an object`);
    if (typeof e.name !== 'string' || !ATTRIBUTE_NAME.test(e.name))
      throw new ValidationError(`${at}.name: must be 1-255 characters of A-Z a-z 0-9 _ -`);
    let date = opts.now;
    if (e.date !== undefined && e.date !== null) {
      const d = typeof e.date === 'string' ? parseIsoDate(e.date) : null;
      if (!d) throw new ValidationError(`${at}.date: must be an ISO 8601 date within years 1 to 9999`);
      date = d;
    }
    let source = opts.defaultSource;
    if (e.source !== undefined && e.source !== null) {
      if (!opts.mayNameSource) throw new ValidationError(`${at}.source: only a write key may name an event source`);
      if (typeof e.source !== 'string' || !SOURCE.test(e.source))
        throw new ValidationError(`${at}.source: must be 1-255 characters without dots`);
      source = e.source;
    }
    const properties = e.properties === undefined || e.properties === null ? undefined : eventProperties(e.properties, at);
    return { source, name: e.name, date, ...(properties && { properties }) };
  });
}

function eventProperties(v: unknown, at: string): Record<string, unknown> {
  if (!isPlainObject(v)) throw new ValidationError(`${at}.properties: must be a JSON object`);
  if (Buffer.byteLength(JSON.stringify(v), 'utf8') > LIMITS.eventPropertiesBytes)
    throw new ValidationError(`${at}.properties: must be at most ${LIMITS.eventPropertiesBytes} bytes as JSON`);
  if (depthOf(v) > LIMITS.eventPropertiesDepth)
    throw new ValidationError(`${at}.properties: must nest at most ${LIMITS.eventPropertiesDepth} levels deep`);
  return v;
}

/** Levels of objects and arrays: {} is 1, {"a": [1]} is 2. */
function depthOf(v: unknown): number {
  if (typeof v !== 'object' || v === null) return 0;
  return 1 + Math.max(0, ...Object.values(v).map(depthOf));
}

export function aggregateEvents(events: EventInput[]): EventAggregate[] {
  const byKey = new Map<string, EventAggregate>();
  for (const e of events) {
    const key = `${e.source}\u0000${e.name}`;
    const agg = byKey.get(key);
    if (!agg) byKey.set(key, { source: e.source, name: e.name, count: 1, first: e.date, last: e.date });
    else {
      agg.count += 1;
      if (e.date < agg.first) agg.first = e.date;
      if (e.date > agg.last) agg.last = e.date;
    }
  }
  // A fixed order: concurrent upserts then lock rows in the same order and cannot deadlock.
  return [...byKey.values()].sort((a, b) => (a.source === b.source ? (a.name < b.name ? -1 : 1) : a.source < b.source ? -1 : 1));
}
