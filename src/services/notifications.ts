import type { Db } from '../db/database.js';
import type { AudiencesRepository } from '../db/repositories/audiences.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { Notification } from '../db/schema.js';
import { canonicalFilters, specKey } from '../domain/audience-spec.js';
import { NotFoundError } from '../domain/errors.js';
import { targetOf, type NotificationRequest } from '../domain/notification-request.js';
import { fcmSendBody, toApnsRequest, toFcmMessage, type ApnsRequest, type FcmSendBody } from '../domain/push-mapping.js';
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
    private readonly scheduler: NotificationScheduler,
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

  /** Resolves the target to an audience and stores the notification in one transaction, then enqueues it. */
  async create(appId: string, request: NotificationRequest): Promise<Notification> {
    const { to, payload } = request.notification;
    const target = targetOf(to);
    const stored = await this.db.transaction().execute(async (trx) => {
      let audienceId: string;
      if (target.kind === 'all') {
        audienceId = (await this.audiences.upsertAllDevices(trx, appId)).id;
      } else if (target.kind === 'filters') {
        audienceId = (await this.audiences.upsertFilters(trx, appId, specKey(target.filters), canonicalFilters(target.filters))).id;
      } else {
        const audience = await this.audiences.findForApp(trx, appId, target.audienceId);
        if (!audience) throw new NotFoundError('audience');
        audienceId = audience.id;
      }
      return this.notifications.insertOrCollapse(trx, {
        appId,
        audienceId,
        request: request.notification,
        payload,
        collapseKey: typeof payload.collapse_key === 'string' ? payload.collapse_key : null,
      });
    });
    // After commit: if the enqueue fails the notification stays `scheduled` and the sweeper re-enqueues it.
    await this.scheduler.schedule(stored.id, stored.generation).catch((err) => this.onScheduleError(err, stored.id));
    return stored;
  }

  /** What `create` would send, without storing or sending anything: the mapped APNs and FCM requests. */
  async preview(appId: string, request: NotificationRequest): Promise<PushPreview> {
    const { to, payload } = request.notification;
    const target = targetOf(to);
    if (target.kind === 'audience' && !(await this.audiences.findForApp(this.db, appId, target.audienceId)))
      throw new NotFoundError('audience');
    return {
      apns: toApnsRequest(payload, PREVIEW_NOTIFICATION_ID),
      fcm: fcmSendBody(toFcmMessage(payload, PREVIEW_NOTIFICATION_ID), PREVIEW_DEVICE_TOKEN),
    };
  }
}
