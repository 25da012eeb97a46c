import { sql } from 'kysely';
import type { Db } from '../database.js';
import type { DailyMetric } from '../../domain/activity.js';

export interface DayCount {
  /** YYYY-MM-DD, UTC */
  date: string;
  count: number;
}

/** A session report of a device, as `recordSessions` stores it. */
export interface SessionRow {
  appId: string;
  deviceId: string;
  id: string;
  startedAt: Date;
  durationSeconds: number | null;
}

export interface OpenCounts {
  direct: number;
  indirect: number;
  /** devices that opened the app after the push, tapped or not */
  devices: number;
}

/**
 * App sessions and push opens, and the daily figures counted from them. The daily figures are kept by the
 * triggers of migration 012 in the statement that stores a session, an open or a device, so what is stored
 * and what is counted cannot drift apart; reading a month is an index range of about 500 rows.
 */
export class ActivityRepository {
  /**
   * Stores each session the first time its id is reported (the trigger counts it), and its duration from the first
   * report that carries one; each device's last open moves to its session's start, never backwards. A resent report
   * may give another start, so a session is found by its id in any day's partition (a probe of its key each). The
   * caller holds every device's row lock, so two reports of one device cannot both find none and insert, and passes
   * each device once: a device twice would not see its own first report (one statement, one snapshot).
   */
  async recordSessions(db: Db, sessions: readonly SessionRow[]): Promise<void> {
    if (sessions.length === 0) return;
    const col = <T>(f: (s: SessionRow) => T) => sessions.map(f);
    await sql`
      with input as (
        select * from unnest(
          ${col((s) => s.deviceId)}::uuid[], ${col((s) => s.id)}::uuid[], ${col((s) => s.appId)}::uuid[],
          ${col((s) => s.startedAt.toISOString())}::timestamptz[], ${col((s) => s.durationSeconds)}::int[]
        ) as t(device_id, id, app_id, started_at, duration_seconds)),
      known as (
        select i.device_id, i.id, k.started_at, i.duration_seconds,
          k.duration_seconds is null and i.duration_seconds is not null as ends
        from input i
        join lateral (
          select s.started_at, s.duration_seconds
          from app_sessions s
          where s.device_id = i.device_id and s.id = i.id
          offset 0) k on true),
      completed as (
        update app_sessions s set duration_seconds = k.duration_seconds
        from known k
        where s.device_id = k.device_id and s.id = k.id and s.started_at = k.started_at and k.ends),
      stored as (
        insert into app_sessions (device_id, id, app_id, started_at, duration_seconds)
        select i.device_id, i.id, i.app_id, i.started_at, i.duration_seconds
        from input i
        where not exists (select 1 from known k where k.device_id = i.device_id and k.id = i.id)
        returning device_id, started_at)
      update devices d set last_opened_at = greatest(d.last_opened_at, s.started_at)
      from stored s
      where d.id = s.device_id
        and d.last_opened_at is distinct from greatest(d.last_opened_at, s.started_at)`.execute(db);
  }

  /**
   * Stores a push open the first time this device reports this kind for this notification (the trigger counts it),
   * looked up in any day's partition under the device's row lock the caller holds, as a session is.
   */
  async recordOpen(
    db: Db,
    appId: string,
    deviceId: string,
    open: { notificationId: string; kind: 'direct' | 'indirect'; openedAt: Date },
  ): Promise<void> {
    await sql`
      with stored as (
        insert into push_opens (notification_id, kind, device_id, app_id, opened_at)
        select ${open.notificationId}::uuid, ${open.kind}, ${deviceId}::uuid, ${appId}::uuid, ${open.openedAt}::timestamptz
        where not exists (
          select 1 from push_opens
          where notification_id = ${open.notificationId}::uuid and kind = ${open.kind} and device_id = ${deviceId}::uuid)
        returning opened_at)
      update devices set last_opened_at = greatest(last_opened_at, stored.opened_at)
      from stored where devices.id = ${deviceId}::uuid
        and last_opened_at is distinct from greatest(last_opened_at, stored.opened_at)`.execute(db);
  }

  /** One row a day from `from` to `to` (YYYY-MM-DD, both included), oldest first; days without data count 0. */
  async daily(db: Db, appId: string, metric: DailyMetric, from: string, to: string): Promise<DayCount[]> {
    const { rows } = await sql<DayCount>`
      select to_char(d.day, 'YYYY-MM-DD') as date, coalesce(sum(s.${sql.ref(metric)}), 0)::int as count
      from generate_series(${from}::date, ${to}::date, interval '1 day') as d(day)
      left join app_daily_stats s on s.app_id = ${appId}::uuid and s.day = d.day::date
      group by d.day
      order by d.day`.execute(db);
    return rows;
  }

  /** Devices installed from `from` (null: ever) to `to`, both included. */
  async totalInstalls(db: Db, appId: string, from: string | null, to: string): Promise<number> {
    const { rows } = await sql<{ n: string }>`
      select coalesce(sum(installs), 0)::bigint as n from app_daily_stats
      where app_id = ${appId}::uuid and day <= ${to}::date and (${from}::date is null or day >= ${from}::date)`.execute(db);
    return Number(rows[0]!.n);
  }

  /** A notification's opens: index-only counts on push_opens' primary key. */
  async opensOf(db: Db, notificationId: string): Promise<OpenCounts> {
    const { rows } = await sql<OpenCounts>`
      select count(*) filter (where kind = 'direct')::int as direct,
             count(*) filter (where kind = 'indirect')::int as indirect,
             count(distinct device_id)::int as devices
      from push_opens where notification_id = ${notificationId}::uuid`.execute(db);
    return rows[0]!;
  }
}
