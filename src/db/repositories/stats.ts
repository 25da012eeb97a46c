import { sql } from 'kysely';
import type { Db } from '../database.js';
import type { Platform } from '../schema.js';

export interface DeviceGroupStats {
  platform: Platform;
  development: boolean;
  devices: number;
  push_enabled: number;
  with_token: number;
}

export interface PushDay {
  /** YYYY-MM-DD, UTC */
  date: string;
  succeeded: number;
  failed: number;
  invalidated: number;
}

/** App-wide figures for the console's overview. Erased devices count nowhere. */
export class StatsRepository {
  /** Live devices per platform and environment; `push_enabled` as on the device record, `with_token` = can be pushed to. */
  async deviceGroups(db: Db, appId: string): Promise<DeviceGroupStats[]> {
    const rows = await db
      .selectFrom('devices')
      .select(['platform', 'development'])
      .select([
        sql<number>`count(*)::int`.as('devices'),
        sql<number>`(count(*) filter (where notifications_allowed = 'Enabled'))::int`.as('push_enabled'),
        sql<number>`(count(*) filter (where token is not null and token_invalidated_at is null))::int`.as('with_token'),
      ])
      .where('app_id', '=', appId)
      .where('erased_at', 'is', null)
      .groupBy(['platform', 'development'])
      .orderBy('platform')
      .orderBy('development')
      .execute();
    return rows;
  }

  /** Devices whose token a gateway rejected within the last `days` days. */
  async uninstalledSince(db: Db, appId: string, days: number): Promise<number> {
    const row = await db
      .selectFrom('devices')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('app_id', '=', appId)
      .where('token_invalidated_at', '>', sql<Date>`now() - make_interval(days => ${days}::int)`)
      .executeTakeFirstOrThrow();
    return row.n;
  }

  /**
   * Pushes of the last `days` UTC days (today included) by outcome, one row a day, oldest first, days without
   * pushes as zeros. A batch's pushes count on the day it started: its reserved start, else when it was made
   * (migration 043: what the index finds a day's batches by, which recording an attempt does not change).
   */
  async pushesPerDay(db: Db, appId: string, days: number): Promise<PushDay[]> {
    const { rows } = await sql<PushDay>`
      with days as (
        select generate_series(
                 (now() at time zone 'UTC')::date - (${days}::int - 1),
                 (now() at time zone 'UTC')::date,
                 interval '1 day'
               )::date as day
      ), totals as (
        select (coalesce(b.not_before, b.created_at) at time zone 'UTC')::date as day,
               sum(b.succeeded)::int as succeeded, sum(b.failed)::int as failed, sum(b.invalidated)::int as invalidated
        from delivery_batches b join notifications n on n.id = b.notification_id
        where n.app_id = ${appId}
          and coalesce(b.not_before, b.created_at) >= ((now() at time zone 'UTC')::date - (${days}::int - 1))::timestamp at time zone 'UTC'
        group by 1
      )
      select to_char(d.day, 'YYYY-MM-DD') as date,
             coalesce(t.succeeded, 0) as succeeded, coalesce(t.failed, 0) as failed, coalesce(t.invalidated, 0) as invalidated
      from days d left join totals t on t.day = d.day
      order by d.day`.execute(db);
    return rows;
  }
}
