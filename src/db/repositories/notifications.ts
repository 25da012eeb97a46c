import type { NotificationRequest } from '../../domain/notification-request.js';
import { sql, type RawBuilder, type Transaction } from 'kysely';
import { PLAN_EACH_RUN, type Db } from '../database.js';
import type { Database, Notification, NotificationState, NotificationsTable } from '../schema.js';
import { jsonbArray } from '../pg-arrays.js';
import { SPEC_AUDIENCES } from './audiences.js';
import type { Timing } from '../../domain/campaign.js';
import { isUuid } from '../../domain/cursor.js';
import type { DeliveryOptions } from '../../domain/delivery-options.js';
import type { LiveActivityRef } from '../../domain/live-activity.js';
import type { Localized } from '../../domain/localized.js';
import type { TemplateData } from '../../domain/template-data.js';
import type { Filter } from '../../domain/filters.js';
import type { CampaignSettings } from './apps.js';
import type { Actor } from '../../domain/audit.js';

/** The generation of a notification when it is inserted (a collapse_key update bumps it). */
export const FIRST_GENERATION = 1;

export interface NewNotification {
  /** made by the caller when it must name the notification before it is stored (`insertCut`); else by PostgreSQL */
  id?: string;
  appId: string;
  /** null for a transactional send, and for one whose audience the insert upserts (`audienceSpecKey`) */
  audienceId: string | null;
  /** the spec key of its app's audience, upserted by the same statement (`insertCut`'s `audiences`) */
  audienceSpecKey?: string;
  /** The request's notification as it was parsed, stored as the record's `notification`. */
  request: NotificationRequest['notification'] | Record<string, unknown>;
  payload: Record<string, unknown>;
  /** content per language; absent or null: the payload in every language */
  localized?: Localized | null;
  collapseKey: string | null;
  group?: string | null;
  /** When and how fast it goes out; absent: now, as fast as the gateways take it. */
  timing?: Timing;
  /** expiry and priority; none when absent */
  options?: DeliveryOptions;
  /**
   * Its whole audience, cut into batches before it is inserted (a few devices, to go out now): it is inserted
   * with its fan-out done, `sending` (or `sent`, no device matched), and its batches are inserted after it.
   */
  cut?: { batches: number; targeted: number; notAllowed?: number };
  /** the in-app message whose push this is (its payload carries the id) */
  messageId?: string | null;
  /** a transactional send's collapse_key with its recipient (`transactionalKey`) */
  transactionalKey?: string | null;
  /** a Live Activity push: what it starts, updates or ends */
  liveActivity?: LiveActivityRef | null;
  /** what its templates render with (`data`, `data_by`, a journey's events); absent: nothing */
  templateData?: TemplateData | null;
  /** who created it (the request's key, address and id); absent: nobody's request did */
  actor?: Actor;
}

/** A device's outcome in a notification (NotificationsRepository.deviceOutcomes); the batch's fields null when it was in none. */
export interface DeviceOutcomeRow {
  notification_id: string;
  state: NotificationState;
  next_due_at: Date | null;
  skipped_quiet_hours: number;
  pushes_capped: number;
  device_id: string;
  batch_state: 'pending' | 'done' | 'canceled' | null;
  unsent: boolean | null;
  failure_reason: string | null;
  received_at: Date | null;
}

export class NotificationsRepository {
  /**
   * Inserts a notification. With a collapse_key an earlier notification of the app with that key is the
   * same notification: it is updated in place (payload included), rescheduled, and its generation bumped.
   */
  async insertOrCollapse(db: Db, n: NewNotification): Promise<Notification> {
    if (n.collapseKey === null) return (await insertRows(db, [n], sql``))[0]!;
    // The key's row names its notification (migration 037: the partitioned table cannot hold a unique index on the
    // key): its upsert answers the earlier one's id, or records the new one's, and row-locks the key until the
    // commit, so a concurrent send with it waits and then takes the same id.
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
    if (!isUuid(id)) return undefined;
    return db.selectFrom('notifications').selectAll().where('app_id', '=', appId).where('id', '=', id).executeTakeFirst();
  }

  /** The app's notifications, newest first, of one state when given. */
  async listForApp(db: Db, appId: string, state: NotificationState | undefined, limit: number, offset: number): Promise<Notification[]> {
    // Live Activity pushes are listed with their own resource, not as notifications
    let q = db.selectFrom('notifications').selectAll().where('app_id', '=', appId).where('live_activity', 'is', null);
    if (state) q = q.where('state', '=', state);
    return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).offset(offset).execute();
  }

  /**
   * Cancels a notification that has not finished: it leaves the due list, and fan-out and delivery stop at their
   * next step (batches in flight finish). Undefined when it is unknown or already finished.
   */
  async cancel(db: Db, appId: string, id: string): Promise<Notification | undefined> {
    if (!isUuid(id)) return undefined;
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
}

/** A notification's counters, summed from its batches and fan-out ranges on read (`withCounters`). */
type CountedColumn =
  | 'devices_targeted'
  | 'devices_not_allowed'
  | 'pushes_succeeded'
  | 'pushes_failed'
  | 'tokens_invalidated'
  | 'pushes_expired'
  | 'pushes_capped'
  | 'failure_reason';

/**
 * The columns `insertCut` returns: what its callers read of a notification just cut (the create answer, its
 * batches' first sends, its release to the pipeline).
 */
const CUT_COLUMNS = [
  'id',
  'app_id',
  'audience_id',
  'created_at',
  'state',
  'generation',
  'next_due_at',
  'expires_at',
  'priority',
  'capped',
] as const satisfies readonly Exclude<keyof NotificationsTable, Documents>[];
type Documents = 'request' | 'payload' | 'localized';
const CUT_RETURNED = sql.join(CUT_COLUMNS.map((c) => sql.ref(c)));

/** A notification as `insertCut` answers it: the columns its callers read, and the documents it was given. */
export type CutNotification = Pick<Notification, (typeof CUT_COLUMNS)[number] | Documents>;

/**
 * The insert of notifications: one array per column, so the statement's text is the same however many there are.
 * A cut notification (`NewNotification.cut`) is inserted with its fan-out done; a ttl counts from the statement's
 * now(): the created_at of a new row, or the moment a collapse_key update replaced the notification (an old
 * creation time would leave the update less time than it asked for).
 */
async function insertRows(
  db: Db,
  list: NewNotification[],
  onConflict: RawBuilder<unknown>,
  also: {
    /** statements run as parts of this one, after the rows they may refer to */
    after?: (RawBuilder<unknown> | null)[];
    returning?: RawBuilder<unknown>;
    /** CTEs run first, ending with SPEC_AUDIENCES: the audiences the rows name by `audienceSpecKey` */
    audiences?: RawBuilder<unknown> | null;
    /** a CTE run first, and the id of the row (one) it answers (`insertOrCollapse`) */
    before?: RawBuilder<unknown>;
    id?: RawBuilder<unknown>;
  } = {},
): Promise<Notification[]> {
  if (!also.audiences && list.some((n) => n.audienceSpecKey !== undefined))
    throw new Error('insertRows: a notification naming its audience by spec key needs the audiences (specAudiences)');
  const column = <T>(f: (n: NewNotification) => T) => list.map(f);
  const json = (f: (n: NewNotification) => unknown) => jsonbArray(list.map(f));
  const audienceId = also.audiences
    ? sql`coalesce(
        t.audience_id,
        (select s.id from ${sql.table(SPEC_AUDIENCES)} s where s.app_id = t.app_id and s.spec_key = t.audience_key)
      )`
    : sql`t.audience_id`;
  const insert = sql<Notification>`
    insert into notifications (
      id, generation, app_id, audience_id, request, payload, localized, collapse_key, send_group, send_at, next_due_at, local_plan,
      throttle_per_minute, expires_at, priority, message_id, transactional_key,
      fanout_done, fanout_seq, devices_targeted, devices_not_allowed, state, published_at, finished_at, live_activity, template_data,
      actor_key_id, actor_role, client_address, request_id
    )
    select ${also.id ?? sql`coalesce(t.id, pushd_uuid7())`}, ${FIRST_GENERATION}::int, t.app_id, ${audienceId},
      t.request, t.payload, t.localized, t.collapse_key, t.send_group, t.send_at, t.next_due_at, t.local_plan,
      t.throttle_per_minute, coalesce(now() + make_interval(secs => t.ttl), t.expires_at), t.priority, t.message_id, t.transactional_key,
      t.cut_batches is not null, coalesce(t.cut_batches, 0), coalesce(t.cut_targeted, 0), coalesce(t.cut_not_allowed, 0),
      case when t.cut_batches is null then 'scheduled' when t.cut_targeted > 0 then 'sending' else 'sent' end,
      case when t.cut_batches is not null then now() end,
      case when t.cut_targeted = 0 then now() end, t.live_activity, t.template_data,
      t.actor_key_id, t.actor_role, t.client_address, t.request_id
    from unnest(
      ${column((n) => n.id ?? null)}::uuid[], ${column((n) => n.appId)}::uuid[], ${column((n) => n.audienceId)}::uuid[],
      ${json((n) => n.request)}::jsonb[], ${json((n) => n.payload)}::jsonb[], ${json((n) => n.localized)}::jsonb[],
      ${column((n) => n.collapseKey)}::text[], ${column((n) => n.group ?? null)}::text[],
      ${column((n) => n.timing?.sendAt ?? null)}::timestamptz[], ${column((n) => n.timing?.nextDueAt ?? null)}::timestamptz[],
      ${json((n) => n.timing?.localPlan)}::jsonb[], ${column((n) => n.timing?.throttlePerMinute ?? null)}::int[],
      ${column((n) => n.options?.ttlSeconds ?? null)}::int[],
      ${column((n) => (n.options?.ttlSeconds != null ? null : (n.options?.expiresAt ?? null)))}::timestamptz[],
      ${column((n) => n.options?.priority ?? null)}::text[], ${column((n) => n.messageId ?? null)}::uuid[],
      ${column((n) => n.transactionalKey ?? null)}::text[],
      ${column((n) => n.cut?.batches ?? null)}::int[], ${column((n) => n.cut?.targeted ?? null)}::int[],
      ${column((n) => n.cut?.notAllowed ?? null)}::int[],
      ${column((n) => n.audienceSpecKey ?? null)}::uuid[], ${json((n) => n.liveActivity)}::jsonb[],
      ${json((n) => n.templateData)}::jsonb[],
      ${column((n) => n.actor?.keyId ?? null)}::uuid[], ${column((n) => n.actor?.role ?? null)}::text[],
      ${column((n) => n.actor?.address ?? null)}::text[], ${column((n) => n.actor?.requestId ?? null)}::text[]
    ) with ordinality as t(
      id, app_id, audience_id, request, payload, localized, collapse_key, send_group, send_at, next_due_at, local_plan,
      throttle_per_minute, ttl, expires_at, priority, message_id, transactional_key, cut_batches, cut_targeted, cut_not_allowed,
      audience_key, live_activity, template_data, actor_key_id, actor_role, client_address, request_id, ord
    )
    order by t.ord
    ${onConflict}
    returning ${also.returning ?? sql`*`}`;
  // the others run as parts of this one (data-modifying CTEs): the audiences before, the batches after the rows
  const after = (also.after ?? []).flatMap((statement, k) => (statement ? [sql`${sql.raw(`after_${k}`)} as (${statement})`] : []));
  const parts = [also.before, also.audiences, sql`inserted as (${insert})`, ...after].filter((p) => !!p);
  const { rows } = await (parts.length > 1 ? sql<Notification>`with ${sql.join(parts)} select * from inserted` : insert).execute(db);
  return rows;
}
