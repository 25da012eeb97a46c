import type { Db } from '../db/database.js';
import type { AudiencesRepository } from '../db/repositories/audiences.js';
import type { DeliveryRepository } from '../db/repositories/delivery.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { Notification } from '../db/schema.js';
import { canonicalFilters, DIRECT_AUDIENCE_MAX_DEVICES, namesFewDevices, specKey } from '../domain/audience-spec.js';
import { expiryOf, resolveDeliveryOptions, type DeliveryOptions } from '../domain/delivery-options.js';
import type { Filter } from '../domain/filters.js';
import { NotFoundError } from '../domain/errors.js';
import { targetOf, type NotificationRequest } from '../domain/notification-request.js';
import { fcmSendBody, toApnsRequest, toFcmMessage, type ApnsRequest, type FcmSendBody } from '../domain/push-mapping.js';
import { cutBatches } from '../queue/fanout.js';
import type { NotificationScheduler } from '../queue/jobs.js';
import type { AppsRepository } from '../db/repositories/apps.js';
import { timingOf } from '../domain/campaign.js';
import type { NotificationState } from '../domain/notification-request.js';
import type { Clock } from '../platform/clock.js';
import { ConflictError, ValidationError } from '../domain/errors.js';
import { sendAtProblem } from '../domain/schedule.js';
import { Replay, type IdempotencyKeys, type IdempotentRequest } from './idempotency.js';
import type { Transaction } from 'kysely';
import type { Database } from '../db/schema.js';

/** Stands for the id a notification gets when it is created; the same length, so the previewed sizes are exact. */
export const PREVIEW_NOTIFICATION_ID = '00000000-0000-0000-0000-000000000000';
export const PREVIEW_DEVICE_TOKEN = '<device token>';

export interface PushPreview {
  apns: ApnsRequest;
  fcm: FcmSendBody;
}

export class NotificationService {
  constructor(
    private readonly db: Db,
    private readonly audiences: AudiencesRepository,
    private readonly notifications: NotificationsRepository,
    private readonly devices: DevicesRepository,
    private readonly delivery: DeliveryRepository,
    private readonly apps: AppsRepository,
    private readonly scheduler: NotificationScheduler,
    private readonly clock: Clock,
    private readonly idempotency: IdempotencyKeys,
    private readonly batchSize: number,
    private readonly onScheduleError: (err: unknown, id: string) => void,
  ) {}

  async get(appId: string, id: string): Promise<Notification> {
    const n = await this.notifications.findForApp(this.db, appId, id);
    if (!n) throw new NotFoundError('notification');
    return n;
  }

  /** The app's notifications, newest first, of one state when given. */
  list(appId: string, page: { per: number; page: number; state?: NotificationState }): Promise<Notification[]> {
    return this.notifications.listForApp(this.db, appId, page.state, page.per, (page.page - 1) * page.per);
  }

  /**
   * Cancels a notification that is waiting or sending: nothing more starts (batches in flight finish and are
   * counted). One that has finished cannot be: 409.
   */
  async cancel(appId: string, id: string): Promise<Notification> {
    const canceled = await this.notifications.cancel(this.db, appId, id);
    if (canceled) return canceled;
    const n = await this.get(appId, id);
    throw new ConflictError(`notification: it is ${n.state} and can no longer be canceled`);
  }

  /**
   * Resolves the target to an audience and stores the notification in one transaction, then enqueues it (unless
   * it waits for its send time: the due poller releases it). With an Idempotency-Key the key is claimed first in
   * that transaction and the answer stored before it commits; a replay creates and enqueues nothing (the first
   * request enqueued, and the sweeper covers a lost enqueue).
   */
  async create(appId: string, request: NotificationRequest): Promise<Notification>;
  async create(appId: string, request: NotificationRequest, idempotency?: IdempotentRequest<Notification>): Promise<Notification | Replay>;
  async create(appId: string, request: NotificationRequest, idempotency?: IdempotentRequest<Notification>): Promise<Notification | Replay> {
    const now = this.clock.now();
    const problem = sendAtProblem(request.notification, now);
    if (problem) throw new ValidationError(problem);
    const options = resolveDeliveryOptions(request.notification, now);
    // one expiry for a send that goes out over 26 hours would cut off the later zones
    if (request.notification.local_time && (options.ttlSeconds !== null || options.expiresAt !== null))
      throw new ValidationError(`notification.${options.ttlSeconds !== null ? 'ttl' : 'expires_at'}: cannot be combined with local_time`);
    const created = await this.db.transaction().execute(async (trx) => {
      const replay = await this.idempotency.claim(trx, appId, idempotency);
      if (replay) return replay;
      const stored = await this.insert(trx, appId, request, now, options);
      await this.idempotency.store(trx, appId, idempotency, stored.notification);
      return stored;
    });
    if (created instanceof Replay) return created;
    const { notification, batchIds } = created;
    if (notification.next_due_at) return notification;
    // After commit: if the enqueue fails the sweeper re-enqueues the notification (its fan-out, or its stored batches).
    const enqueued = batchIds
      ? this.scheduler.deliver(notification.id, batchIds)
      : this.scheduler.schedule(notification.id, notification.generation);
    await enqueued.catch((err) => this.onScheduleError(err, notification.id));
    // The answer is the notification as created (`scheduled`, as the public API answers), however far it got since.
    return notification;
  }

  /**
   * Stores the notification with its audience and timing. An audience that names a few devices (by device_id or
   * user_id), to go out now at full speed, is cut into its batches here, so its delivery is enqueued directly and
   * no fan-out job runs: most notifications are this shape.
   */
  private async insert(
    trx: Transaction<Database>,
    appId: string,
    request: NotificationRequest,
    now: Date,
    options: DeliveryOptions,
  ): Promise<{ notification: Notification; batchIds: string[] | null }> {
    const { to, payload } = request.notification;
    const target = targetOf(to);
    const collapseKey = typeof payload.collapse_key === 'string' ? payload.collapse_key : null;
    const settings = await this.apps.campaignSettings(trx, appId);
    const deviceZones = request.notification.local_time ? await this.devices.timeZonesOf(trx, appId) : [];
    const timing = timingOf(request.notification, now, settings.default_time_zone, deviceZones);
    // a ttl counts from when it goes out
    if (timing.sendAt && options.ttlSeconds !== null)
      options = { ...options, expiresAt: expiryOf(options, timing.sendAt), ttlSeconds: null };
    let audience: { id: string; filters: Filter[] | null };
    if (target.kind === 'all') {
      audience = await this.audiences.upsertAllDevices(trx, appId);
    } else if (target.kind === 'filters') {
      audience = await this.audiences.upsertFilters(trx, appId, specKey(target.filters), canonicalFilters(target.filters));
    } else {
      const found = await this.audiences.findForApp(trx, appId, target.audienceId);
      if (!found) throw new NotFoundError('audience');
      audience = found;
    }
    const inserted = await this.notifications.insertOrCollapse(trx, {
      appId,
      audienceId: audience.id,
      request: request.notification,
      payload,
      collapseKey,
      timing,
      options,
    });
    if (timing.nextDueAt) return { notification: inserted, batchIds: null };
    // Cut now only what goes out now, at full speed and once: a collapse_key may replace a notification that is
    // already sending (the fan-out's generations handle that), and a pace needs the fan-out's reservations.
    const paced = timing.throttlePerMinute !== null || settings.max_per_minute !== null;
    if (collapseKey !== null || paced || !namesFewDevices(audience.filters)) return { notification: inserted, batchIds: null };
    const devices = await this.devices.pageDeliverable(trx, appId, audience.filters, {
      afterId: null,
      limit: DIRECT_AUDIENCE_MAX_DEVICES + 1,
      now,
    });
    if (devices.length > DIRECT_AUDIENCE_MAX_DEVICES) return { notification: inserted, batchIds: null };
    const batches = cutBatches(inserted.id, inserted.generation, devices, 0, this.batchSize);
    await this.delivery.saveWholeAudience(trx, inserted.id, inserted.generation, batches, devices.length);
    return { notification: inserted, batchIds: batches.map((b) => b.id) };
  }

  /**
   * What `create` would send, without storing or sending anything: the mapped APNs and FCM requests, as if
   * sent now (a ttl counts from now, and FCM's ttl is the time left).
   */
  async preview(appId: string, request: NotificationRequest): Promise<PushPreview> {
    const { to, payload } = request.notification;
    const now = this.clock.now();
    const options = resolveDeliveryOptions(request.notification, now);
    const push = { expiresAt: expiryOf(options, now), priority: options.priority };
    const target = targetOf(to);
    if (target.kind === 'audience' && !(await this.audiences.findForApp(this.db, appId, target.audienceId)))
      throw new NotFoundError('audience');
    return {
      apns: toApnsRequest(payload, PREVIEW_NOTIFICATION_ID, push),
      fcm: fcmSendBody(toFcmMessage(payload, PREVIEW_NOTIFICATION_ID, { ...push, now }), PREVIEW_DEVICE_TOKEN),
    };
  }
}
