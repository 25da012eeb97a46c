import { sql } from 'kysely';
import type { Db } from '../database.js';

/** One event as a device sent it: when it happened matters, not only how often. */
export interface DeviceEvent {
  deviceId: string;
  source: string;
  name: string;
  at: Date;
}

export interface ConversionCount {
  source: string;
  name: string;
  count: number;
}

/**
 * Event conversions: an event a device sent within the window after receiving a push counts for that push.
 *
 * Attributed when the event arrives, not computed when statistics are read: delivery records which device
 * received which push (device_pushes, one row per push, written by the statement that records the attempt), so
 * an event costs one primary-key probe of its device's recent pushes, and reading a notification's conversions
 * reads only its own rows. Computing them at read time instead would mean an event log and a join of every
 * device the push reached with it (a second or more for a million devices); attributing through opens would
 * miss the devices that convert without opening the push.
 */
export class ConversionsRepository {
  /**
   * Adds each event to the pushes its device received at most `windowHours` before it happened (a push received
   * after the event does not count), once the event is recorded on the device, and once per push; counted on the
   * event's UTC day, the partition retention drops it with. Rows go in key order so concurrent posts cannot deadlock.
   */
  async attribute(db: Db, events: DeviceEvent[], windowHours: number): Promise<void> {
    if (events.length === 0) return;
    // a probe of the key an event, whatever the generic plan (`onGenericPlans`) estimates the input to hold
    const heldEvent = sql`select 1 from device_events held
      where held.device_id = e.device_id and held.source = e.source and held.name = e.name offset 0`;
    // An A/B test's holdout device received nothing: its events count, in the same window after the moment its
    // test's fan-out met it, as the baseline its variants' conversions are set beside (ab_holdout_conversions).
    await sql`
      with input as (
        select * from unnest(${events.map((e) => e.deviceId)}::uuid[], ${events.map((e) => e.source)}::text[],
                             ${events.map((e) => e.name)}::text[], ${events.map((e) => e.at.toISOString())}::timestamptz[])
          as e(device_id, source, name, at)
      ),
      held_out as (
        insert into ab_holdout_conversions as c (notification_id, device_id, source, name, count)
        select h.notification_id, e.device_id, e.source, e.name, count(*)
        from input e
        cross join lateral (
          select h.notification_id from ab_holdout_devices h
          where h.device_id = e.device_id
            and h.since <= e.at and h.since >= e.at - make_interval(hours => ${windowHours}::int)
          offset 0) h
        cross join lateral (${heldEvent}) held
        group by 1, 2, 3, 4
        order by 1, 2, 3, 4
        on conflict (notification_id, device_id, source, name) do update set count = c.count + excluded.count
      )
      insert into notification_conversions as c (notification_id, source, name, device_id, day, count)
      select p.notification_id, e.source, e.name, e.device_id, (e.at at time zone 'UTC')::date, count(*)
      from input e
      -- each push once, however many receipts the device has of it (a collapse_key re-send, a batch recorded again)
      cross join lateral (
        select distinct r.notification_id from device_pushes r
        where r.device_id = e.device_id
          and r.received_at <= e.at and r.received_at >= e.at - make_interval(hours => ${windowHours}::int)) p
      -- only the events the device holds (it holds a bounded number: EventsRepository.record)
      cross join lateral (${heldEvent}) held
      group by 1, 2, 3, 4, 5
      order by 1, 2, 3, 4, 5
      on conflict (notification_id, source, name, device_id, day) do update set count = c.count + excluded.count`.execute(db);
  }

  /** A notification's conversions per event. */
  async countsFor(db: Db, notificationId: string): Promise<ConversionCount[]> {
    const { rows } = await sql<ConversionCount>`
      select source, name, sum(count)::float8 as count from notification_conversions
      where notification_id = ${notificationId}::uuid
      group by source, name order by source, name`.execute(db);
    return rows;
  }
}
