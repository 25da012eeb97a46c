import { sql } from 'kysely';
import type { Db } from '../database.js';
import type { CustomChanges } from '../../domain/device-input.js';
import { parseFilterName, type Filter } from '../../domain/filters.js';
import { attributeRows } from './devices.js';
import type { Device } from '../schema.js';

/** The device columns a filter of that name reads (geo filters, read from two columns each, are left out). */
const COLUMNS: Record<string, string> = {
  locale: 'locale',
  time_zone: 'time_zone',
  created_at: 'created_at',
  registered_at: 'registered_at',
  badge: 'badge',
  os_name: 'os_name',
  os_version: 'os_version',
  app_version: 'app_version',
  sdk_version: 'sdk_version',
  device_id: 'id',
  country: 'country',
  marketing_name: 'marketing_name',
  user_id: 'user_id',
  user_email: 'user_email',
  development: 'development',
  notifications_allowed: 'notifications_allowed',
  tags: 'tags',
  platform: 'platform',
};

/** A device as entering reads it: which one, and its user. */
export type LiveDevice = Pick<Device, 'id' | 'user_id'>;

/** What a journey's steps read and write of the entrants' devices: the values a branch read, an update's writes. */
export class JourneyDevicesRepository {
  /**
   * The value of each thing the filters name, per device, as the device holds it now: a column, a custom attribute
   * (its value, or its values when an array) or an event's count. One statement.
   */
  async filterValues(db: Db, ids: string[], filters: Filter[]): Promise<Map<string, Record<string, unknown>>> {
    const names = [...new Set(filters.map((f) => f.name))];
    const parts = names.flatMap((name) => {
      const target = parseFilterName(name);
      if (!target) return [];
      if (target.type === 'device') return COLUMNS[name] ? [sql`${name}::text, to_jsonb(d.${sql.ref(COLUMNS[name]!)})`] : [];
      if (target.type === 'custom')
        return [
          sql`${name}::text, (select case when bool_or(a.is_array) then jsonb_agg(coalesce(to_jsonb(a.str_value), to_jsonb(a.num_value),
                to_jsonb(a.date_value), to_jsonb(a.bool_value)) order by a.position)
              else coalesce(to_jsonb(min(a.str_value)), to_jsonb(min(a.num_value)), to_jsonb(min(a.date_value)),
                            to_jsonb(bool_or(a.bool_value))) end
              from device_attributes a where a.device_id = d.id and a.name = ${target.attribute})`,
        ];
      const source = target.source === '' ? sql`true` : sql`ev.source = ${target.source}`;
      return [
        sql`${name}::text, (select coalesce(sum(ev.count), 0) from device_events ev
                            where ev.device_id = d.id and ev.name = ${target.event} and ${source})`,
      ];
    });
    if (parts.length === 0 || ids.length === 0) return new Map();
    const { rows } = await sql<{ id: string; v: Record<string, unknown> }>`
      select d.id, jsonb_build_object(${sql.join(parts)}) as v from devices d where d.id = any(${ids}::uuid[])`.execute(db);
    return new Map(rows.map((r) => [r.id, r.v]));
  }

  /** The time zone each of these devices names (null: none), by id; a best-time send takes their zones so. */
  async timeZonesOf(db: Db, ids: string[]): Promise<Map<string, string | null>> {
    if (ids.length === 0) return new Map();
    const rows = await db
      .selectFrom('devices')
      .select(['id', 'time_zone'])
      .where('id', '=', sql<string>`any(${ids}::uuid[])`)
      .execute();
    return new Map(rows.map((r) => [r.id, r.time_zone]));
  }

  /**
   * Each device's sessions and push opens since `since` by the hour of its local day (in its zone, as given): 24
   * counts; a device with none is absent.
   */
  async activityHours(db: Db, devices: { id: string; zone: string }[], since: Date): Promise<Map<string, number[]>> {
    if (devices.length === 0) return new Map();
    const { rows } = await sql<{ device_id: string; hour: number; n: number }>`
      with device as (select * from unnest(${devices.map((d) => d.id)}::uuid[], ${devices.map((d) => d.zone)}::text[]) as t(id, zone)),
      activity as (
        select device_id, started_at as at from app_sessions where device_id in (select id from device) and started_at >= ${since}
        union all
        select device_id, opened_at from push_opens where device_id in (select id from device) and opened_at >= ${since}
      )
      select a.device_id, extract(hour from a.at at time zone d.zone)::int as hour, count(*)::int as n
      from activity a join device d on d.id = a.device_id
      group by 1, 2`.execute(db);
    const out = new Map<string, number[]>();
    for (const r of rows) {
      const hours = out.get(r.device_id) ?? new Array<number>(24).fill(0);
      hours[r.hour] = r.n;
      out.set(r.device_id, hours);
    }
    return out;
  }

  /** Those of the devices that are live, by id, with their user (all entering reads), share-locked as an events request locks them. */
  async liveDevices(db: Db, ids: string[]): Promise<Map<string, LiveDevice>> {
    const { rows } = await sql<LiveDevice>`
      select id, user_id from devices where id = any(${ids}::uuid[]) and erased_at is null order by id for share`.execute(db);
    return new Map(rows.map((d) => [d.id, d]));
  }

  /** The live devices of these entrants: each device, and every device of each user; with their user. */
  async entrantDevices(db: Db, appId: string, deviceIds: string[], userIds: string[]): Promise<{ id: string; user_id: string | null }[]> {
    const { rows } = await sql<{ id: string; user_id: string | null }>`
      select id, user_id from devices
      where app_id = ${appId} and erased_at is null and (id = any(${deviceIds}::uuid[]) or user_id = any(${userIds}::text[]))
      order by id`.execute(db);
    return rows;
  }

  /** The custom attribute names each device holds. */
  async attributeNames(db: Db, ids: string[]): Promise<Map<string, string[]>> {
    const { rows } = await sql<{ device_id: string; names: string[] }>`
      select device_id, array_agg(distinct name) as names from device_attributes where device_id = any(${ids}::uuid[])
      group by device_id`.execute(db);
    return new Map(rows.map((r) => [r.device_id, r.names]));
  }

  /**
   * Sets or removes custom attributes (`changes` per device, as admitted under its limit) and adds and removes tags
   * (at most `maxTags` kept: past it a device's tags stay as they were), in three statements for all the devices;
   * each device changed has its registered_at moved, as a write through the API moves it.
   */
  async update(
    db: Db,
    appId: string,
    change: { changes: Map<string, CustomChanges>; addTags: string[]; removeTags: string[]; maxTags: number },
  ): Promise<void> {
    const ids = [...change.changes.keys()];
    if (ids.length === 0) return;
    const removed = [...change.changes].flatMap(([id, c]) => [...c.keys()].map((name) => ({ id, name })));
    if (removed.length)
      await sql`
        delete from device_attributes a
        using unnest(${removed.map((r) => r.id)}::uuid[], ${removed.map((r) => r.name)}::text[]) as r(device_id, name)
        where a.device_id = r.device_id and a.name = r.name`.execute(db);
    const rows = [...change.changes].flatMap(([deviceId, c]) =>
      [...c].flatMap(([name, attr]) => attributeRows(appId, deviceId, name, attr)),
    );
    if (rows.length) await db.insertInto('device_attributes').values(rows).execute();
    await sql`
      update devices d
      set tags = case when cardinality(t.tags) <= ${change.maxTags} then t.tags else d.tags end, registered_at = now()
      from (select id, array(select x from unnest(tags || ${change.addTags}::text[]) with ordinality as u(x, i)
                             where x <> all(${change.removeTags}::text[]) group by x order by min(i)) as tags
            from devices where id = any(${ids}::uuid[])) t
      where d.id = t.id`.execute(db);
  }
}
