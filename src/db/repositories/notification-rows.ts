import type { NotificationRequest } from '../../domain/notification-request.js';
import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../database.js';
import type { Notification, NotificationState, NotificationsTable } from '../schema.js';
import { jsonbArray } from '../pg-arrays.js';
import { SPEC_AUDIENCES } from './audiences.js';
import type { Timing } from '../../domain/campaign.js';
import type { DeliveryOptions } from '../../domain/delivery-options.js';
import type { LiveActivityRef } from '../../domain/live-activity.js';
import type { Localized } from '../../domain/localized.js';
import type { TemplateData } from '../../domain/template-data.js';
import type { Actor } from '../../domain/audit.js';

/** The rows of new notifications and their one insert statement (`NotificationsRepository`'s inserts). */

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

/**
 * A notification the sweeper looks at; `held` when it waits for a time (an A/B test for its winner): only its
 * pending batches can have lost their jobs, and nothing else of it is due.
 */
export type StalledNotification = Pick<Notification, 'id' | 'generation' | 'wave' | 'ab_stage'> & { position: string; held: boolean };

/** A notification's counters, summed from its batches and fan-out ranges on read (`withCounters`). */
export type CountedColumn =
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
export const CUT_RETURNED = sql.join(CUT_COLUMNS.map((c) => sql.ref(c)));

/** A notification as `insertCut` answers it: the columns its callers read, and the documents it was given. */
export type CutNotification = Pick<Notification, (typeof CUT_COLUMNS)[number] | Documents>;

/**
 * The insert of notifications: one array per column, so the statement's text is the same however many there are.
 * A cut notification (`NewNotification.cut`) is inserted with its fan-out done; a ttl counts from the statement's
 * now(): the created_at of a new row, or the moment a collapse_key update replaced the notification (an old
 * creation time would leave the update less time than it asked for).
 */
export async function insertRows(
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
