import { sql } from 'kysely';
import type { Db } from '../database.js';
import { compileFilters } from '../filter-sql.js';
import type { DeliveryBatch, Platform } from '../schema.js';
import type { Filter } from '../../domain/filters.js';

export interface Deliverable {
  id: string;
  platform: Platform;
  development: boolean;
  token: string;
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
      .select(['d.id', 'd.platform', 'd.development', 'd.token'])
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
        await trx
          .insertInto('delivery_batches')
          .values(
            batches.map((b) => ({
              id: b.id,
              notification_id: notificationId,
              generation,
              seq: b.seq,
              platform: b.platform,
              development: b.development,
              device_ids: b.deviceIds,
              pending_device_ids: b.deviceIds,
              last_error: null,
            })),
          )
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
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

  async findBatch(id: string): Promise<DeliveryBatch | undefined> {
    return this.db.selectFrom('delivery_batches').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Tokens of the batch's still-pending devices that can still receive (not erased, not invalidated since). */
  async pendingTargets(batch: DeliveryBatch): Promise<{ deviceId: string; token: string }[]> {
    if (batch.pending_device_ids.length === 0) return [];
    const rows = await this.db
      .selectFrom('devices')
      .select(['id', 'token'])
      .where('id', '=', sql<string>`any(${batch.pending_device_ids}::uuid[])`)
      .where('erased_at', 'is', null)
      .where('token', 'is not', null)
      .where('token_invalidated_at', 'is', null)
      .execute();
    return rows.map((r) => ({ deviceId: r.id, token: r.token! }));
  }

  /**
   * Records one attempt's results in one transaction: batch progress, notification counters, invalidated
   * tokens. Devices no longer deliverable (erased meanwhile) are dropped from pending and counted failed.
   */
  async recordAttempt(batch: DeliveryBatch, outcome: BatchOutcome, finalAttempt: boolean): Promise<{ done: boolean }> {
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
