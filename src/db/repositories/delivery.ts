import { sql, type RawBuilder, type Transaction } from 'kysely';
import { PLAN_EACH_RUN, type Db } from '../database.js';
import type { Database, DeliveryBatch, FanoutRangeRow, Notification } from '../schema.js';
import { CAP_WINDOWS, LONGEST_CAP_WINDOW, type FrequencyCap } from '../../domain/frequency-caps.js';
import { parseBatchId, type BatchKey } from '../../domain/batch-id.js';
import type { NewBatch } from '../../domain/batches.js';
import type { BatchOutcomes } from '../../domain/webhooks.js';
import { batchEventsCte } from './webhooks.js';

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

/** A notification the sweeper looks at; `position` (updated_at, to the microsecond) and `id` place it in the sweep's order. */
/**
 * A notification the sweeper looks at; `held` when it waits for a time (an A/B test for its winner): only its
 * pending batches can have lost their jobs, and nothing else of it is due.
 */
export type StalledNotification = Pick<Notification, 'id' | 'generation' | 'wave' | 'ab_stage'> & { position: string; held: boolean };

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
const PROGRESS_TOUCH_SECONDS = 10;

/**
 * Whether any batch of notification `n` delivered a push (its pushes_succeeded > 0); `n` is one of `ids`, which
 * lets PostgreSQL plan for their day partitions only (migration 037), in a statement planned each run (PLAN_EACH_RUN).
 */
const anySucceeded = (ids: string[]) =>
  sql<boolean>`exists (
    select 1 from delivery_batches s
    where s.notification_id = n.id and s.notification_id = any(${ids}::uuid[]) and s.succeeded > 0
  )`;

/** The devices targeted by notification `n`'s fan-out ranges (its own devices_targeted holds the rest); `n` is one of `ids`. */
const rangesTargeted = (ids: string[]) =>
  sql<number>`coalesce((
    select sum(r.devices_targeted) from fanout_ranges r
    where r.notification_id = n.id and r.notification_id = any(${ids}::uuid[])
  ), 0)`;

/** A range's batches take seq numbers from (range + 1) × this; those fanned out before the split stay below it. */
export const RANGE_SEQ_STRIDE = 1_000_000;

/** A fan-out range (migration 029), as its job reads it. */
export type FanoutRange = Pick<FanoutRangeRow, 'range_no' | 'cursor_id' | 'up_to_id' | 'next_seq' | 'done'>;

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
    page: { cursor: string; nextSeq: number; targeted: number; notAllowed: number; holdout?: string[]; at?: Date },
  ): Promise<boolean> {
    const insert = storeBatches(notificationId, generation, batches);
    const holdout = page.holdout ?? [];
    // an A/B test's holdout devices of the page, met now: only when `moved` (a page stored again adds none)
    const holdoutInsert = holdout.length
      ? sql`, held_out as (
          insert into ab_holdout_devices (notification_id, device_id, since)
          select ${notificationId}::uuid, h.id, ${page.at ?? new Date()}::timestamptz
          from unnest(string_to_array(${holdout.join(',')}, ',')::uuid[]) as h(id)
          where exists (select 1 from moved)
          on conflict do nothing)`
      : sql``;
    const { rows: result } = await sql<{ moved: number }>`
      with moved as (
        update notifications
        set fanout_cursor = ${page.cursor}::uuid, fanout_seq = ${page.nextSeq}::int,
          devices_targeted = devices_targeted + ${page.targeted}::int,
          devices_not_allowed = devices_not_allowed + ${page.notAllowed}::int, ab_holdout = ab_holdout + ${holdout.length}::int,
          updated_at = now()
        -- from the checkpoint this run read: a second run of the same fan-out (its job handed on while the first
        -- still ran) stops at its next page instead of sending the rest again
        where id = ${notificationId}::uuid and generation = ${generation}::int and state <> 'canceled'
          and fanout_seq = ${page.nextSeq - batches.length}::int
        returning 1)
      ${insert}${holdoutInsert}
      select count(*)::int as moved from moved`.execute(db);
    return (result[0]?.moved ?? 0) > 0; // 0: superseded by a newer generation, or canceled
  }

  /**
   * Cuts the rest of a notification's audience into ranges of the device id space (`bounds`: each after its
   * exclusive lower bound, up to its inclusive upper one, null for the end), whose jobs fan out at once on any
   * worker; atomically with marking it split (fanout_seq moves to RANGE_SEQ_STRIDE, above the seq of every batch
   * it cut itself), so a fan-out that runs again finds these ranges instead of cutting others. False when
   * superseded or canceled, or when it was split before.
   */
  async splitFanout(
    db: Db,
    notificationId: string,
    generation: number,
    bounds: { after: string; upTo: string | null }[],
  ): Promise<boolean> {
    const { rows } = await sql<{ split: number }>`
      with split as (
        update notifications
        set fanout_seq = ${RANGE_SEQ_STRIDE}::int, updated_at = now()
        where id = ${notificationId}::uuid and generation = ${generation}::int and state <> 'canceled'
          and fanout_seq < ${RANGE_SEQ_STRIDE}::int
        returning 1),
      ranges as (
        insert into fanout_ranges (notification_id, generation, range_no, cursor_id, up_to_id, next_seq)
        select ${notificationId}::uuid, ${generation}::int, r.no - 1, r.after, r.up_to, r.no * ${RANGE_SEQ_STRIDE}::int
        from unnest(${bounds.map((b) => b.after)}::uuid[], ${bounds.map((b) => b.upTo)}::uuid[]) with ordinality as r(after, up_to, no)
        where exists (select 1 from split)
        on conflict do nothing)
      select count(*)::int as split from split`.execute(db);
    return (rows[0]?.split ?? 0) > 0;
  }

  /** The fan-out ranges of a notification's generation (none unless it was split), in order. */
  async rangesOf(db: Db, notificationId: string, generation: number, rangeNo?: number): Promise<FanoutRange[]> {
    return db
      .selectFrom('fanout_ranges')
      .select(['range_no', 'cursor_id', 'up_to_id', 'next_seq', 'done'])
      .where('notification_id', '=', notificationId)
      .where('generation', '=', generation)
      .$if(rangeNo !== undefined, (q) => q.where('range_no', '=', rangeNo!))
      .orderBy('range_no')
      .execute();
  }

  /**
   * `saveFanoutPage` for a page of one range: its batches and its checkpoint, atomically, without writing the
   * notification's row (ranges fanned out at once would queue on its lock); the notification is only read, so
   * one canceled or superseded meanwhile stores nothing. Its updated_at (progress, for the sweeper) is touched
   * at most every PROGRESS_TOUCH_SECONDS.
   */
  async saveRangePage(
    db: Db,
    range: { notificationId: string; generation: number; rangeNo: number },
    batches: NewBatch[],
    page: { cursor: string; nextSeq: number; targeted: number; notAllowed: number },
  ): Promise<boolean> {
    const { notificationId, generation, rangeNo } = range;
    const { rows } = await sql<{ moved: number }>`
      with moved as (
        update fanout_ranges r
        set cursor_id = ${page.cursor}::uuid, next_seq = ${page.nextSeq}::int,
          devices_targeted = r.devices_targeted + ${page.targeted}::int,
          devices_not_allowed = r.devices_not_allowed + ${page.notAllowed}::int, updated_at = now()
        where r.notification_id = ${notificationId}::uuid and r.generation = ${generation}::int and r.range_no = ${rangeNo}::int
          and not r.done
          -- from the checkpoint this run read, as saveFanoutPage
          and r.next_seq = ${page.nextSeq - batches.length}::int
          and exists (
            select 1 from notifications n
            where n.id = ${notificationId}::uuid and n.generation = ${generation}::int and n.state <> 'canceled')
        returning 1),
      touched as (
        update notifications
        set updated_at = now()
        where id = ${notificationId}::uuid and updated_at < now() - make_interval(secs => ${PROGRESS_TOUCH_SECONDS}::int)
          and exists (select 1 from moved))
      ${storeBatches(notificationId, generation, batches)}
      select count(*)::int as moved from moved`.execute(db);
    return (rows[0]?.moved ?? 0) > 0;
  }

  /**
   * Marks a range fanned out; when it was the last, the notification's fan-out is done. Two statements: the last
   * range to commit its own sees every other one done (a check inside its own statement might not).
   * Whether this call finished the fan-out.
   */
  async finishRange(db: Db, notificationId: string, generation: number, rangeNo: number): Promise<boolean> {
    await db
      .updateTable('fanout_ranges')
      .set({ done: true, updated_at: sql<Date>`now()` })
      .where('notification_id', '=', notificationId)
      .where('generation', '=', generation)
      .where('range_no', '=', rangeNo)
      .execute();
    const { rows } = await sql<{ id: string }>`
      update notifications n
      set fanout_done = true, updated_at = now()
      where n.id = ${notificationId}::uuid and n.generation = ${generation}::int and not n.fanout_done
        and not exists (
          select 1 from fanout_ranges r
          where r.notification_id = ${notificationId}::uuid and r.generation = ${generation}::int and not r.done)
      returning n.id`.execute(db);
    return rows.length > 0;
  }

  /**
   * Stores the batches of notifications whose whole (small) audience was cut when they were inserted (they were
   * inserted with their fan-out done, `NewNotification.cut`), in one statement. One job delivers them all
   * (`NotificationScheduler.deliver`): named after the first, the others record it as their job_id.
   */
  async insertBatches(trx: Transaction<Database>, audiences: CutAudience[]): Promise<void> {
    await this.batchesInsert(audiences)?.execute(trx);
  }

  /** The statement of `insertBatches`, to run on its own or inside another (null when there is no batch). */
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
      ) as t
      on conflict (notification_id, generation, seq) do nothing`;
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

  /** The devices not sent to because they were due inside their quiet hours (`then: drop`). */
  async setSkippedQuietHours(db: Db, notificationId: string, count: number): Promise<void> {
    await db.updateTable('notifications').set({ skipped_quiet_hours: count }).where('id', '=', notificationId).execute();
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

  /** A notification's pending batches; of `seqs` only (one range's block: from inclusive, to exclusive) when given. */
  async pendingBatches(
    db: Db,
    notificationId: string,
    generation: number,
    seqs?: { from: number; to: number },
  ): Promise<({ id: string } & Pick<DeliveryBatch, 'platform' | 'development' | 'not_before' | 'job_id'>)[]> {
    return db
      .selectFrom('delivery_batches as b')
      .select([idOf('b').as('id'), 'platform', 'development', 'not_before', 'job_id'])
      .where('notification_id', '=', notificationId)
      .where('generation', '=', generation)
      .$if(seqs !== undefined, (q) => q.where('seq', '>=', seqs!.from).where('seq', '<', seqs!.to))
      .where('state', '=', 'pending')
      .orderBy('seq')
      .execute();
  }

  /**
   * The subscription keys of web devices as they are now, with the token (endpoint) they belong to: a push is
   * encrypted to the keys of the endpoint it goes to.
   */
  async webPushKeysOf(db: Db, deviceIds: string[]): Promise<Map<string, { token: string; p256dh: string; auth: string }>> {
    const { rows } = await sql<{ id: string; token: string; p256dh: string; auth: string }>`
      select id, token, web_push_p256dh as p256dh, web_push_auth as auth
      from devices
      where id = any(${deviceIds}::uuid[]) and token is not null and web_push_p256dh is not null and web_push_auth is not null`.execute(db);
    return new Map(rows.map(({ id, ...keys }) => [id, keys]));
  }

  /** The locales devices have now (a localized push is sent in each one's language); a device without one is absent. */
  async localesOf(db: Db, deviceIds: string[]): Promise<Map<string, string>> {
    const { rows } = await sql<{ id: string; locale: string }>`
      select id, locale
      from devices
      where id = any(${deviceIds}::uuid[]) and locale is not null`.execute(db);
    return new Map(rows.map((r) => [r.id, r.locale]));
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
    const input = attempts.map(({ batch, outcome, finalAttempt }) => {
      const retryLeft = finalAttempt ? [] : outcome.retry;
      return {
        batch,
        outcome,
        retryLeft,
        failed: outcome.failed.length + (finalAttempt ? outcome.retry.length : 0),
        // why nothing may have been delivered: a refused push, retries run out, a dead token, the expiry
        failureReason:
          outcome.failed[0]?.reason ??
          (finalAttempt && outcome.retry.length ? 'retries_exhausted' : null) ??
          outcome.invalidated[0]?.reason ??
          (outcome.expired.length ? 'expired' : null) ??
          (outcome.capped?.length ? 'frequency_capped' : null),
      };
    });
    const all = attempts.flatMap(({ batch, outcome }) => outcome.invalidated.map((i) => ({ batchId: batch.id, ...i })));
    const invalid = all.filter((i) => i.token === undefined);
    const dead = all.filter((i) => i.token !== undefined);
    // a dead Live Activity token is forgotten where it is (an activity's or a type's), the device keeps its own
    const forget = dead.length
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
    const invalidate = invalid.length
      ? sql`, invalidated as (
          update devices d set token_invalidated_at = now(), token_invalid_reason = inv.reason
          from unnest(
            ${invalid.map((i) => i.deviceId)}::uuid[],
            ${invalid.map((i) => i.reason)}::text[],
            ${invalid.map((i) => i.batchId)}::text[]
          ) as inv(id, reason, batch_id)
          where d.id = inv.id and d.token_invalidated_at is null and inv.batch_id in (select id from recorded))`
      : sql``;
    // each batch's received devices as one joined list (uuids hold no comma), its notification and time once: arrays
    // of an element per device, repeating those, were the costly part to encode and to parse
    const receipts = attempts.some(({ outcome }) => outcome.succeeded.length > 0)
      ? sql`, received as (
          insert into device_pushes (device_id, notification_id, received_at)
          select distinct on (s.device_id, i.notification_id) s.device_id, i.notification_id, coalesce(i.sent_at, now())
          from input i cross join lateral unnest(string_to_array(i.received, ',')::uuid[]) as s(device_id)
          where i.id in (select id from recorded)
          on conflict do nothing)`
      : sql``;
    const notificationIds = [...new Set(input.map((i) => i.batch.notification_id))];
    // a batch is found by its key (migration 043), its seq read off its id (made from it)
    const seqOf = (id: string) => parseBatchId(id)?.seq ?? null;
    const { rows } = await sql<{ id: string }>`${sql.raw(PLAN_EACH_RUN)}
      with input as (
        select t.id, t.notification_id, t.generation, t.seq, t.attempts, string_to_array(t.pending, ',')::uuid[] as pending, t.state,
          t.succeeded, t.failed, t.invalidated, t.expired, t.capped, t.last_error, t.failure_reason, t.received, t.sent_at
        from unnest(
          ${input.map((i) => i.batch.id)}::text[], ${input.map((i) => i.batch.notification_id)}::uuid[],
          ${input.map((i) => i.batch.generation)}::int[], ${input.map((i) => seqOf(i.batch.id))}::int[],
          ${input.map((i) => i.batch.attempts)}::int[],
          ${input.map((i) => i.retryLeft.join(','))}::text[], ${input.map((i) => (i.retryLeft.length ? 'pending' : 'done'))}::text[],
          ${input.map((i) => i.outcome.succeeded.length)}::int[], ${input.map((i) => i.failed)}::int[],
          ${input.map((i) => i.outcome.invalidated.length)}::int[], ${input.map((i) => i.outcome.expired.length)}::int[],
          ${input.map((i) => i.outcome.capped?.length ?? 0)}::int[], ${input.map((i) => i.outcome.lastError)}::text[],
          ${input.map((i) => i.failureReason)}::text[],
          ${input.map((i) => i.outcome.succeeded.join(','))}::text[], ${input.map((i) => i.outcome.sentAt ?? null)}::timestamptz[]
        ) as t(
          id, notification_id, generation, seq, attempts, pending, state, succeeded, failed, invalidated, expired, capped,
          last_error, failure_reason, received, sent_at
        )),
      recorded as (
        update delivery_batches b
        set pending_device_ids = i.pending, state = i.state, attempts = b.attempts + 1,
            succeeded = b.succeeded + i.succeeded, failed = b.failed + i.failed, invalidated = b.invalidated + i.invalidated,
            expired = b.expired + i.expired, capped = b.capped + i.capped, last_error = i.last_error,
            failure_reason = coalesce(i.failure_reason, b.failure_reason), updated_at = now()
        from input i
        where b.notification_id = i.notification_id and b.generation = i.generation and b.seq = i.seq and b.state = 'pending'
          and b.attempts = i.attempts and b.notification_id = any(${notificationIds}::uuid[])
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
          group by i.notification_id, n1.id) c
        where n.id = c.notification_id and n.id = any(${notificationIds}::uuid[])
          and (c.closes or n.updated_at < now() - make_interval(secs => ${PROGRESS_TOUCH_SECONDS}::int))
        returning n.id, c.closes and n.state in ('sent', 'failed') as closes)
      ${invalidate}
      ${forget}
      ${receipts}
      ${withEvents ? batchEventsCte(attempts.flatMap(batchOutcomes), notificationIds) : sql``}
      select id from counted where closes`.execute(db);
    return new Set(rows.map((r) => r.id));
  }

  /**
   * Takes a slot of the caps for each device that has one left in all of them (fewer than `limit` of its pushes in
   * the last `window`), and answers those devices; the others are at a cap. One upsert: each device's row keeps
   * its last pushes (as many as the largest cap), is locked in device order, and is tested and appended to on the
   * version the lock gives, so notifications racing for a device's last slot see each other: one gets it.
   */
  async takeCapSlots(db: Db, caps: FrequencyCap[], deviceIds: string[], now: Date): Promise<Set<string>> {
    if (!deviceIds.length || !caps.length) return new Set(deviceIds);
    const secs = caps.map((c) => CAP_WINDOWS[c.window]);
    const limits = caps.map((c) => c.limit);
    const kept = Math.max(...limits);
    const { rows } = await sql<{ device_id: string }>`
      with caps as (select * from unnest(${secs}::int[], ${limits}::int[]) as w(secs, lim))
      insert into device_cap_sends as s (device_id, sent_at, last_sent_at)
      select d.id, array[${now}::timestamptz], ${now}::timestamptz
      from unnest(${[...new Set(deviceIds)]}::uuid[]) as d(id)
      order by d.id
      on conflict (device_id) do update
      set sent_at = array(select t from unnest(s.sent_at || excluded.last_sent_at) as t order by t desc limit ${kept}::int),
          last_sent_at = greatest(s.last_sent_at, excluded.last_sent_at)
      where not exists (
        select 1 from caps w
        where (select count(*) from unnest(s.sent_at) as t where t > excluded.last_sent_at - make_interval(secs => w.secs)) >= w.lim)
      returning s.device_id`.execute(db);
    return new Set(rows.map((r) => r.device_id));
  }

  /** Forgets the devices whose last push left the longest cap window before `before`; answers how many went. */
  async purgeCapSends(db: Db, before: Date, limit: number): Promise<number> {
    const r = await sql`
      delete from device_cap_sends
      where device_id in (
        select device_id from device_cap_sends
        where last_sent_at <= ${before}::timestamptz - make_interval(secs => ${LONGEST_CAP_WINDOW}::int)
        limit ${limit}::int)`.execute(db);
    return Number(r.numAffectedRows ?? 0);
  }

  /**
   * Why a batch of this notification's generation may no longer go out: canceled, or superseded by a newer generation
   * (a collapse key's update); null while it still sends.
   */
  async stopReason(db: Db, notificationId: string, generation: number): Promise<StopReason | null> {
    const n = await db.selectFrom('notifications').select(['state', 'generation']).where('id', '=', notificationId).executeTakeFirst();
    // in the order a delivery job checks them
    if (n && n.generation !== generation) return 'superseded';
    return n?.state === 'canceled' ? 'canceled' : null;
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
   * Closes each notification whose fan-out is done and no batch is pending: `sent` when anything was delivered
   * or nothing was targeted, `failed` when every push failed. Answers the ids it closed. Given the `seq` of the
   * batch that just finished, the pending batch looked for is its nearest, above it then below it: batches
   * finish about in order, so one is found a few rows away, not after every batch done before (a walk that cost
   * a 25,000-batch broadcast 25,000 rows a batch); only the last batches walk them all.
   */
  async completeIfFinished(db: Db, notifications: { id: string; generation: number; seq?: number }[]): Promise<string[]> {
    const unique = [...new Map(notifications.map((n) => [`${n.id}:${n.generation}`, n])).values()];
    if (!unique.length) return [];
    const ids = [...new Set(unique.map((n) => n.id))];
    // scalar subqueries, each an index scan from the seq that stops at the first pending batch (an anti-join may
    // read them all)
    const pending = (where: RawBuilder<unknown>, order: RawBuilder<unknown>) => sql`(
      select true from delivery_batches b
      where b.notification_id = t.id and b.notification_id = any(${ids}::uuid[]) and b.generation = t.generation and ${where}
        and b.state = 'pending'
      order by ${order} limit 1) is null`;
    const { rows } = await sql<{ id: string }>`${sql.raw(PLAN_EACH_RUN)}
      update notifications n
      set state = case when ${anySucceeded(ids)} or n.devices_targeted + ${rangesTargeted(ids)} = 0 then 'sent' else 'failed' end,
          finished_at = now(), updated_at = now()
      from unnest(${unique.map((n) => n.id)}::uuid[], ${unique.map((n) => n.generation)}::int[], ${unique.map((n) => n.seq ?? null)}::int[])
        as t(id, generation, seq)
      where n.id = t.id and n.id = any(${ids}::uuid[]) and n.generation = t.generation
        and n.fanout_done and n.state in ('scheduled', 'sending')
        and ${pending(sql`b.seq > coalesce(t.seq, -1)`, sql`b.seq`)}
        and (t.seq is null or ${pending(sql`b.seq < t.seq`, sql`b.seq desc`)})
      returning n.id`.execute(db);
    return rows.map((r) => r.id);
  }

  /**
   * Notifications whose pipeline shows no progress for a while: their jobs may be lost (queue restart, crash before
   * enqueue). One that the process which created it sends itself has no job meanwhile: a transactional send (it
   * has a group), and a small audience cut at creation (published the moment it was created, in the same
   * statement). Those are stalled only once that process must have finished, `heldSeconds` after the creation.
   * Oldest first, from after `after` (the last one a previous call returned): those still waiting in the queue do
   * not hide the ones behind them.
   */
  async findStalled(
    db: Db,
    olderThan: { seconds: number; heldSeconds: number },
    page: { after: StalledNotification | null; limit: number },
  ): Promise<StalledNotification[]> {
    const { after, limit } = page;
    return (
      db
        .selectFrom('notifications')
        .select([
          'id',
          'generation',
          'wave',
          'ab_stage',
          sql<string>`updated_at::text`.as('position'),
          sql<boolean>`next_due_at is not null`.as('held'),
        ])
        .where('state', 'in', ['scheduled', 'sending'])
        // One waiting for its send time (or next local-time wave) is not stalled: the due poller releases it. An A/B
        // test waiting for its winner (for ever, for a manual pick) may still have test-share batches to send.
        .where((eb) =>
          eb.or([
            eb('next_due_at', 'is', null),
            eb.and([
              eb('ab_stage', '=', 'waiting'),
              sql<boolean>`exists (
                select 1 from delivery_batches b
                where b.notification_id = notifications.id and b.generation = notifications.generation and b.state = 'pending')`,
            ]),
          ]),
        )
        .where('updated_at', '<', sql<Date>`now() - make_interval(secs => ${olderThan.seconds})`)
        .where((eb) =>
          eb.or([
            eb.and([eb('send_group', 'is', null), sql<boolean>`published_at is distinct from created_at`]),
            eb('created_at', '<', sql<Date>`now() - make_interval(secs => ${olderThan.heldSeconds})`),
          ]),
        )
        .$if(after !== null, (q) => q.where(sql<boolean>`(updated_at, id) > (${after!.position}::timestamptz, ${after!.id}::uuid)`))
        .orderBy('updated_at')
        .orderBy('id')
        .limit(limit)
        .execute()
    );
  }

  /**
   * Takes the notifications whose send time (or next local-time wave) has come, for their fan-out to be enqueued.
   * Clearing next_due_at claims them (SKIP LOCKED: several workers poll); a crash before the enqueue leaves them to
   * the sweeper, as any notification whose job was lost.
   */
  async releaseDue(db: Db, now: Date, limit: number): Promise<Pick<Notification, 'id' | 'generation' | 'wave' | 'ab_stage'>[]> {
    const { rows } = await sql<Pick<Notification, 'id' | 'generation' | 'wave' | 'ab_stage'>>`
      update notifications n set next_due_at = null, updated_at = now()
      from (select id from notifications
            where next_due_at <= ${now} and state in ('scheduled', 'sending')
            order by next_due_at limit ${limit}::int
            for update skip locked) due
      where n.id = due.id
      returning n.id, n.generation, n.wave, n.ab_stage`.execute(db);
    return rows;
  }

  /** Marks notifications as making progress now: the sweeper leaves them alone for another while. */
  async touch(db: Db, notificationIds: string[]): Promise<void> {
    if (!notificationIds.length) return;
    await db
      .updateTable('notifications')
      .set({ updated_at: sql<Date>`now()` })
      .where('id', 'in', notificationIds)
      .modifyEnd(sql.raw(PLAN_EACH_RUN))
      .execute();
  }
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
function storeBatches(notificationId: string, generation: number, batches: NewBatch[]) {
  if (!batches.length) return sql``;
  const rows = batches.map(
    (b) =>
      sql`(
        ${b.seq}::int, ${b.platform}, ${b.development}::boolean, string_to_array(${b.deviceIds.join(',')}, ',')::uuid[],
        ${b.notBefore ?? null}::timestamptz, ${b.variant ?? null}::smallint, ${b.abRest ?? false}::boolean
      )`,
  );
  return sql`, stored as (
    insert into delivery_batches (notification_id, generation, seq, platform, development, device_ids, not_before, variant, ab_rest)
    select ${notificationId}::uuid, ${generation}::int, v.seq, v.platform, v.development, v.ids, v.not_before, v.variant, v.ab_rest
    from (values ${sql.join(rows)}) as v(seq, platform, development, ids, not_before, variant, ab_rest)
    where exists (select 1 from moved)
    on conflict (notification_id, generation, seq) do nothing)`;
}
