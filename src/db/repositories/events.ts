import { sql, type Selectable } from 'kysely';
import type { Db } from '../database.js';
import type { DeviceEventsTable } from '../schema.js';
import type { EventAggregate } from '../../domain/device-input.js';

export type DeviceEventRow = Selectable<DeviceEventsTable>;

/** Per device and event (source + name): how often, first and last time. */
export class EventsRepository {
  /**
   * Adds events to the aggregates in one statement. ON CONFLICT DO UPDATE is atomic per row, so concurrent
   * posts add up instead of overwriting each other; rows go in a fixed order (the caller sorts) so two
   * multi-row upserts cannot deadlock. An event a device does not hold yet is added only while the device holds
   * fewer than `maxPerDevice` (requests running at once may each take the last places). The device's events are
   * read by a probe of the key an input row (a subquery the planner keeps, `offset 0`), whatever it estimates the
   * input to hold: the statement runs on its generic plan (`onGenericPlans`), which takes the arrays for 10 rows.
   */
  async record(db: Db, appId: string, rows: { deviceId: string; event: EventAggregate }[], maxPerDevice: number): Promise<void> {
    if (rows.length === 0) return;
    await sql`
      with input as (
        select * from unnest(${rows.map((r) => r.deviceId)}::uuid[], ${rows.map((r) => r.event.source)}::text[],
                             ${rows.map((r) => r.event.name)}::text[], ${rows.map((r) => r.event.count)}::bigint[],
                             ${rows.map((r) => r.event.first.toISOString())}::timestamptz[],
                             ${rows.map((r) => r.event.last.toISOString())}::timestamptz[])
          with ordinality as t(device_id, source, name, count, first_at, last_at, n)
      ),
      held as (
        select d.device_id, (select count(*) from device_events e where e.device_id = d.device_id) as events
        from (select distinct device_id from input) d
      ),
      marked as (
        select i.*, e.known is not null as known,
               row_number() over (partition by i.device_id, e.known is null order by i.n) as nth
        from input i
        left join lateral (
          select true as known from device_events e
          where e.device_id = i.device_id and e.source = i.source and e.name = i.name
          offset 0) e on true
      )
      insert into device_events (device_id, app_id, source, name, count, first_happened_at, last_happened_at)
      select m.device_id, ${appId}::uuid, m.source, m.name, m.count, m.first_at, m.last_at
      from marked m left join held h on h.device_id = m.device_id
      where m.known or coalesce(h.events, 0) + m.nth <= ${maxPerDevice}
      order by m.n
      on conflict (device_id, source, name) do update set
        count = device_events.count + excluded.count,
        first_happened_at = least(device_events.first_happened_at, excluded.first_happened_at),
        last_happened_at = greatest(device_events.last_happened_at, excluded.last_happened_at)
    `.execute(db);
  }

  async forDevices(db: Db, deviceIds: string[]): Promise<DeviceEventRow[]> {
    if (deviceIds.length === 0) return [];
    return db
      .selectFrom('device_events')
      .selectAll()
      .where('device_id', 'in', deviceIds)
      .orderBy('device_id')
      .orderBy('source')
      .orderBy('name')
      .execute();
  }
}
