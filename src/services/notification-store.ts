import type { Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import type { CampaignSettings } from '../db/repositories/apps.js';
import type { Deliverable } from '../db/repositories/deliverable-devices.js';
import type { Database, Notification } from '../db/schema.js';
import { DIRECT_AUDIENCE_MAX_DEVICES, namesFewDevices } from '../domain/audience-spec.js';
import { allowedOf, cutBatches, cutOf } from '../domain/batches.js';
import { timingOf } from '../domain/campaign.js';
import { expiryOf } from '../domain/delivery-options.js';
import type { Filter } from '../domain/filters.js';
import type { LiveActivityRef } from '../domain/live-activity.js';
import { targetOf } from '../domain/notification-request.js';
import { isVisiblePush } from '../domain/push-mapping.js';
import { quietHoursOf } from '../domain/quiet-hours.js';
import { templateDataOf } from '../domain/template-data.js';
import type { Repositories } from './deps.js';
import {
  NAMED_MAX_DEVICES,
  type CreatedNotification,
  type InsertSpec,
  type NotificationFields,
  type ResolvedAudience,
} from './notification-shapes.js';

/** What storing a notification reads and writes through (`NotificationService` gives its own). */
export interface NotificationStoreDeps {
  repos: Pick<Repositories, 'batches' | 'deliverableDevices' | 'devices' | 'notifications'>;
  /** DELIVERY_BATCH_SIZE */
  batchSize: number;
  /** the apps' campaign settings, those the service keeps not read again */
  campaignSettingsOf: (db: Db, appIds: string[]) => Promise<Map<string, CampaignSettings>>;
  /** the audience a target names, stored when it is not yet */
  resolveAudience: (trx: Transaction<Database>, appId: string, to: NotificationFields['to']) => Promise<ResolvedAudience>;
}

/**
 * Stores the notification with its audience and timing, in the caller's transaction (a message stores its push in
 * its own, with `messageId`); the caller runs `release` once it committed. An audience that names a few devices
 * (by device_id or user_id), to go out now at full speed, is cut into its batches here, so its delivery is
 * enqueued directly and no fan-out job runs: most notifications are this shape. Without `audience`, `fields.to`'s
 * filters name the devices (a journey's batch): it is cut here whatever their number (up to NAMED_MAX_DEVICES)
 * and stores no audience, which only a send that goes through the fan-out (timed, paced, collapsing, A/B) needs.
 */
export async function storeNotification(
  deps: NotificationStoreDeps,
  trx: Transaction<Database>,
  appId: string,
  fields: NotificationFields,
  at: InsertSpec,
): Promise<CreatedNotification> {
  const { now } = at;
  const target = targetOf(fields.to);
  const named = !at.audience && target.kind === 'filters';
  const filters = at.audience ? at.audience.filters : target.kind === 'filters' ? target.filters : null;
  const liveActivity = at.liveActivity?.ref ?? null;
  let { options } = at;
  const { payload } = fields;
  const collapseKey = typeof payload.collapse_key === 'string' ? payload.collapse_key : null;
  const settings = (await deps.campaignSettingsOf(trx, [appId])).get(appId)!;
  // a Live Activity shows what is happening now (a score, a delivery): the app's quiet hours would show it stale
  const quiet = liveActivity ? null : quietHoursOf(fields.quiet_hours, settings.quiet_hours);
  const deviceZones = fields.local_time || quiet ? await deps.repos.devices.timeZonesOf(trx, appId) : [];
  const timing = timingOf(fields, now, settings.default_time_zone, deviceZones, quiet);
  // a ttl counts from when it goes out
  if (timing.sendAt && options.ttlSeconds !== null) options = { ...options, expiresAt: expiryOf(options, timing.sendAt), ttlSeconds: null };
  // Cut now only what goes out now, at full speed and once: a collapse_key may replace a notification that is
  // already sending (the fan-out's generations handle that), and a pace needs the fan-out's reservations.
  const paced = timing.throttlePerMinute !== null || settings.max_per_minute !== null;
  // an activity's update or end goes to the few devices holding its token, looked up by the activity
  const fewDevices = named || namesFewDevices(filters) || (liveActivity !== null && liveActivity.event !== 'start');
  // an A/B test goes through the fan-out, which cuts each device into its share
  const { devices, tokens } =
    !timing.nextDueAt && !timing.localPlan && !timing.bestTime && collapseKey === null && !paced && fewDevices && !fields.variants
      ? await fewDevicesOf(deps, trx, appId, filters, { named, liveActivity, payload, now })
      : {};
  // what is not cut here, its fan-out cuts from its stored audience
  const audience = at.audience ?? (devices ? null : await deps.resolveAudience(trx, appId, fields.to));
  const inserted = await deps.repos.notifications.insertOrCollapse(trx, {
    appId,
    audienceId: audience?.id ?? null,
    request: at.liveActivity?.request ?? (at.journey ? { ...fields, journey: at.journey } : fields),
    payload,
    localized: fields.localized,
    templateData: at.templateData !== undefined ? at.templateData : templateDataOf(fields),
    collapseKey,
    timing,
    options,
    messageId: at.messageId ?? null,
    cut: cutOf(devices, deps.batchSize),
    liveActivity,
    actor: at.actor,
  });
  const [created] = await storeBatches(
    deps,
    trx,
    [inserted],
    () => devices,
    () => tokens,
  );
  // a journey's batch of more devices than a direct audience has takes the journeys' turns; a smaller one goes at once
  const large = named && created!.sendable && devices!.length > DIRECT_AUDIENCE_MAX_DEVICES;
  return large ? { ...created!, sendable: { ...created!.sendable!, journey: true } } : created!;
}

/**
 * The devices of a notification cut at its creation, none when more than a direct audience (or a named batch) has,
 * with their tokens as read: its batches go out from this process, a journey's large batch (`named`) in the journeys'
 * turns of large batches; an activity's tokens are its own, so its batches go through the queue.
 */
async function fewDevicesOf(
  deps: NotificationStoreDeps,
  trx: Transaction<Database>,
  appId: string,
  filters: Filter[] | null,
  n: { named: boolean; liveActivity: LiveActivityRef | null; payload: NotificationFields['payload']; now: Date },
): Promise<{ devices?: Deliverable[]; tokens?: ReadonlyMap<string, string> }> {
  const { named, liveActivity, now } = n;
  const first = { afterId: null, limit: (named ? NAMED_MAX_DEVICES : DIRECT_AUDIENCE_MAX_DEVICES) + 1, now };
  const visible = !liveActivity && isVisiblePush(n.payload);
  if (liveActivity) {
    const page = await deps.repos.deliverableDevices.pageDeliverable(trx, appId, filters, { ...first, visible, liveActivity });
    return page.length < first.limit ? { devices: page } : {};
  }
  const page = await deps.repos.deliverableDevices.pageDeliverableNow(trx, appId, filters, { ...first, visible });
  return page.length < first.limit ? { devices: page, tokens: new Map(page.map((d) => [d.id, d.token])) } : {};
}

/** Stores the batches of the notifications just inserted with their whole audience cut (`cutOf`). */
async function storeBatches(
  deps: NotificationStoreDeps,
  trx: Transaction<Database>,
  inserted: Notification[],
  devicesOf: (k: number) => Deliverable[] | undefined,
  tokensOf: (k: number) => ReadonlyMap<string, string> | undefined,
): Promise<CreatedNotification[]> {
  const created = inserted.map((notification, k) => {
    const devices = devicesOf(k);
    if (!devices) return { notification, batchIds: null, batches: [] };
    const batches = cutBatches(notification.id, notification.generation, allowedOf(devices).sendable, 0, deps.batchSize);
    return { notification, batchIds: batches.map((b) => b.id), batches };
  });
  await deps.repos.batches.insertBatches(
    trx,
    created.map(({ notification, batches }) => ({ notificationId: notification.id, generation: notification.generation, batches })),
  );
  return created.map(({ notification, batchIds, batches }, k) => {
    const tokens = tokensOf(k);
    return batchIds && tokens ? { notification, batchIds, sendable: { batches, tokens } } : { notification, batchIds };
  });
}
