import { sql, type RawBuilder, type SqlBool, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import { compileCount, compileFilters, deviceIdIn, type CompileContext } from '../filter-sql.js';
import type { Database, Device, DeviceUpdate, NewDevice } from '../schema.js';
import type { CustomChanges } from '../../domain/device-input.js';
import type { Filter } from '../../domain/filters.js';
import { isUuid } from '../../domain/cursor.js';
import { ShapedStatements } from '../shaped-statements.js';
import {
  HELD,
  ERASED,
  MEMBERSHIP_CHUNK,
  audiencePageQuery,
  userDevices,
  withCountry,
  holdsToken,
  holdsTokenOfKey,
  tokenKey,
  tokenLock,
  tokenLockName,
  lockOfName,
  tokenTaken,
  movingRegisteredAt,
  changedFrom,
  changedAttributes,
  attributeRows,
  attributeArrays,
  deviceAndAttributes,
  type AttributeColumns,
  type DeviceAttributeRow,
  type HeldByToken,
  type AudiencePage,
} from './device-queries.js';

export { attributeRows, changedAttributes } from './device-queries.js';
export type { DeviceAttributeRow, AudiencePage, HeldByToken } from './device-queries.js';

/** A new device's columns; its app id may be an expression (`insertNewToken`'s, read through the token's lock). */
type DeviceValues = NewDevice | (Omit<NewDevice, 'app_id'> & { app_id: RawBuilder<string> });

export class DevicesRepository {
  private readonly shaped = new ShapedStatements();

  async insert(db: Db, values: DeviceValues): Promise<Device> {
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
    const attributes = attributeColumns(changes);
    const { rows } = await deviceInsert(db, values, attributes).execute(db);
    return attributes ? deviceAndAttributes(rows) : { device: rows[0]!, attributes: [] };
  }

  /**
   * A new device for a token the app had no device with a moment ago, with its custom attributes, in one autocommit
   * statement (no transaction) that takes the token's lock (`lockToken`) itself before its row is inserted: it is
   * serialised with every other write giving a device this token, as the locked way is. Undefined when a device got
   * the token meanwhile (the unique index refuses the row, and the statement commits nothing): the locked way decides.
   * Each phone that installs the app runs it: compiled once a shape (ShapedStatements).
   */
  async insertNewToken(
    db: Db,
    values: NewDevice & { token: string },
    changes: CustomChanges,
  ): Promise<{ device: Device; attributes: DeviceAttributeRow[] } | undefined> {
    const { app_id: appId, ...columns } = values;
    const attributes = attributeColumns(changes);
    const shape = `insertNewToken ${!!attributes} ${definedKeys(columns)}`;
    const query = this.shaped.query(
      db,
      shape,
      (b) => ({
        appId: b.slot(appId),
        lock: b.slot(tokenLockName(appId, values.token)),
        columns: b.slots(columns),
        attributes: attributes && b.slots(attributes),
      }),
      // the app id is read through the lock, so the lock is held before the row exists
      (p) => deviceInsert(db, { ...p.columns, app_id: sql<string>`(select ${p.appId}::uuid from ${lockOfName(p.lock)})` }, p.attributes),
    );
    try {
      const { rows } = await db.executeQuery(query);
      return attributes ? deviceAndAttributes(rows) : { device: rows[0]!, attributes: [] };
    } catch (err) {
      if (tokenTaken(err)) return undefined;
      throw err;
    }
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
   * Those of these devices, each of its app, that no other transaction holds, locked, each with whether it is
   * erased: the map leaves out the unknown ones and those held (waiting for none, a group cannot deadlock or stall).
   */
  async lockForReports(db: Transaction<Database>, devices: readonly { appId: string; deviceId: string }[]): Promise<Map<string, boolean>> {
    const known = devices.filter((d) => isUuid(d.deviceId));
    if (known.length === 0) return new Map();
    const { rows } = await sql<{ id: string; erased: boolean }>`
      select d.id, d.erased_at is not null as erased
      from unnest(${known.map((d) => d.appId)}::uuid[], ${known.map((d) => d.deviceId)}::uuid[]) as k(app_id, id)
      join lateral (
        select id, erased_at
        from devices
        where id = k.id and app_id = k.app_id
        offset 0
        for update skip locked) d on true`.execute(db);
    return new Map(rows.map((r) => [r.id, r.erased]));
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

  /** A user's devices in id order, the first `limit`. */
  async userDevicesUpTo(db: Db, appId: string, userId: string, limit: number): Promise<Device[]> {
    return userDevices(db, appId, userId).selectAll().orderBy('id').limit(limit).execute();
  }

  /** The ids of a user's live devices, in id order. */
  async userDeviceIds(db: Db, appId: string, userId: string): Promise<string[]> {
    const rows = await userDevices(db, appId, userId).select('id').orderBy('id').execute();
    return rows.map((r) => r.id);
  }

  /**
   * The device holding a token, read without a lock, with whether `set` would change it (as `updateLocked` decides)
   * and, when it would not, its custom attributes: what a registration needs to tell that it changes nothing.
   */
  async findUnlockedByToken(
    db: Db,
    appId: string,
    token: string,
    set: DeviceUpdate,
    fillCountry: string | null,
  ): Promise<{ device: Device; changes: boolean; attributes: DeviceAttributeRow[] } | undefined> {
    const fill = fillCountry !== null && set.country === undefined ? fillCountry : null;
    const query = this.shaped.query(
      db,
      `findUnlockedByToken ${fill !== null} ${definedKeys(set)}`,
      (b) => ({
        set: b.slots(set),
        fill: fill === null ? null : b.slot(fill),
        appId: b.slot(appId),
        key: b.slot(tokenKey(token)),
        token: b.slot(token),
      }),
      (p) =>
        db
          .selectFrom('devices')
          .selectAll()
          .select((changedFrom(withCountry(p.set, p.fill, 'devices')) ?? sql<SqlBool>`false`).as('pushd_changes'))
          .where('app_id', '=', p.appId)
          .where(holdsTokenOfKey(p.key, p.token)),
    );
    const row = (await db.executeQuery(query)).rows[0];
    if (!row) return undefined;
    const { pushd_changes, ...device } = row;
    if (pushd_changes) return { device, changes: true, attributes: [] };
    return { device, changes: false, attributes: await this.attributesOf(db, [device.id]) };
  }

  /**
   * The app's device with this push token (what the sdk key must prove to change it), row-locked until the
   * transaction ends (none: undefined).
   */
  async lockByToken(db: Transaction<Database>, appId: string, token: string): Promise<Device | undefined> {
    return db.selectFrom('devices').selectAll().where('app_id', '=', appId).where(holdsToken(token)).forUpdate().executeTakeFirst();
  }

  /**
   * `update` of a device read and row-locked in this transaction (`current`), written only when a column changes:
   * a device registering again as it was writes no row version, index entry or WAL, and is answered as it is.
   */
  async updateLocked(db: Transaction<Database>, current: Device, set: DeviceUpdate, fillCountry: string | null): Promise<Device> {
    const values = withCountry(set, fillCountry, 'devices');
    const changed = changedFrom(values);
    const q = db.updateTable('devices').set({ ...values, registered_at: sql<Date>`now()` });
    return (changed && (await q.where('id', '=', current.id).where(changed).returningAll().executeTakeFirst())) || current;
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
    await sql`select ${tokenLock(appId, token)}`.execute(db);
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
    const changed = changedAttributes(appId, deviceId, changes, stored);
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
    const rows = changed.flatMap(([name, attr]) => attributeRows(appId, deviceId, name, attr));
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

  /** Which of these live devices the filters match now (a journey's entry filters and branches). */
  async matchingIds(db: Db, appId: string, ids: string[], filters: Filter[], now: Date): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await db
      .selectFrom('devices as d')
      .select('d.id')
      .where('d.app_id', '=', appId)
      .where(deviceIdIn(ids))
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

  /**
   * The subscription keys of web devices as they are now, with the token (endpoint) they belong to: a push is
   * encrypted to the keys of the endpoint it goes to.
   */
  async webPushKeysOf(db: Db, deviceIds: string[]): Promise<Map<string, { token: string; p256dh: string; auth: string }>> {
    const { rows } = await sql<{ id: string; token: string; p256dh: string; auth: string }>`
      select id, token, web_push_p256dh as p256dh, web_push_auth as auth
      from devices
      where id = any(${deviceIds}::uuid[]) and token is not null and web_push_p256dh is not null and web_push_auth is not null`.execute(db);
    return new Map(rows.map(({ id, ...keys }) => [id, keys]));
  }

  /** The locales devices have now (a localized push is sent in each one's language); a device without one is absent. */
  async localesOf(db: Db, deviceIds: string[]): Promise<Map<string, string>> {
    const { rows } = await sql<{ id: string; locale: string }>`
      select id, locale
      from devices
      where id = any(${deviceIds}::uuid[]) and locale is not null`.execute(db);
    return new Map(rows.map((r) => [r.id, r.locale]));
  }
}

/** A new device's custom attributes as the columns of their rows, one array each (none: null). */
function attributeColumns(changes: CustomChanges) {
  const rows = [...changes].flatMap(([name, attr]) => attributeRows('', '', name, attr));
  return rows.length === 0 ? null : attributeArrays(rows);
}

/** The insert of a device, with its attributes' rows (`attributeColumns`) when it has some, answering what it stored. */
function deviceInsert(db: Db, values: DeviceValues, a: ReturnType<typeof attributeColumns>) {
  if (!a) return sql<Device & AttributeColumns>`${db.insertInto('devices').values(values).returningAll()}`;
  return sql<Device & AttributeColumns>`
    with d as (${db.insertInto('devices').values(values).returningAll()}),
    a as (
      insert into device_attributes (device_id, app_id, name, type, position, is_array, str_value, num_value, date_value, bool_value)
      select d.id, d.app_id, x.* from d,
        unnest(${a.name}::text[], ${a.type}::text[], ${a.position}::int2[], ${a.is_array}::bool[],
               ${a.str_value}::text[], ${a.num_value}::float8[], ${a.date_value}::timestamptz[],
               ${a.bool_value}::bool[]) as x
      returning name, type, position, is_array, str_value, num_value, date_value, bool_value)
    select d.*, a.name as a_name, a.type as a_type, a.position as a_position, a.is_array as a_is_array,
      a.str_value as a_str_value, a.num_value as a_num_value, a.date_value as a_date_value, a.bool_value as a_bool_value
    from d cross join a`;
}

/** The keys of a row whose values are given, in order: what a shaped statement's text depends on. */
function definedKeys(row: Record<string, unknown>): string {
  let keys = '';
  for (const key in row) if (row[key] !== undefined) keys += `${key},`;
  return keys;
}
