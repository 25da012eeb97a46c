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

/** A push open of a device, as `recordOpens` stores it. */
export interface OpenRow {
  appId: string;
  deviceId: string;
  notificationId: string;
  kind: 'direct' | 'indirect';
  openedAt: Date;
}

/** The notification an open names, as its checks read it (`openTargets`). */
export interface OpenTarget {
  createdAt: Date;
  /** whether delivery recorded it as received by the device */
  received: boolean;
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
   * For each open, the notification it names if that is one of its app's, with when it was created and whether the
   * device received it (delivery's receipt): a probe of each table's key an open, the receipts in any day's partition.
   */
  async openTargets(db: Db, opens: readonly OpenRow[]): Promise<(OpenTarget | undefined)[]> {
    if (opens.length === 0) return [];
    const col = <T>(f: (o: OpenRow, i: number) => T) => opens.map(f);
    const { rows } = await sql<{ ord: number; created_at: Date; received: boolean }>`
      select k.ord, n.created_at, r.found is not null as received
      from unnest(
        ${col((_, i) => i)}::int[], ${col((o) => o.appId)}::uuid[], ${col((o) => o.notificationId)}::uuid[],
        ${col((o) => o.deviceId)}::uuid[]
      ) as k(ord, app_id, notification_id, device_id)
      -- by its id alone, a probe of the primary key: with the app in it, a plan took the app's index of the day
      join lateral (
        select app_id, created_at
        from notifications
        where id = k.notification_id
        offset 0) n on n.app_id = k.app_id
      left join lateral (
        select 1 as found
        from device_pushes
        where device_id = k.device_id and notification_id = k.notification_id
        limit 1) r on true`.execute(db);
    const found = new Map(rows.map((r) => [r.ord, { createdAt: r.created_at, received: r.received }]));
    return opens.map((_, i) => found.get(i));
  }

  /**
   * Stores each push open the first time its device reports this kind for this notification (the trigger counts
   * it), looked up in any day's partition (a probe of its key each); each device's last open moves to it, never
   * backwards. As for sessions, the caller holds every device's row lock and passes each device once.
   */
  async recordOpens(db: Db, opens: readonly OpenRow[]): Promise<void> {
    if (opens.length === 0) return;
    const col = <T>(f: (o: OpenRow) => T) => opens.map(f);
    await sql`
      with input as (
        select * from unnest(
          ${col((o) => o.notificationId)}::uuid[], ${col((o) => o.kind)}::text[], ${col((o) => o.deviceId)}::uuid[],
          ${col((o) => o.appId)}::uuid[], ${col((o) => o.openedAt.toISOString())}::timestamptz[]
        ) as t(notification_id, kind, device_id, app_id, opened_at)),
      stored as (
        insert into push_opens (notification_id, kind, device_id, app_id, opened_at)
        select i.notification_id, i.kind, i.device_id, i.app_id, i.opened_at
        from input i
        left join lateral (
          select 1 as found
          from push_opens o
          where o.notification_id = i.notification_id and o.kind = i.kind and o.device_id = i.device_id
          limit 1) o on true
        where o.found is null
        returning device_id, opened_at)
      update devices d set last_opened_at = greatest(d.last_opened_at, s.opened_at)
      from stored s
      where d.id = s.device_id
        and d.last_opened_at is distinct from greatest(d.last_opened_at, s.opened_at)`.execute(db);
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
