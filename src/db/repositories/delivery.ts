import { sql } from 'kysely';
import type { Db } from '../database.js';
import { compileFilters } from '../filter-sql.js';
import type { DeliveryBatch, Platform } from '../schema.js';
import type { Filter } from '../../domain/filters.js';

/** A device of the audience that can receive a push (its token is read again when its batch is sent). */
export interface Deliverable {
  id: string;
  platform: Platform;
  development: boolean;
}

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
}

export interface BatchOutcome {
  succeeded: string[];
  failed: { deviceId: string; reason: string }[];
  invalidated: { deviceId: string; reason: string }[];
  /** devices whose send must be retried; they stay pending */
  retry: string[];
  lastError: string | null;
}

/** All SQL of the delivery pipeline: audience paging, batches, counters, token invalidation. */
export class DeliveryRepository {
  constructor(private readonly db: Db) {}

  /** One keyset page of the audience's devices that can receive a push, in id order. */
  async pageDeliverable(appId: string, filters: Filter[] | null, afterId: string | null, limit: number, now: Date): Promise<Deliverable[]> {
    let q = this.db
      .selectFrom('devices as d')
      .select(['d.id', 'd.platform', 'd.development'])
      .where('d.app_id', '=', appId)
      .where('d.erased_at', 'is', null)
      .where('d.token', 'is not', null)
      .where('d.token_invalidated_at', 'is', null)
      .where(compileFilters(filters, { now }))
      .orderBy('d.id')
      .limit(limit);
    if (afterId) q = q.where('d.id', '>', afterId);
    return (await q.execute()) as Deliverable[];
  }

  /**
   * Stores the batches cut from one page and moves the fan-out checkpoint past it, atomically: a fan-out
   * that dies and runs again resumes after the last stored page and recreates no batch.
   */
  async saveFanoutPage(notificationId: string, generation: number, batches: NewBatch[], cursor: string, nextSeq: number, targeted: number): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const moved = await trx
        .updateTable('notifications')
        .set((eb) => ({
          fanout_cursor: cursor,
          fanout_seq: nextSeq,
          devices_targeted: eb('devices_targeted', '+', targeted),
          updated_at: sql<Date>`now()`,
        }))
        .where('id', '=', notificationId)
        .where('generation', '=', generation)
        .executeTakeFirst();
      if (moved.numUpdatedRows === 0n) return false; // superseded by a newer generation
      if (batches.length) {
        // device_ids (what the batch was cut with) and pending_device_ids start equal: send each array once.
        const rows = batches.map(
          (b) => sql`(${b.id}, ${b.seq}::int, ${b.platform}, ${b.development}::boolean, ${b.deviceIds}::uuid[])`,
        );
        await sql`
          insert into delivery_batches (id, notification_id, generation, seq, platform, development, device_ids, pending_device_ids)
          select v.id, ${notificationId}::uuid, ${generation}::int, v.seq, v.platform, v.development, v.ids, v.ids
          from (values ${sql.join(rows)}) as v(id, seq, platform, development, ids)
          on conflict (id) do nothing`.execute(trx);
      }
      return true;
    });
  }

  async markFanoutDone(notificationId: string, generation: number): Promise<void> {
    await this.db
      .updateTable('notifications')
      .set({ fanout_done: true, updated_at: sql<Date>`now()` })
      .where('id', '=', notificationId)
      .where('generation', '=', generation)
      .execute();
  }

  async markSending(notificationId: string, generation: number): Promise<void> {
    await this.db
      .updateTable('notifications')
      .set({ state: 'sending', published_at: sql<Date>`coalesce(published_at, now())`, updated_at: sql<Date>`now()` })
      .where('id', '=', notificationId)
      .where('generation', '=', generation)
      .where('state', '=', 'scheduled')
      .execute();
  }

  async pendingBatches(notificationId: string, generation: number): Promise<Pick<DeliveryBatch, 'id' | 'platform' | 'development'>[]> {
    return this.db
      .selectFrom('delivery_batches')
      .select(['id', 'platform', 'development'])
      .where('notification_id', '=', notificationId)
      .where('generation', '=', generation)
      .where('state', '=', 'pending')
      .orderBy('seq')
      .execute();
  }

  async findBatch(id: string): Promise<BatchHead | undefined> {
    return this.db
      .selectFrom('delivery_batches')
      .select(['id', 'notification_id', 'generation', 'platform', 'development', 'state', 'attempts'])
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /**
   * The batch's still-pending devices with their current token, in one query that keeps the id array
   * inside PostgreSQL; a device that can no longer receive (erased, token invalidated since) comes back
   * with a null token.
   */
  async pendingTargets(batchId: string): Promise<PendingTarget[]> {
    const { rows } = await sql<PendingTarget>`
      select p.id as "deviceId", d.token
      from delivery_batches b
      cross join lateral unnest(b.pending_device_ids) as p(id)
      left join devices d on d.id = p.id and d.erased_at is null and d.token is not null and d.token_invalidated_at is null
      where b.id = ${batchId}`.execute(this.db);
    return rows;
  }

  /**
   * Records one attempt's results in one transaction: batch progress, notification counters, invalidated
   * tokens. Devices no longer deliverable (erased meanwhile) are dropped from pending and counted failed.
   */
  async recordAttempt(batch: BatchHead, outcome: BatchOutcome, finalAttempt: boolean): Promise<{ done: boolean }> {
    const retryLeft = finalAttempt ? [] : outcome.retry;
    const exhausted = finalAttempt ? outcome.retry.map((deviceId) => ({ deviceId, reason: 'retries_exhausted' })) : [];
    const failed = [...outcome.failed, ...exhausted];
    const done = retryLeft.length === 0;
    await this.db.transaction().execute(async (trx) => {
      const updated = await trx
        .updateTable('delivery_batches')
        .set((eb) => ({
          pending_device_ids: retryLeft,
          state: done ? 'done' : 'pending',
          attempts: eb('attempts', '+', 1),
          succeeded: eb('succeeded', '+', outcome.succeeded.length),
          failed: eb('failed', '+', failed.length),
          invalidated: eb('invalidated', '+', outcome.invalidated.length),
          last_error: outcome.lastError,
          updated_at: sql<Date>`now()`,
        }))
        .where('id', '=', batch.id)
        .where('state', '=', 'pending')
        .where('attempts', '=', batch.attempts) // a concurrent duplicate run of this batch records nothing
        .executeTakeFirst();
      if (updated.numUpdatedRows === 0n) return;
      await trx
        .updateTable('notifications')
        .set((eb) => ({
          pushes_succeeded: eb('pushes_succeeded', '+', outcome.succeeded.length),
          pushes_failed: eb('pushes_failed', '+', failed.length + outcome.invalidated.length),
          tokens_invalidated: eb('tokens_invalidated', '+', outcome.invalidated.length),
          failure_reason: failed.length ? failed[0]!.reason : eb.ref('failure_reason'),
          updated_at: sql<Date>`now()`,
        }))
        .where('id', '=', batch.notification_id)
        .execute();
      if (outcome.invalidated.length) {
        // one statement for the whole batch: a stale token list can invalidate hundreds at once
        await sql`
          update devices d set token_invalidated_at = now(), token_invalid_reason = inv.reason
          from unnest(${outcome.invalidated.map((i) => i.deviceId)}::uuid[], ${outcome.invalidated.map((i) => i.reason)}::text[]) as inv(id, reason)
          where d.id = inv.id and d.token_invalidated_at is null`.execute(trx);
      }
    });
    return { done };
  }

  async supersedeBatch(id: string): Promise<void> {
    await this.db.updateTable('delivery_batches').set({ state: 'superseded', updated_at: sql<Date>`now()` }).where('id', '=', id).where('state', '=', 'pending').execute();
  }

  /**
   * Closes the notification when its fan-out is done and no batch is pending: `sent` when anything was
   * delivered or nothing was targeted, `failed` when every push failed.
   */
  async completeIfFinished(notificationId: string, generation: number): Promise<boolean> {
    const r = await this.db
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
  async findStalled(olderThanSeconds: number, limit: number): Promise<{ id: string; generation: number }[]> {
    return this.db
      .selectFrom('notifications')
      .select(['id', 'generation'])
      .where('state', 'in', ['scheduled', 'sending'])
      .where('updated_at', '<', sql<Date>`now() - make_interval(secs => ${olderThanSeconds})`)
      .orderBy('updated_at')
      .limit(limit)
      .execute();
  }

  async touch(notificationId: string): Promise<void> {
    await this.db.updateTable('notifications').set({ updated_at: sql<Date>`now()` }).where('id', '=', notificationId).execute();
  }
}
