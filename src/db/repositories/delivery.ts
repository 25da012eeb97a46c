import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { Database, DeliveryBatch, Platform } from '../schema.js';

/** What a delivery job needs of its batch (not the device id arrays: they stay in SQL). */
export type BatchHead = Pick<DeliveryBatch, 'id' | 'notification_id' | 'generation' | 'platform' | 'development' | 'state' | 'attempts'>;

/** A still-pending device of a batch; `token` is null when it can no longer receive (erased, token invalidated). */
export interface PendingTarget {
  deviceId: string;
  token: string | null;
}

export interface NewBatch {
  id: string;
  seq: number;
  platform: Platform;
  development: boolean;
  deviceIds: string[];
  /** a paced batch is not sent before this */
  notBefore?: Date | null;
}

export interface BatchOutcome {
  succeeded: string[];
  failed: { deviceId: string; reason: string }[];
  invalidated: { deviceId: string; reason: string }[];
  /** devices whose send must be retried; they stay pending */
  retry: string[];
  /** devices not sent because the notification expired; done with */
  expired: string[];
  lastError: string | null;
}

/** All SQL of the delivery pipeline but audience paging (the devices repository's): batches, counters, token invalidation. */
export class DeliveryRepository {
  /**
   * Stores the batches cut from one page and moves the fan-out checkpoint past it, atomically: a fan-out
   * that dies and runs again resumes after the last stored page and recreates no batch. One statement,
   * so the notification row (which every batch's results also update) is locked only while it runs.
   */
  async saveFanoutPage(
    db: Db,
    notificationId: string,
    generation: number,
    batches: NewBatch[],
    cursor: string,
    nextSeq: number,
    targeted: number,
  ): Promise<boolean> {
    const insert = storeBatches(notificationId, generation, batches);
    const { rows: result } = await sql<{ moved: number }>`
      with moved as (
        update notifications
        set fanout_cursor = ${cursor}::uuid, fanout_seq = ${nextSeq}::int, devices_targeted = devices_targeted + ${targeted}::int, updated_at = now()
        where id = ${notificationId}::uuid and generation = ${generation}::int and state <> 'canceled'
        returning 1)
      ${insert}
      select count(*)::int as moved from moved`.execute(db);
    return (result[0]?.moved ?? 0) > 0; // 0: superseded by a newer generation, or canceled
  }

  /**
   * Stores a whole (small) audience's batches with the notification that was just inserted in this transaction:
   * its fan-out is then done, and it is `sending`, or `sent` at once when no device matched.
   */
  async saveWholeAudience(
    trx: Transaction<Database>,
    notificationId: string,
    generation: number,
    batches: NewBatch[],
    targeted: number,
  ): Promise<void> {
    const insert = storeBatches(notificationId, generation, batches);
    await sql`
      with moved as (
        update notifications
        set fanout_done = true, fanout_seq = ${batches.length}::int, devices_targeted = ${targeted}::int,
            state = ${targeted === 0 ? 'sent' : 'sending'}, published_at = now(),
            finished_at = ${targeted === 0 ? sql`now()` : sql`null`}, updated_at = now()
        where id = ${notificationId}::uuid and generation = ${generation}::int
        returning 1)
      ${insert}
      select 1`.execute(trx);
  }

  /**
   * Reserves the start of each of a page's batches under the notification's pace and the app's ceiling (pushes
   * a minute, null for none), as a virtual schedule (GCRA): each batch starts when both allow it, and pushes
   * both schedules on by its size. The rows are locked for the moment it takes, so concurrent fan-outs of one
   * app (several workers) share its ceiling.
   */
  async reserveSlots(
    db: Db,
    notificationId: string,
    appId: string,
    sizes: number[],
    perMinute: { notification: number | null; app: number | null },
    now: Date,
  ): Promise<Date[]> {
    return db.transaction().execute(async (trx) => {
      const n = perMinute.notification
        ? await trx.selectFrom('notifications').select('pace_next_at').where('id', '=', notificationId).forUpdate().executeTakeFirst()
        : undefined;
      const a = perMinute.app
        ? await trx.selectFrom('apps').select('pace_next_at').where('id', '=', appId).forUpdate().executeTakeFirst()
        : undefined;
      let nextN = Math.max(now.getTime(), n?.pace_next_at?.getTime() ?? 0);
      let nextA = Math.max(now.getTime(), a?.pace_next_at?.getTime() ?? 0);
      const slots: Date[] = [];
      for (const size of sizes) {
        const start = Math.max(perMinute.notification ? nextN : 0, perMinute.app ? nextA : 0, now.getTime());
        slots.push(new Date(start));
        if (perMinute.notification) nextN = start + (size * 60_000) / perMinute.notification;
        if (perMinute.app) nextA = start + (size * 60_000) / perMinute.app;
      }
      if (perMinute.notification)
        await trx
          .updateTable('notifications')
          .set({ pace_next_at: new Date(nextN) })
          .where('id', '=', notificationId)
          .execute();
      if (perMinute.app)
        await trx
          .updateTable('apps')
          .set({ pace_next_at: new Date(nextA) })
          .where('id', '=', appId)
          .execute();
      return slots;
    });
  }

  /** A local-time wave is fanned out: the next one starts from the first device again. */
  async finishWave(db: Db, notificationId: string, generation: number, nextWave: number): Promise<void> {
    await db
      .updateTable('notifications')
      .set({ wave: nextWave, fanout_cursor: null, updated_at: sql<Date>`now()` })
      .where('id', '=', notificationId)
      .where('generation', '=', generation)
      .execute();
  }

  /** The fan-out waits for the next local-time wave: the due poller releases it at `at`. */
  async awaitWave(db: Db, notificationId: string, generation: number, at: Date): Promise<void> {
    await db
      .updateTable('notifications')
      .set({ next_due_at: at, updated_at: sql<Date>`now()` })
      .where('id', '=', notificationId)
      .where('generation', '=', generation)
      .where('state', 'in', ['scheduled', 'sending'])
      .execute();
  }

  async setSkippedPastLocalTime(db: Db, notificationId: string, count: number): Promise<void> {
    await db.updateTable('notifications').set({ skipped_past_local_time: count }).where('id', '=', notificationId).execute();
  }

  async markFanoutDone(db: Db, notificationId: string, generation: number): Promise<void> {
    await db
      .updateTable('notifications')
      .set({ fanout_done: true, updated_at: sql<Date>`now()` })
      .where('id', '=', notificationId)
      .where('generation', '=', generation)
      .execute();
  }

  async markSending(db: Db, notificationId: string, generation: number): Promise<void> {
    await db
      .updateTable('notifications')
      .set({ state: 'sending', published_at: sql<Date>`coalesce(published_at, now())`, updated_at: sql<Date>`now()` })
      .where('id', '=', notificationId)
      .where('generation', '=', generation)
      .where('state', '=', 'scheduled')
      .execute();
  }

  async pendingBatches(
    db: Db,
    notificationId: string,
    generation: number,
  ): Promise<Pick<DeliveryBatch, 'id' | 'platform' | 'development' | 'not_before'>[]> {
    return db
      .selectFrom('delivery_batches')
      .select(['id', 'platform', 'development', 'not_before'])
      .where('notification_id', '=', notificationId)
      .where('generation', '=', generation)
      .where('state', '=', 'pending')
      .orderBy('seq')
      .execute();
  }

  async findBatch(db: Db, id: string): Promise<(BatchHead & Pick<DeliveryBatch, 'not_before'>) | undefined> {
    return db
      .selectFrom('delivery_batches')
      .select(['id', 'notification_id', 'generation', 'platform', 'development', 'state', 'attempts', 'not_before'])
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /**
   * The batch's still-pending devices with their current token, in one query that keeps the id array
   * inside PostgreSQL; a device that can no longer receive (erased, token invalidated since) comes back
   * with a null token.
   */
  async pendingTargets(db: Db, batchId: string): Promise<PendingTarget[]> {
    const { rows } = await sql<PendingTarget>`
      select p.id as "deviceId", d.token
      from delivery_batches b
      cross join lateral unnest(b.pending_device_ids) as p(id)
      left join devices d on d.id = p.id and d.erased_at is null and d.token is not null and d.token_invalidated_at is null
      where b.id = ${batchId}`.execute(db);
    return rows;
  }

  /**
   * Records one attempt's results atomically: batch progress, notification counters, invalidated tokens.
   * Expired devices leave the batch like sent ones and count in pushes_expired, not in pushes_failed.
   * One statement (data-modifying CTEs) instead of a transaction of several: the notification row, which
   * every batch of the notification updates, is then locked only while PostgreSQL runs it, never across
   * a round trip to a busy worker. A concurrent duplicate run of the batch (same `attempts`) records nothing.
   */
  async recordAttempt(db: Db, batch: BatchHead, outcome: BatchOutcome, finalAttempt: boolean): Promise<{ done: boolean }> {
    const retryLeft = finalAttempt ? [] : outcome.retry;
    const exhausted = finalAttempt ? outcome.retry.map((deviceId) => ({ deviceId, reason: 'retries_exhausted' })) : [];
    const failed = [...outcome.failed, ...exhausted];
    const done = retryLeft.length === 0;
    const succeeded = outcome.succeeded.length;
    const invalidated = outcome.invalidated.length;
    const expired = outcome.expired.length;
    const failureReason = failed[0]?.reason ?? (expired > 0 ? 'expired' : null);
    const invalidate = invalidated
      ? sql`, invalidated as (
          update devices d set token_invalidated_at = now(), token_invalid_reason = inv.reason
          from unnest(${outcome.invalidated.map((i) => i.deviceId)}::uuid[], ${outcome.invalidated.map((i) => i.reason)}::text[]) as inv(id, reason)
          where d.id = inv.id and d.token_invalidated_at is null and exists (select 1 from recorded))`
      : sql``;
    await sql`
      with recorded as (
        update delivery_batches
        set pending_device_ids = ${retryLeft}::uuid[], state = ${done ? 'done' : 'pending'}, attempts = attempts + 1,
            succeeded = succeeded + ${succeeded}::int, failed = failed + ${failed.length}::int, invalidated = invalidated + ${invalidated}::int,
            expired = expired + ${expired}::int, last_error = ${outcome.lastError}, updated_at = now()
        where id = ${batch.id} and state = 'pending' and attempts = ${batch.attempts}::int
        returning 1),
      counted as (
        update notifications
        set pushes_succeeded = pushes_succeeded + ${succeeded}::int,
            pushes_failed = pushes_failed + ${failed.length + invalidated}::int,
            tokens_invalidated = tokens_invalidated + ${invalidated}::int,
            pushes_expired = pushes_expired + ${expired}::int,
            failure_reason = coalesce(${failureReason}::text, failure_reason),
            updated_at = now()
        where id = ${batch.notification_id}::uuid and exists (select 1 from recorded))
      ${invalidate}
      select 1`.execute(db);
    return { done };
  }

  /** Closes a pending batch unsent: `superseded` by a newer generation, or `canceled` with its notification. */
  async closeBatchUnsent(db: Db, id: string, state: 'superseded' | 'canceled'): Promise<void> {
    await db
      .updateTable('delivery_batches')
      .set({ state, updated_at: sql<Date>`now()` })
      .where('id', '=', id)
      .where('state', '=', 'pending')
      .execute();
  }

  /**
   * Closes the notification when its fan-out is done and no batch is pending: `sent` when anything was
   * delivered or nothing was targeted, `failed` when every push failed.
   */
  async completeIfFinished(db: Db, notificationId: string, generation: number): Promise<boolean> {
    const r = await db
      .updateTable('notifications')
      .set({
        state: sql`case when pushes_succeeded > 0 or devices_targeted = 0 then 'sent' else 'failed' end`,
        finished_at: sql<Date>`now()`,
        updated_at: sql<Date>`now()`,
      })
      .where('id', '=', notificationId)
      .where('generation', '=', generation)
      .where('fanout_done', '=', true)
      .where('state', 'in', ['scheduled', 'sending'])
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('delivery_batches')
              .select(sql`1`.as('one'))
              .where('notification_id', '=', notificationId)
              .where('generation', '=', generation)
              .where('state', '=', 'pending'),
          ),
        ),
      )
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /** Notifications whose pipeline shows no progress for a while: their jobs may be lost (queue restart, crash before enqueue). */
  async findStalled(db: Db, olderThanSeconds: number, limit: number): Promise<{ id: string; generation: number; wave: number }[]> {
    return (
      db
        .selectFrom('notifications')
        .select(['id', 'generation', 'wave'])
        .where('state', 'in', ['scheduled', 'sending'])
        // one waiting for its send time (or next local-time wave) is not stalled: the due poller releases it
        .where('next_due_at', 'is', null)
        .where('updated_at', '<', sql<Date>`now() - make_interval(secs => ${olderThanSeconds})`)
        .orderBy('updated_at')
        .limit(limit)
        .execute()
    );
  }

  /**
   * Takes the notifications whose send time (or next local-time wave) has come, for their fan-out to be enqueued.
   * Clearing next_due_at claims them (SKIP LOCKED: several workers poll); a crash before the enqueue leaves them to
   * the sweeper, as any notification whose job was lost.
   */
  async releaseDue(db: Db, now: Date, limit: number): Promise<{ id: string; generation: number; wave: number }[]> {
    const { rows } = await sql<{ id: string; generation: number; wave: number }>`
      update notifications n set next_due_at = null, updated_at = now()
      from (select id from notifications
            where next_due_at <= ${now} and state in ('scheduled', 'sending')
            order by next_due_at limit ${limit}::int
            for update skip locked) due
      where n.id = due.id
      returning n.id, n.generation, n.wave`.execute(db);
    return rows;
  }

  async touch(db: Db, notificationId: string): Promise<void> {
    await db
      .updateTable('notifications')
      .set({ updated_at: sql<Date>`now()` })
      .where('id', '=', notificationId)
      .execute();
  }
}

/**
 * A CTE (after one named `moved`, the notification's update) that stores batches, only when `moved` updated the
 * notification: a newer generation stores nothing. device_ids (what the batch was cut with) and
 * pending_device_ids start equal: each array is sent once.
 */
function storeBatches(notificationId: string, generation: number, batches: NewBatch[]) {
  if (!batches.length) return sql``;
  const rows = batches.map(
    (b) =>
      sql`(${b.id}, ${b.seq}::int, ${b.platform}, ${b.development}::boolean, ${b.deviceIds}::uuid[], ${b.notBefore ?? null}::timestamptz)`,
  );
  return sql`, stored as (
    insert into delivery_batches (id, notification_id, generation, seq, platform, development, device_ids, pending_device_ids, not_before)
    select v.id, ${notificationId}::uuid, ${generation}::int, v.seq, v.platform, v.development, v.ids, v.ids, v.not_before
    from (values ${sql.join(rows)}) as v(id, seq, platform, development, ids, not_before)
    where exists (select 1 from moved)
    on conflict (id) do nothing)`;
}
