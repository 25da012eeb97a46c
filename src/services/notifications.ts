import type { Db } from '../db/database.js';
import type { AudiencesRepository } from '../db/repositories/audiences.js';
import type { DeliveryRepository } from '../db/repositories/delivery.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { Notification } from '../db/schema.js';
import { canonicalFilters, DIRECT_AUDIENCE_MAX_DEVICES, namesFewDevices, specKey } from '../domain/audience-spec.js';
import { expiryOf, resolveDeliveryOptions } from '../domain/delivery-options.js';
import type { Filter } from '../domain/filters.js';
import { NotFoundError } from '../domain/errors.js';
import { targetOf, type NotificationRequest } from '../domain/notification-request.js';
import { fcmSendBody, toApnsRequest, toFcmMessage, type ApnsRequest, type FcmSendBody } from '../domain/push-mapping.js';
import { cutBatches } from '../queue/fanout.js';
import type { NotificationScheduler } from '../queue/jobs.js';

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
    private readonly scheduler: NotificationScheduler,
    private readonly batchSize: number,
    private readonly onScheduleError: (err: unknown, id: string) => void,
  ) {}

  async get(appId: string, id: string): Promise<Notification> {
    const n = await this.notifications.findForApp(this.db, appId, id);
    if (!n) throw new NotFoundError('notification');
    return n;
  }

  /** The app's notifications, newest first. */
  list(appId: string, page: { per: number; page: number }): Promise<Notification[]> {
    return this.notifications.listForApp(this.db, appId, page.per, (page.page - 1) * page.per);
  }

  /**
   * Resolves the target to an audience and stores the notification in one transaction, then enqueues it.
   * An audience that names a few devices (by device_id or user_id) is cut into its batches in that same
   * transaction, so its delivery is enqueued directly and no fan-out job runs: most notifications are this shape.
   */
  async create(appId: string, request: NotificationRequest): Promise<Notification> {
    const { to, payload } = request.notification;
    const now = new Date();
    const options = resolveDeliveryOptions(request.notification, now);
    const target = targetOf(to);
    const collapseKey = typeof payload.collapse_key === 'string' ? payload.collapse_key : null;
    const { notification, batchIds } = await this.db.transaction().execute(async (trx) => {
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
        options,
      });
      // A collapse_key may replace a notification that is already sending: that goes through the fan-out's generations.
      if (collapseKey !== null || !namesFewDevices(audience.filters)) return { notification: inserted, batchIds: null };
      const devices = await this.devices.pageDeliverable(trx, appId, audience.filters, {
        afterId: null,
        limit: DIRECT_AUDIENCE_MAX_DEVICES + 1,
        now,
      });
      if (devices.length > DIRECT_AUDIENCE_MAX_DEVICES) return { notification: inserted, batchIds: null };
      const batches = cutBatches(inserted.id, inserted.generation, devices, 0, this.batchSize);
      await this.delivery.saveWholeAudience(trx, inserted.id, inserted.generation, batches, devices.length);
      return { notification: inserted, batchIds: batches.map((b) => b.id) };
    });
    // After commit: if the enqueue fails the sweeper re-enqueues the notification (its fan-out, or its stored batches).
    const enqueued = batchIds
      ? this.scheduler.deliver(notification.id, batchIds)
      : this.scheduler.schedule(notification.id, notification.generation);
    await enqueued.catch((err) => this.onScheduleError(err, notification.id));
    // The answer is the notification as created (`scheduled`, as the public API answers), however far it got since.
    return notification;
  }

  /**
   * What `create` would send, without storing or sending anything: the mapped APNs and FCM requests, as if
   * sent now (a ttl counts from now, and FCM's ttl is the time left).
   */
  async preview(appId: string, request: NotificationRequest): Promise<PushPreview> {
    const { to, payload } = request.notification;
    const now = new Date();
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
