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
   * multi-row upserts cannot deadlock.
   */
  async record(db: Db, appId: string, rows: { deviceId: string; event: EventAggregate }[]): Promise<void> {
    if (rows.length === 0) return;
    await sql`
      insert into device_events (device_id, app_id, source, name, count, first_happened_at, last_happened_at)
      select device_id, ${appId}::uuid, source, name, count, first_at, last_at
      from unnest(${rows.map((r) => r.deviceId)}::uuid[], ${rows.map((r) => r.event.source)}::text[], ${rows.map((r) => r.event.name)}::text[],
                  ${rows.map((r) => r.event.count)}::bigint[], ${rows.map((r) => r.event.first.toISOString())}::timestamptz[],
                  ${rows.map((r) => r.event.last.toISOString())}::timestamptz[])
        as t(device_id, source, name, count, first_at, last_at)
      on conflict (device_id, source, name) do update set
        count = device_events.count + excluded.count,
        first_happened_at = least(device_events.first_happened_at, excluded.first_happened_at),
        last_happened_at = greatest(device_events.last_happened_at, excluded.last_happened_at)
    `.execute(db);
  }

  /** One of these devices that holds more than `max` distinct events, or null. */
  async deviceOverLimit(db: Db, deviceIds: string[], max: number): Promise<string | null> {
    const { rows } = await sql<{ device_id: string }>`
      select device_id from device_events where device_id = any(${deviceIds}::uuid[])
      group by device_id having count(*) > ${max} limit 1`.execute(db);
    return rows[0]?.device_id ?? null;
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
