import { sql, type RawBuilder, type Transaction } from 'kysely';
import { PLAN_EACH_RUN, type Db } from '../database.js';
import type { Database, Notification, NotificationState } from '../schema.js';
import { anySucceeded, type StopReason } from './batches.js';
import { rangesTargeted } from './fanout.js';
import type { Filter } from '../../domain/filters.js';
import type { CampaignSettings } from './apps.js';
import { CUT_RETURNED, insertRows, type CountedColumn, type CutNotification, type DeviceOutcomeRow } from './notification-rows.js';
import type { NewNotification, StalledNotification } from './notification-rows.js';

export { FIRST_GENERATION, type CutNotification, type NewNotification } from './notification-rows.js';

export class NotificationsRepository {
  /**
   * Inserts a notification. With a collapse_key an earlier notification of the app with that key is the
   * same notification: it is updated in place (payload included), rescheduled, and its generation bumped.
   */
  async insertOrCollapse(db: Db, n: NewNotification): Promise<Notification> {
    if (n.collapseKey === null) return (await insertRows(db, [n], sql``))[0]!;
    // The key's row names its notification (a partitioned table holds no unique index on the key): its upsert
    // answers the earlier one's id, or records the new one's, and row-locks the key until the commit.
    const key = sql`collapse_key_row as (
      insert into notification_collapse_keys (app_id, collapse_key, notification_id)
      values (${n.appId}::uuid, ${n.collapseKey}, coalesce(${n.id ?? null}::uuid, pushd_uuid7()))
      on conflict (app_id, collapse_key) do update set notification_id = notification_collapse_keys.notification_id
      returning notification_id)`;
    const collapse = sql`
      on conflict (id) do update set
        audience_id = excluded.audience_id, request = excluded.request, payload = excluded.payload, localized = excluded.localized,
        template_data = excluded.template_data,
        expires_at = excluded.expires_at, priority = excluded.priority,
        -- the payload replaced is the one that named a message: the notification is the new request's push now
        message_id = excluded.message_id,
        state = 'scheduled', generation = notifications.generation + 1, failure_reason = null, finished_at = null,
        fanout_cursor = null, fanout_seq = 0, fanout_done = false, send_at = excluded.send_at, next_due_at = excluded.next_due_at,
        local_plan = excluded.local_plan, wave = 0, skipped_past_local_time = 0, skipped_quiet_hours = 0,
        best_time_first_at = null, best_time_last_at = null,
        throttle_per_minute = excluded.throttle_per_minute,
        pace_next_at = null, canceled_at = null, updated_at = now(), actor_key_id = excluded.actor_key_id,
        actor_role = excluded.actor_role, client_address = excluded.client_address, request_id = excluded.request_id`;
    const [row] = await insertRows(db, [n], collapse, { before: key, id: sql`(select notification_id from collapse_key_row)` });
    return row!;
  }

  /**
   * Inserts notifications without a collapse_key in one statement, as `insertOrCollapse` would each; the rows
   * come back in the order given (PostgreSQL returns an INSERT … SELECT's rows in the order it inserts them).
   */
  async insertMany(db: Db, list: NewNotification[]): Promise<Notification[]> {
    if (list.some((n) => n.collapseKey !== null)) throw new Error('insertMany: a collapse_key needs insertOrCollapse');
    return list.length ? insertRows(db, list, sql``) : [];
  }

  /**
   * `insertMany` of notifications whose whole audience was cut into `batches` (the delivery repository's
   * `batchesInsert` of them), in one statement with those batches and, when given, the audiences they name by spec
   * key (the audiences repository's `specAudiences`): atomic without a transaction, one round trip.
   * Their ids are made by the caller, since the batches are named after them. The rows come back with the
   * columns their callers use (`CutNotification`), and with the request and payload they were given, not read
   * back: on the path of every small notification, each column returned is formatted by the server and parsed
   * here, and the documents are most of a row's bytes.
   */
  async insertCut(
    db: Db,
    list: (NewNotification & { id: string })[],
    batches: RawBuilder<unknown> | null,
    audiences: RawBuilder<unknown> | null = null,
  ): Promise<CutNotification[]> {
    if (list.some((n) => n.collapseKey !== null)) throw new Error('insertCut: a collapse_key needs insertOrCollapse');
    if (!list.length) return [];
    // rows of CUT_COLUMNS only, whatever insertRows' type says
    const rows = await insertRows(db, list, sql``, { after: [batches], returning: CUT_RETURNED, audiences });
    const byId = new Map(rows.map((n) => [n.id, n]));
    return list.map((n) => ({
      ...byId.get(n.id)!,
      request: n.request as Notification['request'],
      payload: n.payload,
      localized: n.localized ?? null,
    }));
  }

  /**
   * The app's transactional notification with this key (`transactionalKey`), row-locked until the transaction ends;
   * undefined when there is none, and the key then names `id`, which the caller inserts in this transaction. The
   * key's row (migration 041) is upserted first, and locked whether or not a notification has it, so two sends with
   * it are taken in turn: the second waits for the first's commit and finds its notification.
   */
  async claimTransactional(
    trx: Transaction<Database>,
    appId: string,
    key: string,
    id: string,
  ): Promise<Pick<Notification, 'id' | 'generation'> | undefined> {
    const { rows } = await sql<{ notification_id: string }>`
      insert into notification_transactional_keys (app_id, transactional_key, notification_id)
      values (${appId}::uuid, ${key}, ${id}::uuid)
      on conflict (app_id, transactional_key) do update set notification_id = notification_transactional_keys.notification_id
      returning notification_id`.execute(trx);
    const named = rows[0]!.notification_id;
    if (named === id) return undefined;
    // by its id, a parameter: PostgreSQL reads its day partition alone (by a subquery's id it would plan for every day's)
    const earlier = await trx
      .selectFrom('notifications')
      .select(['id', 'generation'])
      .where('id', '=', named)
      .forUpdate()
      .executeTakeFirst();
    if (earlier) return earlier;
    // its notification is gone (past retention, its key not yet): the key names the new one
    await sql`
      update notification_transactional_keys set notification_id = ${id}::uuid
      where app_id = ${appId}::uuid and transactional_key = ${key}`.execute(trx);
    return undefined;
  }

  /**
   * Replaces a transactional notification (`claimTransactional`) with a new send, cut into `batches` (of its next
   * generation), in one statement: its request, payload, group and options become the new send's, its generation
   * is bumped (batches of the older one still pending are superseded), and its counters continue.
   */
  async replaceCut(
    trx: Transaction<Database>,
    id: string,
    n: Pick<NewNotification, 'request' | 'payload' | 'localized' | 'group' | 'options' | 'templateData' | 'actor'> & {
      cut: { batches: number; targeted: number; notAllowed: number };
    },
    batches: RawBuilder<unknown> | null,
  ): Promise<Notification> {
    const { options, cut } = n;
    const replace = sql<Notification>`
      update notifications set
        request = ${JSON.stringify(n.request)}::jsonb, payload = ${JSON.stringify(n.payload)}::jsonb,
        localized = ${n.localized ? JSON.stringify(n.localized) : null}::jsonb, send_group = ${n.group ?? null},
        template_data = ${n.templateData ? JSON.stringify(n.templateData) : null}::jsonb,
        expires_at = coalesce(
          now() + make_interval(secs => ${options?.ttlSeconds ?? null}::int),
          ${options?.expiresAt ?? null}::timestamptz
        ),
        priority = ${options?.priority ?? null}, generation = generation + 1,
        state = case when ${cut.targeted}::int > 0 then 'sending' else 'sent' end,
        finished_at = case when ${cut.targeted}::int = 0 then now() end, failure_reason = null,
        fanout_done = true, fanout_seq = ${cut.batches}::int, devices_targeted = devices_targeted + ${cut.targeted}::int,
        devices_not_allowed = devices_not_allowed + ${cut.notAllowed}::int, canceled_at = null, updated_at = now(),
        best_time_first_at = null, best_time_last_at = null,
        actor_key_id = ${n.actor?.keyId ?? null}::uuid, actor_role = ${n.actor?.role ?? null}, client_address = ${n.actor?.address ?? null},
        request_id = ${n.actor?.requestId ?? null}
      where id = ${id}::uuid
      returning *`;
    const { rows } = await (
      batches ? sql<Notification>`with replaced as (${replace}), after_rows as (${batches}) select * from replaced` : replace
    ).execute(trx);
    return rows[0]!;
  }

  async findForApp(db: Db, appId: string, id: string): Promise<Notification | undefined> {
    return db.selectFrom('notifications').selectAll().where('app_id', '=', appId).where('id', '=', id).executeTakeFirst();
  }

  /** The app's notifications, newest first, of one state when given. */
  async listForApp(db: Db, appId: string, state: NotificationState | undefined, limit: number, offset: number): Promise<Notification[]> {
    // Live Activity pushes are listed with their own resource, not as notifications
    let q = db.selectFrom('notifications').selectAll().where('app_id', '=', appId).where('live_activity', 'is', null);
    if (state) q = q.where('state', '=', state);
    return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).offset(offset).execute();
  }

  /** Cancels an unfinished notification: fan-out and delivery stop at their next step (undefined: unknown or done). */
  async cancel(db: Db, appId: string, id: string): Promise<Notification | undefined> {
    return db
      .updateTable('notifications')
      .set({
        state: 'canceled',
        canceled_at: sql<Date>`now()`,
        finished_at: sql<Date>`now()`,
        next_due_at: null,
        updated_at: sql<Date>`now()`,
      })
      .where('app_id', '=', appId)
      .where('id', '=', id)
      .where('state', 'in', ['scheduled', 'sending'])
      .returningAll()
      .executeTakeFirst();
  }

  /**
   * The notifications with their counters as they are now. Recording a batch writes its own counters, not its
   * notification's row (every worker sending a broadcast would queue on that lock): pushes are the sums of the
   * notification's batches, of every generation as before (its failure_reason the latest of this generation's);
   * devices targeted and not allowed its row's (what it fanned out itself) plus its fan-out ranges'. The row's
   * own push counters hold only pushes sent without a batch (a Live Activity channel's one push,
   * `finishBroadcast`): migration 029 moved the rest to the batches, which held them too.
   */
  async withCounters<T extends Notification>(db: Db, list: T[]): Promise<T[]> {
    if (!list.length) return list;
    const ids = list.map((n) => n.id);
    // the batches and ranges are also constrained by the ids themselves, not only by n.id: PostgreSQL then plans
    // for those notifications' day partitions alone (migration 037), as it cannot from a join
    const { rows } = await sql<Pick<Notification, 'id' | CountedColumn>>`${sql.raw(PLAN_EACH_RUN)}
      select n.id, n.devices_targeted + coalesce(r.targeted, 0) as devices_targeted,
        n.devices_not_allowed + coalesce(r.not_allowed, 0) as devices_not_allowed,
        n.pushes_succeeded + coalesce(b.succeeded, 0) as pushes_succeeded,
        n.pushes_failed + coalesce(b.failed, 0) as pushes_failed,
        n.tokens_invalidated + coalesce(b.invalidated, 0) as tokens_invalidated,
        n.pushes_expired + coalesce(b.expired, 0) as pushes_expired,
        n.pushes_capped + coalesce(b.capped, 0) as pushes_capped,
        coalesce(b.failure_reason, n.failure_reason) as failure_reason
      from notifications n
      left join lateral (
        select sum(b.succeeded)::int as succeeded, sum(b.failed + b.invalidated)::int as failed, sum(b.invalidated)::int as invalidated,
          sum(b.expired)::int as expired, sum(b.capped)::int as capped,
          (array_agg(b.failure_reason order by b.updated_at desc)
            filter (where b.failure_reason is not null and b.generation = n.generation))[1] as failure_reason
        from delivery_batches b
        where b.notification_id = n.id and b.notification_id = any(${ids}::uuid[])) b on true
      left join lateral (
        select sum(r.devices_targeted)::int as targeted, sum(r.devices_not_allowed)::int as not_allowed
        from fanout_ranges r
        where r.notification_id = n.id and r.notification_id = any(${ids}::uuid[])) r on true
      where n.id = any(${ids}::uuid[])`.execute(db);
    const byId = new Map(rows.map(({ id, ...counters }) => [id, counters]));
    return list.map((n) => ({ ...n, ...byId.get(n.id) }));
  }

  /** A channel broadcast was answered: its one push counted, the notification closed (undefined: not sending any more). */
  async finishBroadcast(db: Db, appId: string, id: string, failure: string | null): Promise<Notification | undefined> {
    return db
      .updateTable('notifications')
      .set({
        state: failure === null ? 'sent' : 'failed',
        pushes_succeeded: failure === null ? 1 : 0,
        pushes_failed: failure === null ? 0 : 1,
        failure_reason: failure,
        published_at: sql<Date>`coalesce(published_at, now())`,
        finished_at: sql<Date>`now()`,
        updated_at: sql<Date>`now()`,
      })
      .where('app_id', '=', appId)
      .where('id', '=', id)
      .where('state', '=', 'sending')
      .returningAll()
      .executeTakeFirst();
  }

  /** Closes a notification whose audience is gone (deleted by hand): failed, nothing sent, never every device instead. */
  async failAudienceMissing(db: Db, id: string, generation: number): Promise<void> {
    await db
      .updateTable('notifications')
      .set({
        state: 'failed',
        failure_reason: 'audience_missing',
        next_due_at: null,
        finished_at: sql<Date>`now()`,
        updated_at: sql<Date>`now()`,
      })
      .where('id', '=', id)
      .where('generation', '=', generation)
      .where('state', 'in', ['scheduled', 'sending'])
      .execute();
  }

  async findById(db: Db, id: string): Promise<Notification | undefined> {
    return db.selectFrom('notifications').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /**
   * A notification with what its fan-out reads before its first page, in one round trip: its audience's filters
   * (null: every device, or no audience) and its app's campaign settings.
   */
  async findForFanout(
    db: Db,
    id: string,
  ): Promise<{ notification: Notification; filters: Filter[] | null; audienceMissing: boolean; settings: CampaignSettings } | undefined> {
    const row = await db
      .selectFrom('notifications as n')
      .leftJoin('audiences as a', 'a.id', 'n.audience_id')
      .leftJoin('apps as p', 'p.id', 'n.app_id')
      .selectAll('n')
      .select([
        'a.id as fanout_audience_id',
        'a.filters as fanout_filters',
        'p.default_time_zone as fanout_default_time_zone',
        'p.max_per_minute as fanout_max_per_minute',
        'p.quiet_hours as fanout_quiet_hours',
      ])
      .where('n.id', '=', id)
      .executeTakeFirst();
    if (!row) return undefined;
    const { fanout_audience_id, fanout_filters, fanout_default_time_zone, fanout_max_per_minute, fanout_quiet_hours, ...notification } =
      row;
    return {
      notification,
      filters: fanout_filters ?? null,
      // no foreign key keeps its audience (migration 044): a missing one must not read as no filters, all devices
      audienceMissing: notification.audience_id !== null && fanout_audience_id === null,
      settings: { default_time_zone: fanout_default_time_zone, max_per_minute: fanout_max_per_minute, quiet_hours: fanout_quiet_hours },
    };
  }

  /**
   * What became of each of these devices in each of these notifications: the batch it was cut into (its state and
   * latest failure reason) and when it received the push (device_pushes), or nothing when it was in no batch; with the
   * notification's state, send time and skipped counts.
   */
  async deviceOutcomes(db: Db, notificationIds: string[], deviceIds: string[]): Promise<DeviceOutcomeRow[]> {
    if (notificationIds.length === 0 || deviceIds.length === 0) return [];
    const { rows } = await sql<DeviceOutcomeRow>`${sql.raw(PLAN_EACH_RUN)}
      select n.id as notification_id, n.state, n.next_due_at, n.skipped_quiet_hours, n.pushes_capped, x.device_id, b.state as batch_state,
             b.pending_device_ids is null or x.device_id = any(b.pending_device_ids) as unsent, b.failure_reason,
             (select min(p.received_at) from device_pushes p where p.notification_id = n.id and p.device_id = x.device_id) as received_at
      from notifications n
      cross join unnest(${deviceIds}::uuid[]) as x(device_id)
      left join delivery_batches b
        on b.notification_id = n.id and b.state <> 'superseded' and x.device_id = any(b.device_ids)
        and b.notification_id = any(${notificationIds}::uuid[])
      where n.id = any(${notificationIds}::uuid[])`.execute(db);
    return rows;
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

  /** A best-time send's first and last wave, as its record answers them. */
  async setBestTimeWaves(db: Db, id: string, generation: number, waves: { first: Date; last: Date }): Promise<void> {
    // a release run again after a crash no longer holds the waves that went: the span first written stands
    await sql`update notifications set best_time_first_at = coalesce(best_time_first_at, ${waves.first}),
        best_time_last_at = coalesce(best_time_last_at, ${waves.last})
      where id = ${id} and generation = ${generation}`.execute(db);
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
