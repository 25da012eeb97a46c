import type { NotificationRequest } from '../../domain/notification-request.js';
import { sql } from 'kysely';
import type { Db } from '../database.js';
import type { Notification, NotificationState } from '../schema.js';
import type { Timing } from '../../domain/campaign.js';
import { isUuid } from '../../domain/cursor.js';
import type { DeliveryOptions } from '../../domain/delivery-options.js';

export interface NewNotification {
  appId: string;
  /** null for a transactional send */
  audienceId: string | null;
  /** The request's notification as it was parsed, stored as the record's `notification`. */
  request: NotificationRequest['notification'] | Record<string, unknown>;
  payload: Record<string, unknown>;
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
  cut?: { batches: number; targeted: number };
  /** the in-app message whose push this is (its payload carries the id) */
  messageId?: string | null;
}

export class NotificationsRepository {
  /**
   * Inserts a notification. With a collapse_key an earlier notification of the app with that key is the
   * same notification: it is updated in place (payload included), rescheduled, and its generation bumped.
   */
  async insertOrCollapse(db: Db, n: NewNotification): Promise<Notification> {
    const values = rowOf(n);
    if (n.collapseKey === null) {
      return db.insertInto('notifications').values(values).returningAll().executeTakeFirstOrThrow();
    }
    return db
      .insertInto('notifications')
      .values(values)
      .onConflict((oc) =>
        oc
          .columns(['app_id', 'collapse_key'])
          .where('collapse_key', 'is not', null)
          .doUpdateSet((eb) => ({
            audience_id: eb.ref('excluded.audience_id'),
            request: eb.ref('excluded.request'),
            payload: eb.ref('excluded.payload'),
            expires_at: eb.ref('excluded.expires_at'),
            priority: eb.ref('excluded.priority'),
            // the payload replaced is the one that named a message: the notification is the new request's push now
            message_id: eb.ref('excluded.message_id'),
            state: 'scheduled',
            generation: sql<number>`notifications.generation + 1`,
            failure_reason: null,
            finished_at: null,
            fanout_cursor: null,
            fanout_seq: 0,
            fanout_done: false,
            send_at: eb.ref('excluded.send_at'),
            next_due_at: eb.ref('excluded.next_due_at'),
            local_plan: eb.ref('excluded.local_plan'),
            wave: 0,
            skipped_past_local_time: 0,
            throttle_per_minute: eb.ref('excluded.throttle_per_minute'),
            pace_next_at: null,
            canceled_at: null,
            updated_at: sql<Date>`now()`,
          })),
      )
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  /**
   * Inserts notifications without a collapse_key in one statement; the rows come back in the order given
   * (PostgreSQL returns an INSERT … VALUES's rows in the order of its VALUES).
   */
  async insertMany(db: Db, list: NewNotification[]): Promise<Notification[]> {
    if (list.some((n) => n.collapseKey !== null)) throw new Error('insertMany: a collapse_key needs insertOrCollapse');
    return db.insertInto('notifications').values(list.map(rowOf)).returningAll().execute();
  }

  async findForApp(db: Db, appId: string, id: string): Promise<Notification | undefined> {
    if (!isUuid(id)) return undefined;
    return db.selectFrom('notifications').selectAll().where('app_id', '=', appId).where('id', '=', id).executeTakeFirst();
  }

  /** The app's notifications, newest first, of one state when given. */
  async listForApp(db: Db, appId: string, state: NotificationState | undefined, limit: number, offset: number): Promise<Notification[]> {
    let q = db.selectFrom('notifications').selectAll().where('app_id', '=', appId);
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

  async findById(db: Db, id: string): Promise<Notification | undefined> {
    return db.selectFrom('notifications').selectAll().where('id', '=', id).executeTakeFirst();
  }
}

function rowOf(n: NewNotification) {
  return {
    app_id: n.appId,
    audience_id: n.audienceId,
    request: JSON.stringify(n.request),
    payload: JSON.stringify(n.payload),
    collapse_key: n.collapseKey,
    send_group: n.group ?? null,
    send_at: n.timing?.sendAt ?? null,
    next_due_at: n.timing?.nextDueAt ?? null,
    local_plan: n.timing?.localPlan ? JSON.stringify(n.timing.localPlan) : null,
    throttle_per_minute: n.timing?.throttlePerMinute ?? null,
    expires_at: expiresAt(n.options),
    priority: n.options?.priority ?? null,
    message_id: n.messageId ?? null,
    ...(n.cut && {
      fanout_done: true,
      fanout_seq: n.cut.batches,
      devices_targeted: n.cut.targeted,
      state: n.cut.targeted ? ('sending' as const) : ('sent' as const),
      published_at: sql<Date>`now()`,
      finished_at: n.cut.targeted ? null : sql<Date>`now()`,
    }),
  };
}

/**
 * A ttl counts from the statement's now(): the created_at of a new row, or the moment a collapse_key update
 * replaced the notification (an old creation time would leave the update less time than it asked for).
 */
function expiresAt(options: DeliveryOptions | undefined) {
  if (options?.ttlSeconds != null) return sql<Date>`now() + make_interval(secs => ${options.ttlSeconds}::int)`;
  return options?.expiresAt ?? null;
}
