import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../database.js';
import type { AbBounds } from '../../domain/ab-test.js';
import type { LocalPlan } from '../../domain/campaign.js';
import type { Notification } from '../schema.js';

/** A bucket's figures: `bucket` a variant's index, -1 the holdout, -2 the rest (`HOLDOUT`, `REST`). */
export interface BucketFigures {
  bucket: number;
  sent: number;
  failed: number;
  direct_opens: number;
  opened: number;
}

export interface BucketConversions {
  bucket: number;
  source: string;
  name: string;
  count: number;
}

/**
 * A bucket's app opens: of its devices sent the test's push (a variant's), or of its holdout devices (sent nothing),
 * those that started an app session within the window after it was received, or after the fan-out met them.
 */
export interface BucketAppOpens {
  bucket: number;
  devices: number;
  app_opened: number;
}

/**
 * The bucket of the row's `device_id` for notification `id`: `abPoint` and `bucketOf` of src/domain/ab-test.ts in
 * SQL (the first 32 bits of md5(notification id || device id) on the line the bounds cut).
 */
function bucketSql(notificationId: string, b: AbBounds): RawBuilder<number> {
  const h = sql`('x' || substr(md5(${notificationId}::text || device_id::text), 1, 8))::bit(32)::bigint`;
  return sql<number>`case when ${h} < ${b.testEnd}::bigint then (${h} * ${b.variants}::bigint / ${b.testEnd}::bigint)::int
    when ${h} < ${b.holdoutEnd}::bigint then -1 else -2 end`;
}

export interface AbFigures {
  buckets: BucketFigures[];
  conversions: BucketConversions[];
}

/** The stages of an A/B test (migration 036) and its figures per variant and its holdout's (migration 039). */
export class AbTestsRepository {
  /**
   * The test share is out: the notification waits for its winner (picked at `at`, or by hand when null: it waits
   * for ever, and the sweeper leaves it be); the rest's fan-out will start from the first device and wave again.
   */
  async awaitWinner(db: Db, notificationId: string, generation: number, at: Date | null): Promise<void> {
    await sql`
      update notifications
      set ab_stage = 'waiting', wave = 0, fanout_cursor = null,
          next_due_at = coalesce(${at}::timestamptz, 'infinity'::timestamptz), updated_at = now()
      where id = ${notificationId}::uuid and generation = ${generation}::int and ab_stage is null
        and state in ('scheduled', 'sending')`.execute(db);
  }

  /**
   * Picks the winner of a test that is waiting for it, once: the rest's fan-out is due now, or by its new plan
   * (`restTiming`). Null when it is not
   * waiting (still sending its test share, picked before, finished or canceled).
   */
  async pick(
    db: Db,
    notificationId: string,
    winner: number,
    at: Date,
    rest: { localPlan: LocalPlan | null; nextDueAt: Date | null },
  ): Promise<Pick<Notification, 'id' | 'generation'> | null> {
    const { rows } = await sql<Pick<Notification, 'id' | 'generation'>>`
      update notifications
      set ab_stage = 'rest', ab_winner = ${winner}::smallint, ab_picked_at = ${at}::timestamptz,
          local_plan = ${rest.localPlan ? JSON.stringify(rest.localPlan) : null}::jsonb, next_due_at = ${rest.nextDueAt}::timestamptz,
          wave = 0, fanout_cursor = null, updated_at = now()
      where id = ${notificationId}::uuid and ab_stage = 'waiting' and state in ('scheduled', 'sending')
      returning id, generation`.execute(db);
    return rows[0] ?? null;
  }

  /**
   * A test's figures per bucket: pushes from its batches (the test's by variant, the rest's as -2), direct opens
   * and devices that opened from its opens, conversions per event, each device placed by its bucket; the holdout's
   * (-1) events within their window (ab_holdout_conversions).
   */
  async figures(db: Db, notificationId: string, b: AbBounds): Promise<AbFigures> {
    const bucket = bucketSql(notificationId, b);
    const [buckets, conversions] = await Promise.all([
      sql<BucketFigures>`
        with sent as (
          select case when ab_rest then -2 else variant end as bucket, sum(succeeded)::int as sent, sum(failed)::int as failed
          from delivery_batches where notification_id = ${notificationId}::uuid and variant is not null group by 1
        ), opens as (
          select ${bucket} as bucket, count(*) filter (where kind = 'direct')::int as direct_opens, count(distinct device_id)::int as opened
          from push_opens where notification_id = ${notificationId}::uuid group by 1
        )
        select coalesce(s.bucket, o.bucket) as bucket, coalesce(s.sent, 0) as sent, coalesce(s.failed, 0) as failed,
               coalesce(o.direct_opens, 0) as direct_opens, coalesce(o.opened, 0) as opened
        from sent s full join opens o on o.bucket = s.bucket
        order by 1 desc`.execute(db),
      sql<BucketConversions>`
        select ${bucket} as bucket, source, name, sum(count)::float8 as count
        from notification_conversions where notification_id = ${notificationId}::uuid
        group by 1, 2, 3
        union all
        select -1, source, name, sum(count)::float8
        from ab_holdout_conversions where notification_id = ${notificationId}::uuid
        group by 2, 3
        order by 1 desc, 2, 3`.execute(db),
    ]);
    return { buckets: buckets.rows, conversions: conversions.rows };
  }

  /**
   * A test's app opens per variant (its test share) and for its holdout: each variant device from when it received
   * the push (device_pushes, by its key), each holdout device from when the fan-out met it (`since`); a session
   * counts when it started within [then, then + window], the window an event counts in as a conversion.
   */
  async appOpens(db: Db, notificationId: string, windowHours: number): Promise<BucketAppOpens[]> {
    const window = sql`make_interval(hours => ${windowHours}::int)`;
    const { rows } = await sql<BucketAppOpens>`
      select b.variant as bucket, count(*)::int as devices,
             count(*) filter (where exists (
               select 1 from app_sessions s
               where s.device_id = r.device_id
                 and s.started_at >= r.received_at and s.started_at <= r.received_at + ${window}
             ))::int as app_opened
      from delivery_batches b
      cross join lateral unnest(b.device_ids) as d(id)
      cross join lateral (
        select p.device_id, min(p.received_at) as received_at from device_pushes p
        where p.device_id = d.id and p.notification_id = ${notificationId}::uuid
        group by p.device_id) r
      where b.notification_id = ${notificationId}::uuid and b.variant is not null and not b.ab_rest
      group by 1
      union all
      select -1, count(*)::int,
             count(*) filter (where exists (
               select 1 from app_sessions s
               where s.device_id = h.device_id and s.started_at >= h.since and s.started_at <= h.since + ${window}))::int
      from ab_holdout_devices h where h.notification_id = ${notificationId}::uuid
      order by 1 desc`.execute(db);
    return rows;
  }
}
