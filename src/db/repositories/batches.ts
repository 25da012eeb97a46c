import { sql, type RawBuilder, type Transaction } from 'kysely';
import { PLAN_EACH_RUN, type Db } from '../database.js';
import type { Database, DeliveryBatch, Notification } from '../schema.js';
import { parseBatchId, type BatchKey } from '../../domain/batch-id.js';
import type { NewBatch } from '../../domain/batches.js';
import type { BatchOutcomes } from '../../domain/webhooks.js';
import { batchEventsCte } from './webhooks.js';
import { withinIds } from './partitions.js';

/** Why a batch is closed unsent: its notification canceled, or a newer generation of it (a collapse key's update). */
export type StopReason = 'superseded' | 'canceled';

/** What a delivery job needs of its batch (not the device id arrays: they stay in SQL); `id` as `batchId` makes it. */
export type BatchHead = { id: string } & Pick<
  DeliveryBatch,
  'notification_id' | 'generation' | 'platform' | 'development' | 'state' | 'attempts'
>;

/** A batch's id, made of its key (src/domain/batch-id.ts, migration 043: the id is not stored). */
const idOf = (b: string) =>
  sql<string>`(${sql.ref(`${b}.notification_id`)} || '-g' || ${sql.ref(`${b}.generation`)} || '-b' || ${sql.ref(`${b}.seq`)})`;

/** A still-pending device of a batch; `token` is null when it can no longer receive (erased, token invalidated). */
export interface PendingTarget {
  deviceId: string;
  token: string | null;
}

/** A notification's batches, cut from its whole audience. */
export interface CutAudience {
  notificationId: string;
  generation: number;
  batches: NewBatch[];
}

export interface BatchOutcome {
  succeeded: string[];
  failed: { deviceId: string; reason: string }[];
  /** `token`: a Live Activity token (forgotten alone, the device keeps its own); absent: the device's token */
  invalidated: { deviceId: string; reason: string; token?: string }[];
  /** devices whose send must be retried; they stay pending */
  retry: string[];
  /** devices not sent because the notification expired; done with */
  expired: string[];
  /** devices not sent because they had reached a frequency cap; done with */
  capped?: string[];
  lastError: string | null;
  /** when the sends began (the succeeded devices received the push from then on); default: when recorded */
  sentAt?: Date;
}

/** The notification as a delivery attempt reads it. */
export type AttemptNotification = Pick<
  Notification,
  'id' | 'app_id' | 'payload' | 'localized' | 'expires_at' | 'priority' | 'generation' | 'state' | 'live_activity' | 'capped'
>;

/** One attempt's results, to record: `finalAttempt` turns what is left to retry into failures. */
export interface AttemptRecord {
  batch: BatchHead;
  outcome: BatchOutcome;
  finalAttempt: boolean;
}

export interface AttemptInput {
  batch: BatchHead & Pick<DeliveryBatch, 'not_before' | 'seq'>;
  notification: AttemptNotification;
  pending: PendingTarget[];
}

/** A batch `loadAttempts` did not read whole (more pending devices than `tokensUpTo`): how many are pending. */
export interface LargeBatch {
  large: number;
}

/**
 * How often the recording of a broadcast's batches touches its notification (updated_at, which the sweeper reads
 * as progress): once in this many seconds, not once a batch; well within SWEEP_AFTER_SECONDS' default 30.
 */
export const PROGRESS_TOUCH_SECONDS = 10;

/**
 * Whether any batch of notification `n` delivered a push (its pushes_succeeded > 0); `n` is one of `ids`, which
 * lets PostgreSQL read their day partitions only (migration 037).
 */
export const anySucceeded = (ids: string[]) =>
  sql<boolean>`exists (
    select 1 from delivery_batches s
    where s.notification_id = n.id and s.notification_id = any(${ids}::uuid[]) and ${withinIds('s.notification_id', ids)}
      and s.succeeded > 0
  )`;

/** The SQL of delivery batches: stored when cut, read for an attempt, each attempt's results recorded. */
export class BatchesRepository {
  /**
   * Stores the batches of notifications whose whole (small) audience was cut when they were inserted (they were
   * inserted with their fan-out done, `NewNotification.cut`), in one statement. One job delivers them all
   * (`NotificationScheduler.deliver`): named after the first, the others record it as their job_id.
   */
  async insertBatches(trx: Transaction<Database>, audiences: CutAudience[]): Promise<void> {
    await this.batchesInsert(audiences)?.execute(trx);
  }

  /** `insertBatches`' statement (null: no batch); its notification or generation is new, so no ON CONFLICT's cost. */
  batchesInsert(audiences: CutAudience[]): RawBuilder<unknown> | null {
    const rows = audiences.flatMap((a) => a.batches.map((b) => ({ ...b, notificationId: a.notificationId, generation: a.generation })));
    if (!rows.length) return null;
    // one array per column (device ids joined: arrays of uneven length do not nest), so the statement's text is
    // the same however many there are
    return sql`
      insert into delivery_batches (notification_id, generation, seq, platform, development, device_ids, job_id)
      select t.notification_id, t.generation, t.seq, t.platform, t.development, t.ids, nullif(${rows[0]!.id}::text, t.id)
      from (
        select id, notification_id, generation, seq, platform, development, string_to_array(ids, ',')::uuid[] as ids
        from unnest(${rows.map((b) => b.id)}::text[], ${rows.map((b) => b.notificationId)}::uuid[], ${rows.map((b) => b.generation)}::int[],
          ${rows.map((b) => b.seq)}::int[], ${rows.map((b) => b.platform)}::text[], ${rows.map((b) => b.development)}::boolean[],
          ${rows.map((b) => b.deviceIds.join(','))}::text[]) as u(id, notification_id, generation, seq, platform, development, ids)
      ) as t`;
  }
  /** A notification's pending batches; of `seqs` only (one range's block: from inclusive, to exclusive) when given. */
  async pendingBatches(
    db: Db,
    notificationId: string,
    generation: number,
    seqs?: { from: number; to: number },
  ): Promise<({ id: string; size: number } & Pick<DeliveryBatch, 'seq' | 'platform' | 'development' | 'not_before' | 'job_id'>)[]> {
    return db
      .selectFrom('delivery_batches as b')
      .select([
        idOf('b').as('id'),
        'seq',
        'platform',
        'development',
        'not_before',
        'job_id',
        sql<number>`cardinality(b.device_ids)`.as('size'),
      ])
      .where('notification_id', '=', notificationId)
      .where('generation', '=', generation)
      .$if(seqs !== undefined, (q) => q.where('seq', '>=', seqs!.from).where('seq', '<', seqs!.to))
      .where('state', '=', 'pending')
      .orderBy('seq')
      .execute();
  }

  /**
   * What delivery attempts need, in one query for many batches: each batch, its notification, and its
   * still-pending devices with their current token (a device that can no longer receive — erased, token
   * invalidated since — comes back with a null token). Unknown batches are absent from the map. With `tokensUpTo`,
   * a batch of more pending devices comes back as its size only (`LargeBatch`): its devices are read when it sends.
   */
  async loadAttempts(db: Db, batchIds: string[]): Promise<Map<string, AttemptInput>>;
  async loadAttempts(db: Db, batchIds: string[], tokensUpTo: number): Promise<Map<string, AttemptInput | LargeBatch>>;
  async loadAttempts(db: Db, batchIds: string[], tokensUpTo?: number): Promise<Map<string, AttemptInput | LargeBatch>> {
    const keys = keysOf(batchIds);
    if (!keys.length) return new Map();
    const { rows } = await sql<
      BatchHead &
        Pick<DeliveryBatch, 'not_before' | 'seq'> & {
          notification: AttemptNotification;
          pending: PendingTarget[] | null;
          pending_count: number;
        }
    >`${sql.raw(PLAN_EACH_RUN)}
      select ${idOf('b')} as id, b.notification_id, b.generation, b.seq, b.platform, b.development, b.state, b.attempts, b.not_before,
        cardinality(pd.ids) as pending_count,
        -- an A/B test's batch is sent its variant's payload and languages
        json_build_object('id', n.id, 'app_id', n.app_id,
          'payload', case when b.variant is null then n.payload else n.request #> array['variants', b.variant::text, 'payload'] end,
          'localized', case when b.variant is null then n.localized else n.request #> array['variants', b.variant::text, 'localized'] end,
          'expires_at', n.expires_at,
          'priority', n.priority, 'generation', n.generation, 'state', n.state, 'live_activity', n.live_activity,
          'capped', n.capped) as notification,
        -- one subquery per kind, of which only the notification's runs: a Live Activity push goes to the token of
        -- its activity (or, a start, of its type) the device holds now, and reads no device row
        case
          when cardinality(pd.ids) > ${tokensUpTo ?? null}::int then null
          when n.live_activity is null then
            (select coalesce(json_agg(json_build_object('deviceId', p.id, 'token', d.token)), '[]'::json)
             from unnest(pd.ids) as p(id)
             left join devices d on d.id = p.id and d.erased_at is null and d.token is not null and d.token_invalidated_at is null)
          when n.live_activity ->> 'event' = 'start' then
            (select coalesce(json_agg(json_build_object('deviceId', p.id, 'token', s.token)), '[]'::json)
             from unnest(pd.ids) as p(id)
             left join live_activity_start_tokens s on s.device_id = p.id and s.activity_type = n.live_activity ->> 'activity_type')
          else
            (select coalesce(json_agg(json_build_object('deviceId', p.id, 'token', t.token)), '[]'::json)
             from unnest(pd.ids) as p(id)
             left join live_activity_tokens t on t.device_id = p.id and t.activity_id = n.live_activity ->> 'activity_id')
        end as pending
      from ${keysTable(keys)}
      join delivery_batches b on b.notification_id = k.notification_id and b.generation = k.generation and b.seq = k.seq
      -- not attempted yet (no pending list stored, migration 043): every device is pending
      cross join lateral (select coalesce(b.pending_device_ids, b.device_ids) as ids) as pd
      join notifications n on n.id = b.notification_id
      where b.notification_id = any(${notificationsOf(keys)}::uuid[]) and n.id = any(${notificationsOf(keys)}::uuid[])`.execute(db);
    return new Map(
      rows.map(({ notification, pending, pending_count: count, ...batch }): [string, AttemptInput | LargeBatch] => {
        if (pending === null) return [batch.id, { large: count }];
        // json_build_object gives the expiry as text
        const expires = notification.expires_at as unknown as string | null;
        return [batch.id, { batch, notification: { ...notification, expires_at: expires === null ? null : new Date(expires) }, pending }];
      }),
    );
  }

  /**
   * Records attempts' results atomically, many batches in one statement: batch progress and counters (a
   * notification's are their sums, `countersOf`), invalidated tokens. Expired devices leave the batch like sent
   * ones and count in pushes_expired, not in pushes_failed. The notification's row is not written for a batch of
   * many: workers recording one broadcast's batches would all queue on its lock, receipts included. It is touched
   * at most every few seconds (the sweeper's sign of progress), and a notification of one batch, which this
   * attempt finishes, is closed in the same update (as `completeIfFinished` would); answers the ids of those it
   * closed. A concurrent duplicate run of a batch (same `attempts`) records nothing. Each device that received
   * the push gets a receipt, to which its events are attributed (ConversionsRepository). `withEvents`: some app has
   * a webhook endpoint for batches' outcomes, which the statement records for its batches' apps (`batchEventsCte`).
   */
  async recordAttempts(db: Db, attempts: AttemptRecord[], withEvents = false): Promise<Set<string>> {
    if (!attempts.length) return new Set();
    const input = attemptRows(attempts);
    const all = attempts.flatMap(({ batch, outcome }) => outcome.invalidated.map((i) => ({ batchId: batch.id, ...i })));
    const invalid = all.filter((i) => i.token === undefined);
    const dead = all.filter((i) => i.token !== undefined);
    const forget = forgetDeadTokens(dead);
    const invalidate = invalidateTokens(invalid);
    const receipts = receiptsOf(attempts);
    const notificationIds = [...new Set(input.map((i) => i.batch.notification_id))];
    // a batch is found by its key (migration 043), its seq read off its id (made from it)
    const seqOf = (id: string) => parseBatchId(id)?.seq ?? null;
    // planned once a connection: the day partitions pruned by the ids' range as the plan starts
    const { rows } = await sql<{ id: string }>`
      with input as (
        select t.id, t.notification_id, t.generation, t.seq, t.attempts, string_to_array(t.pending, ',')::uuid[] as pending, t.state,
          t.succeeded, t.failed, t.invalidated, t.expired, t.capped, t.last_error, t.failure_reason, t.received, t.sent_at,
          t.failed_by_reason::jsonb as failed_by_reason
        from unnest(
          ${input.map((i) => i.batch.id)}::text[], ${input.map((i) => i.batch.notification_id)}::uuid[],
          ${input.map((i) => i.batch.generation)}::int[], ${input.map((i) => seqOf(i.batch.id))}::int[],
          ${input.map((i) => i.batch.attempts)}::int[],
          ${input.map((i) => i.retryLeft.join(','))}::text[], ${input.map((i) => (i.retryLeft.length ? 'pending' : 'done'))}::text[],
          ${input.map((i) => i.outcome.succeeded.length)}::int[], ${input.map((i) => i.failed)}::int[],
          ${input.map((i) => i.outcome.invalidated.length)}::int[], ${input.map((i) => i.outcome.expired.length)}::int[],
          ${input.map((i) => i.outcome.capped?.length ?? 0)}::int[], ${input.map((i) => i.outcome.lastError)}::text[],
          ${input.map((i) => i.failureReason)}::text[],
          ${input.map((i) => i.outcome.succeeded.join(','))}::text[], ${input.map((i) => i.outcome.sentAt ?? null)}::timestamptz[],
          ${input.map((i) => i.failedByReason)}::text[]
        ) as t(
          id, notification_id, generation, seq, attempts, pending, state, succeeded, failed, invalidated, expired, capped,
          last_error, failure_reason, received, sent_at, failed_by_reason
        )),
      recorded as (
        update delivery_batches b
        set pending_device_ids = i.pending, state = i.state, attempts = b.attempts + 1,
            succeeded = b.succeeded + i.succeeded, failed = b.failed + i.failed, invalidated = b.invalidated + i.invalidated,
            expired = b.expired + i.expired, capped = b.capped + i.capped, last_error = i.last_error,
            failure_reason = coalesce(i.failure_reason, b.failure_reason), updated_at = now(),
            failed_by_reason = case when i.failed_by_reason is null then b.failed_by_reason else (
              select jsonb_object_agg(x.key, x.total) from (
                select e.key, sum(e.value::int) as total
                from (select * from jsonb_each_text(coalesce(b.failed_by_reason, '{}'))
                      union all select * from jsonb_each_text(i.failed_by_reason)) e
                group by e.key) x) end
        from input i
        where b.notification_id = i.notification_id and b.generation = i.generation and b.seq = i.seq and b.state = 'pending'
          and b.attempts = i.attempts and b.notification_id = any(${notificationIds}::uuid[])
          and ${withinIds('b.notification_id', notificationIds)}
        returning i.id),
      counted as (
        update notifications n
        set state = case when c.closes and n.state in ('scheduled', 'sending')
              then (case when c.succeeded > 0 or ${anySucceeded(notificationIds)} then 'sent' else 'failed' end) else n.state end,
            finished_at = case when c.closes and n.state in ('scheduled', 'sending') then now() else n.finished_at end,
            updated_at = now()
        from (
          select i.notification_id, sum(i.succeeded)::int as succeeded,
            bool_and(i.state = 'done') and count(*) = 1
              and n1.fanout_done and n1.fanout_seq = 1 and n1.generation = min(i.generation) as closes
          from input i
          join recorded r on r.id = i.id
          join notifications n1 on n1.id = i.notification_id and n1.id = any(${notificationIds}::uuid[])
            and ${withinIds('n1.id', notificationIds)}
          group by i.notification_id, n1.id) c
        where n.id = c.notification_id and n.id = any(${notificationIds}::uuid[]) and ${withinIds('n.id', notificationIds)}
          and (c.closes or n.updated_at < now() - make_interval(secs => ${PROGRESS_TOUCH_SECONDS}::int))
        returning n.id, c.closes and n.state in ('sent', 'failed') as closes)
      ${invalidate}
      ${forget}
      ${receipts}
      ${withEvents ? batchEventsCte(attempts.flatMap(batchOutcomes), notificationIds) : sql``}
      select id from counted where closes`.execute(db);
    return new Set(rows.map((r) => r.id));
  }
  /** A notification's failed pushes by reason, over its batches (those recorded since migration 065). */
  async failedByReason(db: Db, notificationId: string): Promise<Record<string, number>> {
    const { rows } = await sql<{ reason: string; count: number }>`
      select e.key as reason, sum(e.value::int)::int as count
      from delivery_batches b cross join lateral jsonb_each_text(b.failed_by_reason) e
      where b.notification_id = ${notificationId}::uuid
      group by e.key order by e.key`.execute(db);
    return Object.fromEntries(rows.map((r) => [r.reason, r.count]));
  }

  /** Closes a pending batch unsent: `superseded` by a newer generation, or `canceled` with its notification. */
  async closeBatchUnsent(db: Db, batch: Pick<BatchHead, 'id' | 'notification_id'>, state: StopReason): Promise<void> {
    const key = parseBatchId(batch.id);
    if (!key) return;
    // by its key, the notification first (the partition key, migration 037)
    await db
      .updateTable('delivery_batches')
      .set({ state, updated_at: sql<Date>`now()` })
      .where('notification_id', '=', key.notificationId)
      .where('generation', '=', key.generation)
      .where('seq', '=', key.seq)
      .where('state', '=', 'pending')
      .execute();
  }

  /**
   * Closes a canceled notification's batches held for a later wave (a best-time send's, not released yet): no job
   * has them, so nothing else would. Those released are closed by the worker's stop check, as any batch.
   */
  async closeHeldBatches(db: Db, notificationId: string): Promise<number> {
    const result = await db
      .updateTable('delivery_batches')
      .set({ state: 'canceled', updated_at: sql<Date>`now()` })
      .where('notification_id', '=', notificationId)
      .where('state', '=', 'pending')
      .where('held', '=', true)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /** A best-time send's batches still held for their wave, earliest first. */
  async heldBatches(
    db: Db,
    notificationId: string,
    generation: number,
  ): Promise<{ id: string; seq: number; size: number; not_before: Date | null }[]> {
    return db
      .selectFrom('delivery_batches as b')
      .select([idOf('b').as('id'), 'seq', 'not_before', sql<number>`cardinality(b.device_ids)`.as('size')])
      .where('notification_id', '=', notificationId)
      .where('generation', '=', generation)
      .where('state', '=', 'pending')
      .where('held', '=', true)
      .orderBy('seq')
      .execute();
  }

  /** Releases held batches (by seq), each from its start: their delivery jobs are enqueued next. */
  async releaseHeld(db: Db, notificationId: string, generation: number, starts: { seq: number; at: Date | null }[]): Promise<void> {
    if (!starts.length) return;
    await sql`
      update delivery_batches b set held = false, not_before = t.at
      from unnest(${starts.map((s) => s.seq)}::int[], ${starts.map((s) => s.at)}::timestamptz[]) as t(seq, at)
      where b.notification_id = ${notificationId}::uuid and b.generation = ${generation}::int and b.seq = t.seq
        and b.state = 'pending' and b.held`.execute(db);
  }
}

/** Each attempt's row of the record statement: what is left to retry, the failures, why nothing may have gone. */
function attemptRows(attempts: AttemptRecord[]) {
  return attempts.map(({ batch, outcome, finalAttempt }) => {
    const retryLeft = finalAttempt ? [] : outcome.retry;
    return {
      batch,
      outcome,
      retryLeft,
      failed: outcome.failed.length + (finalAttempt ? outcome.retry.length : 0),
      failedByReason: failedByReason(outcome, finalAttempt),
      // why nothing may have been delivered: a refused push, retries run out, a dead token, the expiry
      failureReason:
        outcome.failed[0]?.reason ??
        (finalAttempt && outcome.retry.length ? 'retries_exhausted' : null) ??
        outcome.invalidated[0]?.reason ??
        (outcome.expired.length ? 'expired' : null) ??
        (outcome.capped?.length ? 'frequency_capped' : null),
    };
  });
}

/** The attempt's failed pushes counted by reason, as JSON (null: none failed). */
function failedByReason(outcome: AttemptRecord['outcome'], finalAttempt: boolean): string | null {
  const counts: Record<string, number> = Object.create(null);
  for (const f of outcome.failed) counts[f.reason] = (counts[f.reason] ?? 0) + 1;
  if (finalAttempt && outcome.retry.length) counts.retries_exhausted = (counts.retries_exhausted ?? 0) + outcome.retry.length;
  return Object.keys(counts).length ? JSON.stringify(counts) : null;
}

/** The CTEs that forget dead Live Activity tokens of recorded batches (none when there is none). */
function forgetDeadTokens(dead: { deviceId: string; token?: string; batchId: string }[]) {
  // a dead Live Activity token is forgotten where it is (an activity's or a type's), the device keeps its own
  return dead.length
    ? sql`, dead_tokens as (
        select inv.id, inv.token
        from unnest(${dead.map((i) => i.deviceId)}::uuid[], ${dead.map((i) => i.token!)}::text[], ${dead.map((i) => i.batchId)}::text[])
          as inv(id, token, batch_id)
        where inv.batch_id in (select id from recorded)),
      forgot_activity as (
        delete from live_activity_tokens t
        using dead_tokens x
        where t.device_id = x.id and t.token = x.token),
      forgot_start as (
        delete from live_activity_start_tokens s
        using dead_tokens x
        where s.device_id = x.id and s.token = x.token)`
    : sql``;
}

/** The CTE that marks the devices' invalidated tokens of recorded batches (none when there is none). */
function invalidateTokens(invalid: { deviceId: string; reason: string; batchId: string }[]) {
  return invalid.length
    ? sql`, invalidated as (
        update devices d set token_invalidated_at = now(), token_invalid_reason = inv.reason
        from unnest(
          ${invalid.map((i) => i.deviceId)}::uuid[],
          ${invalid.map((i) => i.reason)}::text[],
          ${invalid.map((i) => i.batchId)}::text[]
        ) as inv(id, reason, batch_id)
        where d.id = inv.id and d.token_invalidated_at is null and inv.batch_id in (select id from recorded))`
    : sql``;
}

/** The CTE that writes a receipt for each device that received the push (none when none did). */
function receiptsOf(attempts: AttemptRecord[]) {
  // each batch's received devices as one joined list (uuids hold no comma), its notification and time once: arrays
  // of an element per device, repeating those, were the costly part to encode and to parse
  return attempts.some(({ outcome }) => outcome.succeeded.length > 0)
    ? sql`, received as (
        insert into device_pushes (device_id, notification_id, received_at)
        select distinct on (s.device_id, i.notification_id) s.device_id, i.notification_id, coalesce(i.sent_at, now())
        from input i cross join lateral unnest(string_to_array(i.received, ',')::uuid[]) as s(device_id)
        where i.id in (select id from recorded)
        on conflict do nothing)`
    : sql``;
}

/** An attempt's outcomes as its webhook row holds them (none when it settled no device). */
function batchOutcomes({ batch, outcome, finalAttempt }: AttemptRecord): { batchId: string; json: string }[] {
  const failed: [string, string][] = [
    ...outcome.failed.map((f): [string, string] => [f.deviceId, f.reason]),
    ...(finalAttempt ? outcome.retry.map((d): [string, string] => [d, 'retries_exhausted']) : []),
    ...outcome.expired.map((d): [string, string] => [d, 'expired']),
    ...(outcome.capped ?? []).map((d): [string, string] => [d, 'frequency_capped']),
  ];
  const unregistered = outcome.invalidated.map((i): [string, string] => [i.deviceId, i.reason]);
  if (!outcome.succeeded.length && !failed.length && !unregistered.length) return [];
  const data: BatchOutcomes = {
    notification_id: batch.notification_id,
    platform: batch.platform,
    attempt: batch.attempts + 1,
    delivered: outcome.succeeded,
    failed,
    unregistered,
  };
  return [{ batchId: batch.id, json: JSON.stringify(data) }];
}

/** The keys of batches, from their ids; an id no batch can have is left out (as an unknown batch is absent). */
function keysOf(batchIds: string[]): BatchKey[] {
  return batchIds.map(parseBatchId).filter((k) => k !== undefined);
}

/** Batch keys as a table `k` (notification_id, generation, seq), one array per column. */
function keysTable(keys: BatchKey[]) {
  return sql`unnest(${keys.map((k) => k.notificationId)}::uuid[], ${keys.map((k) => k.generation)}::int[], ${keys.map((k) => k.seq)}::int[])
    as k(notification_id, generation, seq)`;
}

/**
 * The notifications of batches. Named beside the batches' key in a statement planned each run (PLAN_EACH_RUN), they
 * let PostgreSQL plan for only those notifications' day partitions (migration 037): a join alone reads every day's.
 */
function notificationsOf(keys: BatchKey[]): string[] {
  return [...new Set(keys.map((k) => k.notificationId))];
}

/**
 * A CTE (after one named `moved`, the notification's update) that stores batches, only when `moved` updated the
 * notification: a newer generation stores nothing. device_ids (what the batch was cut with) is sent as one joined
 * text (uuids hold no comma), which costs less to write than an array literal quoting each id; pending_device_ids
 * is not written until an attempt is recorded (null: all of them, migration 043).
 */
export function storeBatches(notificationId: string, generation: number, batches: NewBatch[]) {
  if (!batches.length) return sql``;
  const rows = batches.map(
    (b) =>
      sql`(
        ${b.seq}::int, ${b.platform}, ${b.development}::boolean, string_to_array(${b.deviceIds.join(',')}, ',')::uuid[],
        ${b.notBefore ?? null}::timestamptz, ${b.variant ?? null}::smallint, ${b.abRest ?? false}::boolean, ${b.held ?? false}::boolean
      )`,
  );
  return sql`, stored as (
    insert into delivery_batches (notification_id, generation, seq, platform, development, device_ids, not_before, variant, ab_rest, held)
    select ${notificationId}::uuid, ${generation}::int, v.seq, v.platform, v.development, v.ids, v.not_before, v.variant, v.ab_rest, v.held
    from (values ${sql.join(rows)}) as v(seq, platform, development, ids, not_before, variant, ab_rest, held)
    where exists (select 1 from moved)
    on conflict (notification_id, generation, seq) do nothing)`;
}
