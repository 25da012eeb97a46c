import { createHash } from 'node:crypto';
import { sql, type RawBuilder, type Selectable, type SqlBool, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import { compileCount, compileFilters, namedKeys, type CompileContext } from '../filter-sql.js';
import type { Database, Device, DeviceAttributesTable, DeviceUpdate, NewDevice, Platform } from '../schema.js';
import type { CustomAttribute, CustomChanges, CustomValue } from '../../domain/device-input.js';
import type { Filter } from '../../domain/filters.js';
import { isUuid } from '../../domain/cursor.js';
import type { LiveActivityRef } from '../../domain/live-activity.js';
import type { HeldDevice } from '../../domain/device-credential.js';
import type { GatewayGroup } from '../../domain/batches.js';

export type DeviceAttributeRow = Selectable<DeviceAttributesTable>;

/**
 * A device of an audience that can receive a push (its token is read again when its batch is sent). `not_allowed`:
 * it reported notifications Disabled and the push is visible, so it is counted and not sent (`allowedOf`).
 */
export type Deliverable = Pick<Device, 'id' | 'platform' | 'development'> & { not_allowed: boolean };
/** A device as a change by the sdk key is judged (`HeldDevice`), with its id. */
export type HeldByToken = HeldDevice & { id: string };
/** The columns of a HeldByToken. */
const HELD = [
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
const ERASED: DeviceUpdate = {
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

export class DevicesRepository {
  async insert(db: Db, values: NewDevice): Promise<Device> {
    return db.insertInto('devices').values(values).returningAll().executeTakeFirstOrThrow();
  }

  /**
   * A new device and its custom attributes in one statement (one round trip, not two): the rows as PostgreSQL
   * stored them, the attributes in the order `attributesOf` reads them (it has none before, so none are read).
   */
  async insertWithAttributes(
    db: Db,
    values: NewDevice,
    changes: CustomChanges,
  ): Promise<{ device: Device; attributes: DeviceAttributeRow[] }> {
    const rows = [...changes].flatMap(([name, attr]) => attributeRows(values.app_id, '', name, attr));
    if (rows.length === 0) return { device: await this.insert(db, values), attributes: [] };
    const column = <K extends keyof DeviceAttributeRow>(k: K) => rows.map((r) => r[k]);
    const { rows: stored } = await sql<Device & AttributeColumns>`
      with d as (${db.insertInto('devices').values(values).returningAll()}),
      a as (
        insert into device_attributes (device_id, app_id, name, type, position, is_array, str_value, num_value, date_value, bool_value)
        select d.id, d.app_id, x.* from d,
          unnest(${column('name')}::text[], ${column('type')}::text[], ${column('position')}::int2[], ${column('is_array')}::bool[],
                 ${column('str_value')}::text[], ${column('num_value')}::float8[], ${column('date_value')}::timestamptz[],
                 ${column('bool_value')}::bool[]) as x
        returning name, type, position, is_array, str_value, num_value, date_value, bool_value)
      select d.*, a.name as a_name, a.type as a_type, a.position as a_position, a.is_array as a_is_array,
        a.str_value as a_str_value, a.num_value as a_num_value, a.date_value as a_date_value, a.bool_value as a_bool_value
      from d cross join a`.execute(db);
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

  /**
   * Registers a push token: the app's device that already has it, updated with `update`, or else a new device with
   * the `custom` attributes (answered with them: a device answered without is the one updated). The
   * caller holds the token's lock (`lockToken`), which every write giving a device this token takes, so no other
   * transaction inserts it meanwhile: an UPDATE and an INSERT need neither the lock record of ON CONFLICT DO UPDATE
   * nor the confirmation record of its speculative insert.
   */
  async registerToken(
    db: Transaction<Database>,
    values: NewDevice & { token: string },
    update: DeviceUpdate,
    fillCountry: string | null,
    custom: CustomChanges,
  ): Promise<{ device: Device; attributes?: DeviceAttributeRow[] }> {
    const updated = await db
      .updateTable('devices')
      .set(movingRegisteredAt(withCountry(update, fillCountry, 'devices')))
      .where('app_id', '=', values.app_id)
      .where(holdsToken(values.token))
      .returningAll()
      .executeTakeFirst();
    if (updated) return { device: updated };
    return this.insertWithAttributes(db, values, custom);
  }

  /** The device, row-locked until the transaction ends (`share`: against erase, not against other shares). */
  async lock(db: Transaction<Database>, appId: string, id: string, mode: 'update' | 'share'): Promise<Device | undefined> {
    if (!isUuid(id)) return undefined;
    const q = db.selectFrom('devices').selectAll().where('app_id', '=', appId).where('id', '=', id);
    return (mode === 'update' ? q.forUpdate() : q.forShare()).executeTakeFirst();
  }

  /**
   * The live devices of a user (only those `among` these ids, when given), locked in id order (a fixed order, so
   * concurrent user updates cannot deadlock).
   */
  async lockUserDevices(
    db: Transaction<Database>,
    appId: string,
    userId: string,
    mode: 'update' | 'share',
    among?: string[],
  ): Promise<Device[]> {
    if (among?.length === 0) return [];
    const q = userDevices(db, appId, userId)
      .selectAll()
      .$if(among !== undefined, (qb) => qb.where('id', 'in', among!))
      .orderBy('id');
    return (mode === 'update' ? q.forUpdate() : q.forShare()).execute();
  }

  /** The ids of a user's live devices, in id order. */
  async userDeviceIds(db: Db, appId: string, userId: string): Promise<string[]> {
    const rows = await userDevices(db, appId, userId).select('id').orderBy('id').execute();
    return rows.map((r) => r.id);
  }

  /**
   * What the sdk key must prove to change the app's device with this push token, row-locked until the transaction
   * ends (none: undefined).
   */
  async lockByToken(db: Transaction<Database>, appId: string, token: string): Promise<HeldByToken | undefined> {
    return db.selectFrom('devices').select(HELD).where('app_id', '=', appId).where(holdsToken(token)).forUpdate().executeTakeFirst();
  }

  /**
   * Sets the columns, and registered_at when one of them changes; `fillCountry` becomes the country only where there
   * is none.
   */
  async update(db: Db, id: string, set: DeviceUpdate, fillCountry: string | null = null): Promise<Device> {
    return db
      .updateTable('devices')
      .set(movingRegisteredAt(withCountry(set, fillCountry, 'devices')))
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  /** Moves the device's registered_at to now (its custom attributes changed); answers the device. */
  async touch(db: Db, id: string): Promise<Device> {
    return db
      .updateTable('devices')
      .set({ registered_at: sql<Date>`now()` })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async touchMany(db: Db, ids: string[]): Promise<void> {
    if (ids.length)
      await db
        .updateTable('devices')
        .set({ registered_at: sql<Date>`now()` })
        .where('id', 'in', ids)
        .execute();
  }

  /**
   * Serialises, until the transaction ends, everything that gives this push token to a device of the app:
   * otherwise two devices taking it at once both find no holder to release and one hits the unique index.
   */
  async lockToken(db: Transaction<Database>, appId: string, token: string): Promise<void> {
    await sql`select pg_advisory_xact_lock(hashtextextended(${`${appId}:${token}`}, 0))`.execute(db);
  }

  /**
   * Before moving a token to a device: the token (as lockToken), then that device and the token's current holder
   * row-locked in id order, so two devices swapping tokens at once wait for each other instead of deadlocking.
   * Answers the holder when it is another device (it would lose the token).
   */
  async lockTokenMove(db: Transaction<Database>, appId: string, token: string, deviceId: string): Promise<HeldByToken | undefined> {
    await this.lockToken(db, appId, token);
    if (!isUuid(deviceId)) return undefined;
    const rows = await db
      .selectFrom('devices')
      .select(HELD)
      .where('app_id', '=', appId)
      .where((eb) => eb.or([eb('id', '=', deviceId), holdsToken(token)]))
      .orderBy('id')
      .forUpdate()
      .execute();
    return rows.find((r) => r.id !== deviceId && r.token === token);
  }

  /** A token moves to the device that now reports it: the app's other device with it loses it. */
  async releaseToken(db: Db, appId: string, token: string, keepId: string): Promise<void> {
    await db
      .updateTable('devices')
      .set({ token: null })
      .where('app_id', '=', appId)
      .where(holdsToken(token))
      .where('id', '<>', keepId)
      .execute();
  }

  /** Empties the device; the devices_erased trigger (migration 002) deletes its attributes and events. */
  async erase(db: Db, id: string): Promise<Device> {
    return db
      .updateTable('devices')
      .set({ ...ERASED, erased_at: sql<Date>`now()` })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async findForApp(db: Db, appId: string, id: string): Promise<Device | undefined> {
    if (!isUuid(id)) return undefined;
    return db.selectFrom('devices').selectAll().where('app_id', '=', appId).where('id', '=', id).executeTakeFirst();
  }

  // ---- custom attributes ----

  async attributeNames(db: Db, deviceId: string): Promise<string[]> {
    const rows = await db.selectFrom('device_attributes').select('name').distinct().where('device_id', '=', deviceId).execute();
    return rows.map((r) => r.name);
  }

  /**
   * Rewrites the custom attributes whose values change; an attribute sent again as it is stays as it is (no write).
   * Answers whether any changed. `known`: the device's rows as `attributesOf` read them in this transaction, which
   * then are not read again.
   */
  async replaceAttributes(db: Db, appId: string, deviceId: string, changes: CustomChanges, known?: DeviceAttributeRow[]): Promise<boolean> {
    if (changes.size === 0) return false;
    const stored =
      known ??
      (await db
        .selectFrom('device_attributes')
        .selectAll()
        .where('device_id', '=', deviceId)
        .where('name', 'in', [...changes.keys()])
        .orderBy('name')
        .orderBy('position')
        .execute());
    const rowsOf = (name: string, attr: CustomAttribute | null) => attributeRows(appId, deviceId, name, attr);
    const changed = [...changes].filter(
      ([name, attr]) =>
        !sameRows(
          rowsOf(name, attr),
          stored.filter((r) => r.name === name),
        ),
    );
    if (changed.length === 0) return false;
    await db
      .deleteFrom('device_attributes')
      .where('device_id', '=', deviceId)
      .where(
        'name',
        'in',
        changed.map(([name]) => name),
      )
      .execute();
    const rows = changed.flatMap(([name, attr]) => rowsOf(name, attr));
    if (rows.length) await db.insertInto('device_attributes').values(rows).execute();
    return true;
  }

  async attributesOf(db: Db, deviceIds: string[]): Promise<DeviceAttributeRow[]> {
    if (deviceIds.length === 0) return [];
    return db
      .selectFrom('device_attributes')
      .selectAll()
      .where('device_id', 'in', deviceIds)
      .orderBy('device_id')
      .orderBy('name')
      .orderBy('position')
      .execute();
  }

  // ---- audiences ----

  /**
   * How many live (not erased) devices of the app an audience selects: one SQL statement. Its hash joins
   * and de-duplication get more memory than the session default, so large audiences stay in memory.
   */
  async countAudience(db: Db, appId: string, filters: Filter[] | null, ctx: CompileContext): Promise<number> {
    return db.transaction().execute(async (trx) => {
      await sql`set local work_mem = '64MB'`.execute(trx);
      const { rows } = await compileCount(appId, filters, ctx).execute(trx);
      return Number(rows[0]!.n);
    });
  }

  /**
   * One keyset page of an audience's devices that can receive a push, in id order (the fan-out); `visible`: the
   * push shows something (`isVisiblePush`), which a device whose notifications are Disabled is not sent.
   */
  async pageDeliverable(db: Db, appId: string, filters: Filter[] | null, page: DeliverablePageSpec): Promise<Deliverable[]> {
    return deliverablePageQuery(db, appId, filters, page).execute();
  }

  /**
   * `pageDeliverable` as a fan-out cuts it: the sendable devices' ids grouped by the gateway they need, each group's
   * in id order as one joined text, so that a page of 10,000 devices comes back as a few rows, not 10,000 rows
   * each parsed into an object.
   */
  async pageDeliverableGroups(db: Db, appId: string, filters: Filter[] | null, page: DeliverablePageSpec): Promise<DeliverableGroups> {
    const tokensOf = page.liveActivity ? [] : (page.tokensOf ?? []);
    const q = deliverablePageQuery(db, appId, filters, page).$if(tokensOf.length > 0, (qb) => qb.select('d.token'));
    // a token is printable ASCII without spaces (device-input.ts)
    const tokens = tokensOf.length
      ? sql`case when p.not_allowed or not p.platform = any(${tokensOf}::text[]) then null else string_agg(p.token, ' ' order by p.id) end`
      : sql`null::text`;
    // uuids as text compare in their own order only byte by byte (collation "C")
    const { rows } = await sql<{
      platform: Platform;
      development: boolean;
      not_allowed: boolean;
      n: number;
      ids: string | null;
      tokens: string | null;
      last: string;
    }>`
      select p.platform, p.development, p.not_allowed, count(*)::int as n, max(p.id::text collate "C") as last,
        case when p.not_allowed then null else string_agg(p.id::text, ',' order by p.id) end as ids,
        ${tokens} as tokens
      from (${q}) as p
      group by p.platform, p.development, p.not_allowed
      order by p.platform, p.development`.execute(db);
    const out: DeliverableGroups = { read: 0, last: null, notAllowed: 0, groups: [] };
    for (const r of rows) {
      out.read += r.n;
      if (out.last === null || r.last > out.last) out.last = r.last;
      if (r.not_allowed) out.notAllowed += r.n;
      else
        out.groups.push({
          platform: r.platform,
          development: r.development,
          ids: r.ids!.split(','),
          ...(r.tokens !== null && { tokens: r.tokens.split(' ') }),
        });
    }
    return out;
  }

  /**
   * `pageDeliverable` with each device's token as read now, for a page sent as soon as it is stored (a fan-out's
   * first); not for a Live Activity, whose pushes go to its own tokens.
   */
  async pageDeliverableNow(
    db: Db,
    appId: string,
    filters: Filter[] | null,
    page: AudiencePage & { visible: boolean },
  ): Promise<DeliverableNow[]> {
    return (await deliverableNowQuery(db, appId, filters, page, page.visible).execute()) as DeliverableNow[];
  }

  /**
   * The first `limit` deliverable devices of each of several audiences: one list per audience, in the order given
   * (`pageDeliverable` from the start, for many small audiences at once). Audiences that only name devices or
   * users (`namedKeys`, most notifications) are looked up by key in one statement whose text does not grow with
   * their number; the others as one query of their compiled filters.
   */
  async deliverableOfEach(
    db: Db,
    audiences: { appId: string; filters: Filter[] | null; visible: boolean }[],
    page: { limit: number; now: Date },
  ): Promise<DeliverableNow[][]> {
    const lists: DeliverableNow[][] = audiences.map(() => []);
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
    if (byKey.device_id.ords.length || byKey.user_id.ords.length) {
      const { device_id: ids, user_id: users } = byKey;
      // only the lookups needed: an empty one would make the statement look costlier planned once than for its values
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
            order by d.id limit ${page.limit}::int) d`);
      const { rows } = await sql<DeliverableNow & { ord: number }>`${sql.join(lookups, sql` union all `)}`.execute(db);
      // keys are distinct and a device has one user: no device comes twice for one audience
      const found = new Set<number>();
      for (const { ord, ...device } of rows) {
        lists[ord]!.push(device);
        found.add(ord);
      }
      // as the compiled query pages: by id, the first `limit` (several keys may each bring up to `limit`)
      for (const ord of found) lists[ord] = lists[ord]!.sort((a, b) => (a.id < b.id ? -1 : 1)).slice(0, page.limit);
    }
    if (compiled.length) {
      const parts = compiled.map((ord) => {
        const a = audiences[ord]!;
        const q = deliverableNowQuery(db, a.appId, a.filters, { afterId: null, ...page }, a.visible);
        return sql`select ${ord}::int as ord, q.* from (${q}) as q`;
      });
      const { rows } = await sql<DeliverableNow & { ord: number }>`${sql.join(parts, sql` union all `)}`.execute(db);
      for (const { ord, ...device } of rows) lists[ord]!.push(device);
    }
    return lists;
  }

  /** Which of these live devices the filters match now (a journey's entry filters and branches). */
  async matchingIds(db: Db, appId: string, ids: string[], filters: Filter[], now: Date): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await db
      .selectFrom('devices as d')
      .select('d.id')
      .where('d.app_id', '=', appId)
      .where('d.id', '=', sql<string>`any(${ids}::uuid[])`)
      .where('d.erased_at', 'is', null)
      .where(compileFilters(filters, { now }))
      .execute();
    return new Set(rows.map((r) => r.id));
  }

  /** The time zones the app's devices are in (a local-time send plans a wave for each). */
  async timeZonesOf(db: Db, appId: string): Promise<string[]> {
    const rows = await db
      .selectFrom('devices')
      .select('time_zone')
      .distinct()
      .where('app_id', '=', appId)
      .where('erased_at', 'is', null) // the same rows (erasing clears the zone), and devices_app_zone_idx answers it
      .where('time_zone', 'is not', null)
      .execute();
    return rows.map((r) => r.time_zone!);
  }

  /** How many of an audience's devices that can receive a push are in the zones (those a local-time send skips). */
  async countDeliverableIn(db: Db, appId: string, filters: Filter[] | null, now: Date, zones: ZoneSlice): Promise<number> {
    const row = await db
      .selectFrom('devices as d')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('d.app_id', '=', appId)
      .where('d.erased_at', 'is', null)
      .where('d.token', 'is not', null)
      .where('d.token_invalidated_at', 'is', null)
      .where(compileFilters(filters, { now }))
      .where(inZones(zones))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** One keyset page of an audience's live devices, token or not (the audience listing). */
  async listAudience(db: Db, appId: string, filters: Filter[] | null, page: AudiencePage): Promise<Device[]> {
    return audiencePageQuery(db, appId, filters, page).selectAll('d').execute();
  }

  /**
   * Which of these audiences select the device now (a message stream read): each audience's predicate is a column
   * of one row read from the device, so a statement tests a chunk of audiences at once, whatever their filters.
   */
  async audiencesContaining(
    db: Db,
    appId: string,
    deviceId: string,
    audiences: { id: string; filters: Filter[] | null }[],
    now: Date,
  ): Promise<string[]> {
    const matched: string[] = [];
    for (let i = 0; i < audiences.length; i += MEMBERSHIP_CHUNK) {
      const chunk = audiences.slice(i, i + MEMBERSHIP_CHUNK);
      const columns = chunk.map((a, j) => sql<boolean>`(${compileFilters(a.filters, { now })}) is true`.as(`a${j}`));
      const row = await db
        .selectFrom('devices as d')
        .select(columns)
        .where('d.app_id', '=', appId)
        .where('d.id', '=', deviceId)
        .where('d.erased_at', 'is', null)
        .executeTakeFirst();
      if (!row) return [];
      const flags = row as Record<string, boolean>;
      chunk.forEach((a, j) => flags[`a${j}`] && matched.push(a.id));
    }
    return matched;
  }
}

/**
 * Whether the device is not sent this push: it reported notifications Disabled and the push is `visible`, as every
 * push to a browser is (a subscription is made userVisibleOnly, and its service worker shows each one).
 */
function notAllowed(visible: boolean | RawBuilder<boolean>) {
  return sql<boolean>`((${visible}::boolean or d.platform = 'web') and d.notifications_allowed is not distinct from 'Disabled')`;
}

/**
 * Whether the device holds the token a Live Activity push goes to: the push-to-start token of its type (a start),
 * else the activity's update token (read from the activity's index, not per device). The tokens read are bounded
 * by the page's own id bounds: the planner does not carry `d.id > afterId` over to them, and each page then read
 * the activity's tokens again from its first device.
 */
function holdsActivityToken(appId: string, la: LiveActivityRef, page: Pick<AudiencePage, 'afterId' | 'upToId'>) {
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
function deliverablePageQuery(db: Db, appId: string, filters: Filter[] | null, page: DeliverablePageSpec) {
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
const MEMBERSHIP_CHUNK = 100;

/** The live devices of the app that the filters select, one keyset page in id order; the caller picks the columns. */
function audiencePageQuery(db: Db, appId: string, filters: Filter[] | null, page: AudiencePage) {
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
function deliverableNowQuery(db: Db, appId: string, filters: Filter[] | null, page: AudiencePage, visible: boolean) {
  return audiencePageQuery(db, appId, filters, page)
    .select(['d.id', 'd.platform', 'd.development', 'd.token', notAllowed(visible).as('not_allowed')])
    .where('d.token', 'is not', null)
    .where('d.token_invalidated_at', 'is', null);
}

function userDevices(db: Db, appId: string, userId: string) {
  return db.selectFrom('devices').where('app_id', '=', appId).where('user_id', '=', userId).where('erased_at', 'is', null);
}

function withCountry(
  set: DeviceUpdate,
  fillCountry: string | null,
  table: string,
): Omit<DeviceUpdate, 'country'> & { country?: string | null | RawBuilder<string> } {
  if (fillCountry === null || set.country !== undefined) return set;
  return { ...set, country: sql<string>`coalesce(${sql.ref(`${table}.country`)}, ${fillCountry})` };
}

/** A device's attribute rows in the order `attributesOf` reads them. */
const byNameAndPosition = (a: DeviceAttributeRow, b: DeviceAttributeRow) =>
  a.name < b.name ? -1 : a.name > b.name ? 1 : a.position - b.position;

const ATTRIBUTE_COLUMNS = ['a_name', 'a_type', 'a_position', 'a_is_array', 'a_str_value', 'a_num_value', 'a_date_value', 'a_bool_value'];

/** A device attribute's columns beside its device's, in `insertWithAttributes`'s answer. */
interface AttributeColumns {
  a_name: string;
  a_type: DeviceAttributeRow['type'];
  a_position: number;
  a_is_array: boolean;
  a_str_value: string | null;
  a_num_value: number | null;
  a_date_value: Date | null;
  a_bool_value: boolean | null;
}

/** The device holds this push token, found by the unique index of (app_id, its token's key) (migration 052). */
function holdsToken(token: string): RawBuilder<SqlBool> {
  return sql<SqlBool>`pushd_token_key(token) = ${tokenKey(token)}::uuid and token = ${token}`;
}

/**
 * pushd_token_key (migration 052) computed here, not by PostgreSQL for each statement: textsend gives the token's
 * bytes in the session's client encoding, which for node-postgres is the server's own (it sets none), so they are
 * the UTF-8 it sent (U+FFFD for a lone surrogate, as Buffer writes it), the bytes hashed here.
 */
export function tokenKey(token: string): string {
  const h = createHash('sha256').update(token, 'utf8').digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/**
 * The set with registered_at moved to now only when one of its columns changes (compared with the stored row,
 * `devices`): a write that changes nothing leaves every indexed column as it was, so PostgreSQL can make it a HOT
 * update (no index entries, a fraction of the WAL).
 */
function movingRegisteredAt<T extends Record<string, unknown>>(set: T): T & { registered_at: RawBuilder<Date> } {
  const changed = Object.entries(set)
    .filter(([, v]) => v !== undefined)
    .map(([column, v]) => sql`${sql.ref(`devices.${column}`)} is distinct from ${v}`);
  const moved = changed.length
    ? sql<Date>`case when ${sql.join(changed, sql` or `)} then now() else devices.registered_at end`
    : sql<Date>`devices.registered_at`;
  return { ...set, registered_at: moved };
}

type StoredAttribute = Omit<DeviceAttributeRow, 'position' | 'is_array'> & { position: number; is_array: boolean };

/** Whether an attribute's new rows hold what its stored rows hold (position order on both sides). */
function sameRows(next: StoredAttribute[], stored: StoredAttribute[]): boolean {
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
function typedValue(v: CustomValue): Pick<DeviceAttributeRow, 'str_value' | 'num_value' | 'date_value' | 'bool_value'> {
  return {
    str_value: typeof v === 'string' ? v : null,
    num_value: typeof v === 'number' ? v : null,
    date_value: v instanceof Date ? v : null,
    bool_value: typeof v === 'boolean' ? v : null,
  };
}

function inZones(slice: ZoneSlice) {
  const listed = sql<boolean>`d.time_zone = any(${slice.zones}::text[])`;
  if (!slice.orOutside) return listed;
  return sql<boolean>`(${listed} or d.time_zone is null or d.time_zone <> all(${slice.orOutside}::text[]))`;
}
