import { hash } from 'node:crypto';
import { sql, type RawBuilder, type Selectable, type SqlBool } from 'kysely';
import type { Db } from '../database.js';
import { compileFilters, namedKeys } from '../filter-sql.js';
import type { Device, DeviceAttributesTable, DeviceUpdate, Platform } from '../schema.js';
import type { CustomAttribute, CustomChanges, CustomValue } from '../../domain/device-input.js';
import type { Filter } from '../../domain/filters.js';
import type { LiveActivityRef } from '../../domain/live-activity.js';
import type { HeldDevice } from '../../domain/device-credential.js';
import type { GatewayGroup } from '../../domain/batches.js';

/** The devices table's row shapes and the query parts `DevicesRepository`'s methods share. */

export type DeviceAttributeRow = Selectable<DeviceAttributesTable>;

/**
 * A device of an audience that can receive a push (its token is read again when its batch is sent). `not_allowed`:
 * it reported notifications Disabled and the push is visible, so it is counted and not sent (`allowedOf`).
 */
export type Deliverable = Pick<Device, 'id' | 'platform' | 'development'> & { not_allowed: boolean };
/** A device as a change by the sdk key is judged (`HeldDevice`), with its id. */
export type HeldByToken = HeldDevice & { id: string };
/** The columns of a HeldByToken. */
export const HELD = [
  'id',
  'user_id',
  'user_email',
  'platform',
  'token',
  'web_push_p256dh',
  'web_push_auth',
  'development',
  'notifications_allowed',
  'credential_hash',
  'credential_held',
] as const;

/** A deliverable device with the token it has now (what a send right after the read goes to). */
export type DeliverableNow = Deliverable & { token: string };

/** A keyset page of an audience: devices with id > afterId, by id. Pass one `now` for all pages of a run. */
/** A fan-out's page: `visible`, the push shows something; `liveActivity`, it goes to an activity's tokens. */
export type DeliverablePageSpec = AudiencePage & {
  visible: boolean;
  liveActivity?: LiveActivityRef | null;
  /** the platforms whose devices' tokens `pageDeliverableGroups` reads with the page (not for a Live Activity) */
  tokensOf?: Platform[];
};

/** A page of deliverable devices as `pageDeliverableGroups` reads it. */
export interface DeliverableGroups {
  /** devices read, the not-allowed ones included (a page shorter than its limit is the last) */
  read: number;
  /** the id of the last device read (the next page's cursor); null when none was */
  last: string | null;
  /** devices read that are not sent the push (`Deliverable.not_allowed`) */
  notAllowed: number;
  /** the devices sent the push, by the gateway they need, each list in id order; `tokens` (of `tokensOf`'s
   * platforms), each device's token as read, at the same places as `ids` */
  groups: GatewayGroup[];
}

export interface AudiencePage {
  afterId?: string | null;
  /** Only devices whose id is at most this (a fan-out range's upper bound). */
  upToId?: string | null;
  limit: number;
  now: Date;
  /** Only devices in these time zones (a local-time wave). */
  zones?: ZoneSlice;
}

/**
 * Devices whose time_zone is one of `zones`; with `orOutside`, also those with no zone or one outside that list
 * (they follow the app's default zone, whose wave this is).
 */
export interface ZoneSlice {
  zones: string[];
  orOutside?: string[];
}

// Everything a client or the service wrote about the device; erase sets these back.
export const ERASED: DeviceUpdate = {
  token: null,
  web_push_p256dh: null,
  web_push_auth: null,
  development: false,
  locale: null,
  time_zone: null,
  os_name: null,
  os_version: null,
  app_version: null,
  sdk_version: null,
  marketing_name: null,
  badge: null,
  user_id: null,
  user_email: null,
  tags: [],
  country: null,
  notifications_allowed: null,
  sdk_latitude: null,
  sdk_longitude: null,
  ip_address: null,
  ip_latitude: null,
  ip_longitude: null,
  ip_city: null,
  ip_country: null,
  token_invalidated_at: null,
  token_invalid_reason: null,
  last_opened_at: null,
  credential_hash: null,
  credential_held: false,
};

/**
 * Whether the device is not sent this push: it reported notifications Disabled and the push is `visible`, as every
 * push to a browser is (a subscription is made userVisibleOnly, and its service worker shows each one).
 */
export function notAllowed(visible: boolean | RawBuilder<boolean>) {
  return sql<boolean>`((${visible}::boolean or d.platform = 'web') and d.notifications_allowed is not distinct from 'Disabled')`;
}

/**
 * Whether the device holds the token a Live Activity push goes to: the push-to-start token of its type (a start),
 * else the activity's update token (read from the activity's index, not per device). The tokens read are bounded
 * by the page's own id bounds: the planner does not carry `d.id > afterId` over to them, and each page then read
 * the activity's tokens again from its first device.
 */
export function holdsActivityToken(appId: string, la: LiveActivityRef, page: Pick<AudiencePage, 'afterId' | 'upToId'>) {
  if (la.event === 'start')
    return sql<boolean>`d.platform = 'ios' and exists (
      select 1 from live_activity_start_tokens s
      where s.device_id = d.id and s.activity_type = ${la.activity_type})`;
  const after = page.afterId ? sql` and t.device_id > ${page.afterId}::uuid` : sql``;
  const upTo = page.upToId ? sql` and t.device_id <= ${page.upToId}::uuid` : sql``;
  return sql<boolean>`d.platform = 'ios' and d.id in (
    select t.device_id from live_activity_tokens t
    where t.app_id = ${appId}::uuid and t.activity_id = ${la.activity_id}${after}${upTo})`;
}

/** The devices of one `pageDeliverable` page and what it reads of them, in id order. */
export function deliverablePageQuery(db: Db, appId: string, filters: Filter[] | null, page: DeliverablePageSpec) {
  const q = audiencePageQuery(db, appId, filters, page).select([
    'd.id',
    'd.platform',
    'd.development',
    notAllowed(page.visible).as('not_allowed'),
  ]);
  // a Live Activity push goes to the activity's tokens, which an iOS device holds beside its own
  if (page.liveActivity) return q.where(holdsActivityToken(appId, page.liveActivity, page));
  return q.where('d.token', 'is not', null).where('d.token_invalidated_at', 'is', null);
}

/** Audiences one membership statement tests (its columns). */
export const MEMBERSHIP_CHUNK = 100;

/** The live devices of the app that the filters select, one keyset page in id order; the caller picks the columns. */
export function audiencePageQuery(db: Db, appId: string, filters: Filter[] | null, page: AudiencePage) {
  return db
    .selectFrom('devices as d')
    .where('d.app_id', '=', appId)
    .where('d.erased_at', 'is', null)
    .where(compileFilters(filters, { now: page.now }))
    .$if(!!page.afterId, (qb) => qb.where('d.id', '>', page.afterId!))
    .$if(!!page.upToId, (qb) => qb.where('d.id', '<=', page.upToId!))
    .$if(!!page.zones, (qb) => qb.where(inZones(page.zones!)))
    .orderBy('d.id')
    .limit(page.limit);
}

/** A page of the audience's devices that have a live token, with that token. */
export function deliverableNowQuery(db: Db, appId: string, filters: Filter[] | null, page: AudiencePage, visible: boolean) {
  return audiencePageQuery(db, appId, filters, page)
    .select(['d.id', 'd.platform', 'd.development', 'd.token', notAllowed(visible).as('not_allowed')])
    .where('d.token', 'is not', null)
    .where('d.token_invalidated_at', 'is', null);
}

export function userDevices(db: Db, appId: string, userId: string) {
  return db.selectFrom('devices').where('app_id', '=', appId).where('user_id', '=', userId).where('erased_at', 'is', null);
}

export function withCountry(
  set: DeviceUpdate,
  fillCountry: string | null,
  table: string,
): Omit<DeviceUpdate, 'country'> & { country?: string | null | RawBuilder<string> } {
  if (fillCountry === null || set.country !== undefined) return set;
  return { ...set, country: sql<string>`coalesce(${sql.ref(`${table}.country`)}, ${fillCountry})` };
}

/** The device holds this push token, found by the unique index of (app_id, its token's key) (migration 052). */
export function holdsToken(token: string): RawBuilder<SqlBool> {
  return holdsTokenOfKey(tokenKey(token), token);
}

/** holdsToken with the token's key given (a shaped statement's placeholders: ShapedStatements). */
export function holdsTokenOfKey(key: string, token: string): RawBuilder<SqlBool> {
  return sql<SqlBool>`pushd_token_key(token) = ${key}::uuid and token = ${token}`;
}

/** The transaction's lock on an app's push token, which every write giving a device that token takes first. */
export function tokenLock(appId: string, token: string): RawBuilder<void> {
  return lockOfName(tokenLockName(appId, token));
}

/** What tokenLock locks, by name. */
export function tokenLockName(appId: string, token: string): string {
  return `${appId}:${token}`;
}

/** tokenLock by its name (tokenLockName). */
export function lockOfName(name: string): RawBuilder<void> {
  return sql<void>`pg_advisory_xact_lock(hashtextextended(${name}, 0))`;
}

/** The error of a row refused because another device of its app has its push token (migration 052's index). */
export function tokenTaken(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && e.constraint === 'devices_app_token_uidx';
}

/**
 * pushd_token_key (migration 052) computed here, not by PostgreSQL for each statement: textsend gives the token's
 * bytes in the session's client encoding, which for node-postgres is the server's own (it sets none), so they are
 * the UTF-8 it sent (U+FFFD for a lone surrogate, as Buffer writes it), the bytes hashed here.
 */
export function tokenKey(token: string): string {
  const h = hash('sha256', token, 'hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** A device's attribute rows in the order `attributesOf` reads them. */
export const byNameAndPosition = (a: DeviceAttributeRow, b: DeviceAttributeRow) =>
  a.name < b.name ? -1 : a.name > b.name ? 1 : a.position - b.position;

/** `insertWithAttributes`'s joined rows (the device beside each of its attributes) as the device and its attributes. */
export function deviceAndAttributes(stored: (Device & AttributeColumns)[]): { device: Device; attributes: DeviceAttributeRow[] } {
  const device: Record<string, unknown> = { ...stored[0]! };
  for (const key of ATTRIBUTE_COLUMNS) delete device[key];
  const attributes = stored.map((r) => ({
    device_id: r.id,
    app_id: r.app_id,
    name: r.a_name,
    type: r.a_type,
    position: r.a_position,
    is_array: r.a_is_array,
    str_value: r.a_str_value,
    num_value: r.a_num_value,
    date_value: r.a_date_value,
    bool_value: r.a_bool_value,
  }));
  return { device: device as unknown as Device, attributes: attributes.sort(byNameAndPosition) };
}

const ATTRIBUTE_COLUMNS = ['a_name', 'a_type', 'a_position', 'a_is_array', 'a_str_value', 'a_num_value', 'a_date_value', 'a_bool_value'];

/** A device attribute's columns beside its device's, in `insertWithAttributes`'s answer. */
export interface AttributeColumns {
  a_name: string;
  a_type: DeviceAttributeRow['type'];
  a_position: number;
  a_is_array: boolean;
  a_str_value: string | null;
  a_num_value: number | null;
  a_date_value: Date | null;
  a_bool_value: boolean | null;
}

/**
 * The set with registered_at moved to now only when one of its columns changes (compared with the stored row,
 * `devices`): a write that changes nothing leaves every indexed column as it was, so PostgreSQL can make it a HOT
 * update (no index entries, a fraction of the WAL).
 */
export function movingRegisteredAt<T extends Record<string, unknown>>(set: T): T & { registered_at: RawBuilder<Date> } {
  const changed = changedFrom(set);
  const moved = changed ? sql<Date>`case when ${changed} then now() else devices.registered_at end` : sql<Date>`devices.registered_at`;
  return { ...set, registered_at: moved };
}

/** Whether the stored row (`devices`) differs from the set in one of its columns; null when it sets none. */
export function changedFrom(set: Record<string, unknown>): RawBuilder<SqlBool> | null {
  const changed = Object.entries(set)
    .filter(([, v]) => v !== undefined)
    .map(([column, v]) => sql`${sql.ref(`devices.${column}`)} is distinct from ${v}`);
  return changed.length ? sql<SqlBool>`(${sql.join(changed, sql` or `)})` : null;
}

type StoredAttribute = Omit<DeviceAttributeRow, 'position' | 'is_array'> & { position: number; is_array: boolean };

/** The custom attributes whose rows `changes` would replace: those whose new rows differ from the stored ones. */
export function changedAttributes(
  appId: string,
  deviceId: string,
  changes: CustomChanges,
  stored: DeviceAttributeRow[],
): [string, CustomAttribute | null][] {
  return [...changes].filter(
    ([name, attr]) =>
      !sameRows(
        attributeRows(appId, deviceId, name, attr),
        stored.filter((r) => r.name === name),
      ),
  );
}

/** Whether an attribute's new rows hold what its stored rows hold (position order on both sides). */
export function sameRows(next: StoredAttribute[], stored: StoredAttribute[]): boolean {
  const time = (d: Date | null) => d?.getTime() ?? null;
  return (
    next.length === stored.length &&
    next.every((n, i) => {
      const s = stored[i]!;
      return (
        n.type === s.type &&
        n.position === s.position &&
        n.is_array === s.is_array &&
        n.str_value === s.str_value &&
        n.num_value === s.num_value &&
        time(n.date_value) === time(s.date_value) &&
        n.bool_value === s.bool_value
      );
    })
  );
}

/** Attribute rows (`attributeRows`) as the columns of their rows, one array each, as an insert's unnest reads them. */
export function attributeArrays(rows: Omit<DeviceAttributeRow, 'device_id' | 'app_id'>[]) {
  const column = <K extends keyof DeviceAttributeRow>(k: Exclude<K, 'device_id' | 'app_id'>) => rows.map((r) => r[k]);
  return {
    name: column('name'),
    type: column('type'),
    position: column('position'),
    is_array: column('is_array'),
    str_value: column('str_value'),
    num_value: column('num_value'),
    date_value: column('date_value'),
    bool_value: column('bool_value'),
  };
}

/** The rows of a custom attribute of a device (none: removed). */
export function attributeRows(appId: string, deviceId: string, name: string, attr: CustomAttribute | null) {
  return attr === null
    ? []
    : attr.values.map((v, position) => ({
        device_id: deviceId,
        app_id: appId,
        name,
        type: attr.type,
        position,
        is_array: attr.isArray,
        ...typedValue(v),
      }));
}

/** An attribute value in the column of its type. */
export function typedValue(v: CustomValue): Pick<DeviceAttributeRow, 'str_value' | 'num_value' | 'date_value' | 'bool_value'> {
  return {
    str_value: typeof v === 'string' ? v : null,
    num_value: typeof v === 'number' ? v : null,
    date_value: v instanceof Date ? v : null,
    bool_value: typeof v === 'boolean' ? v : null,
  };
}

export function inZones(slice: ZoneSlice) {
  const listed = sql<boolean>`d.time_zone = any(${slice.zones}::text[])`;
  if (!slice.orOutside) return listed;
  return sql<boolean>`(${listed} or d.time_zone is null or d.time_zone <> all(${slice.orOutside}::text[]))`;
}

/**
 * The audiences of a unicast group that name their devices (`device_id` or `user_id` keys): one statement each kind
 * looks them all up, its rows tagged with the audience's place (`ord`); the others (`compiled`) need their filters
 * compiled. Only the lookups needed: an empty one would make the statement look costlier planned once than for its values.
 */
export function keyedLookups(
  audiences: { appId: string; filters: Filter[] | null; visible: boolean }[],
  limit: number,
): { lookups: RawBuilder<DeliverableNow & { ord: number }>[]; compiled: number[] } {
  const byKey = {
    device_id: { ords: [] as number[], apps: [] as string[], keys: [] as string[] },
    user_id: { ords: [] as number[], apps: [] as string[], keys: [] as string[] },
  };
  // whether a looked-up device is not sent its audience's push (arrays count from 1)
  const byOrd = notAllowed(sql<boolean>`(${audiences.map((a) => a.visible)}::boolean[])[t.ord + 1]`);
  const compiled: number[] = [];
  audiences.forEach((a, ord) => {
    const named = namedKeys(a.filters);
    if (!named) return void compiled.push(ord);
    const into = byKey[named.by];
    for (const key of new Set(named.keys)) {
      into.ords.push(ord);
      into.apps.push(a.appId);
      into.keys.push(key);
    }
  });
  const { device_id: ids, user_id: users } = byKey;
  const lookups: RawBuilder<DeliverableNow & { ord: number }>[] = [];
  if (ids.ords.length)
    lookups.push(sql`
      select t.ord, d.id, d.platform, d.development, d.token, ${byOrd} as not_allowed
      from unnest(${ids.ords}::int[], ${ids.apps}::uuid[], ${ids.keys}::uuid[]) as t(ord, app_id, id)
      join devices d on d.id = t.id and d.app_id = t.app_id
      where d.erased_at is null and d.token is not null and d.token_invalidated_at is null`);
  if (users.ords.length)
    lookups.push(sql`
      select t.ord, d.id, d.platform, d.development, d.token, ${byOrd} as not_allowed
      from unnest(${users.ords}::int[], ${users.apps}::uuid[], ${users.keys}::text[]) as t(ord, app_id, user_id)
      cross join lateral (
        select d.id, d.platform, d.development, d.token, d.notifications_allowed from devices d
        where d.app_id = t.app_id and d.user_id = t.user_id
          and d.erased_at is null and d.token is not null and d.token_invalidated_at is null
        order by d.id limit ${limit}::int) d`);
  return { lookups, compiled };
}
