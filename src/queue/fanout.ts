import type { Job } from 'bullmq';
import type { Db } from '../db/database.js';
import type { AudiencesRepository } from '../db/repositories/audiences.js';
import type { DeliveryRepository, NewBatch } from '../db/repositories/delivery.js';
import type { Deliverable, DevicesRepository, ZoneSlice } from '../db/repositories/devices.js';
import type { AppsRepository } from '../db/repositories/apps.js';
import type { Clock } from '../platform/clock.js';
import { waveSlice } from '../domain/campaign.js';
import { isVisiblePush } from '../domain/push-mapping.js';
import { PACE_EARLY_MS } from './delivery.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { Logger } from '../platform/logger.js';
import type { JobTypes } from './jobs.js';
import type { JobQueues } from './queues.js';

/** Deterministic batch id, also the delivery job id: a re-run fan-out cannot create or enqueue twice. */
export const batchId = (notificationId: string, generation: number, seq: number) => `${notificationId}-g${generation}-b${seq}`;

/** What cutting a device into a batch reads of it: the gateway it needs. */
type Routed = Pick<Deliverable, 'id' | 'platform' | 'development'>;

/**
 * The devices a push is sent to, and how many are not (`not_allowed`: their notifications are Disabled and the push
 * is visible); the second are counted in the notification's `devices_not_allowed`, not in `devices_targeted`.
 */
export function allowedOf<T extends Deliverable>(devices: T[]): { sendable: T[]; notAllowed: number } {
  const sendable = devices.filter((d) => !d.not_allowed);
  return { sendable, notAllowed: devices.length - sendable.length };
}

/** A page of devices split per platform and environment (the gateway each one needs), at most `batchSize` each. */
export function splitIntoBatches<T extends Routed>(page: T[], batchSize: number): T[][] {
  const groups = new Map<string, T[]>();
  for (const d of page) {
    const key = `${d.platform}:${d.development}`;
    const list = groups.get(key);
    if (list) list.push(d);
    else groups.set(key, [d]);
  }
  const batches: T[][] = [];
  for (const devices of groups.values()) for (let i = 0; i < devices.length; i += batchSize) batches.push(devices.slice(i, i + batchSize));
  return batches;
}

/** `splitIntoBatches`, as the batches of a notification (ids and sequence numbers from `firstSeq`). */
export function cutBatches(notificationId: string, generation: number, page: Routed[], firstSeq: number, batchSize: number): NewBatch[] {
  return splitIntoBatches(page, batchSize).map((devices, i) => ({
    id: batchId(notificationId, generation, firstSeq + i),
    seq: firstSeq + i,
    platform: devices[0]!.platform,
    development: devices[0]!.development,
    deviceIds: devices.map((d) => d.id),
  }));
}

/**
 * Resolves a notification's audience to devices in keyset pages and turns each page into delivery batches.
 * Progress is checkpointed with the batches, so a killed fan-out resumes where it stopped. A local-time send
 * fans out one wave (the zones whose wall time has come) at a time and then waits for the next; a paced one
 * reserves each batch's start (delivery_batches.not_before) and its delivery job waits until then.
 */
export function fanoutProcessor(deps: {
  db: Db;
  log: Logger;
  queues: JobQueues;
  notifications: NotificationsRepository;
  audiences: AudiencesRepository;
  devices: DevicesRepository;
  delivery: DeliveryRepository;
  apps: AppsRepository;
  clock: Clock;
  pageSize: number;
  batchSize: number;
}) {
  return async (job: Job<JobTypes['fanout']>): Promise<void> => {
    const { notificationId, generation } = job.data;
    const log = deps.log.child({ notificationId, generation, job: 'fanout' });
    const n = await deps.notifications.findById(deps.db, notificationId);
    if (!n || n.generation !== generation || n.state === 'sent' || n.state === 'failed' || n.state === 'canceled') {
      log.debug('nothing to fan out (superseded, finished or canceled)');
      return;
    }
    const now = deps.clock.now(); // date math resolves once per fan-out, the same for every page
    if (n.next_due_at && n.next_due_at > now) return; // not due yet: the due poller releases it
    await deps.delivery.markSending(deps.db, notificationId, generation);
    // a paced batch's job comes a little before its reserved start, and waits for it (delivery.ts)
    const enqueue = (b: { id: string; not_before?: Date | null; notBefore?: Date | null }) => {
      const start = b.notBefore ?? b.not_before;
      const delay = start ? start.getTime() - deps.clock.now().getTime() - PACE_EARLY_MS : 0;
      return deps.queues.add('delivery', { batches: [{ notificationId, batchId: b.id }] }, delay);
    };

    if (!n.fanout_done) {
      if (n.audience_id === null) throw new Error('a transactional send is cut when it is created; it has no audience to fan out');
      const filters = await deps.audiences.filtersOf(deps.db, n.audience_id);
      const { max_per_minute: appPerMinute } = await deps.apps.campaignSettings(deps.db, n.app_id);
      const pace = { notification: n.throttle_per_minute, app: appPerMinute };
      const paced = pace.notification !== null || pace.app !== null;
      // a paced batch holds about a second of its pace, so the pushes spread evenly
      const slowest = Math.min(pace.notification ?? Infinity, pace.app ?? Infinity);
      const batchSize = paced ? Math.max(1, Math.min(deps.batchSize, Math.ceil(slowest / 60))) : deps.batchSize;
      let seq = n.fanout_seq;
      // a Live Activity shows whatever the device's notification setting (ActivityKit has its own)
      const visible = !n.live_activity && isVisiblePush(n.payload);

      /** Pages through the devices (of some zones), from `cursor`; false when superseded or canceled meanwhile. */
      const fanOut = async (cursor: string | null, zones?: ZoneSlice): Promise<boolean> => {
        for (let pages = 0; ; pages++) {
          // The first page is one batch, so the first pushes leave without waiting for a full page.
          const limit = pages === 0 ? Math.min(batchSize, deps.pageSize) : deps.pageSize;
          const page = await deps.devices.pageDeliverable(deps.db, n.app_id, filters, {
            afterId: cursor,
            limit,
            now,
            zones,
            visible,
            liveActivity: n.live_activity,
          });
          if (page.length === 0) return true;
          const { sendable, notAllowed } = allowedOf(page);
          const batches = cutBatches(notificationId, generation, sendable, seq, batchSize);
          if (paced) {
            const starts = await deps.delivery.reserveSlots(
              deps.db,
              notificationId,
              n.app_id,
              batches.map((b) => b.deviceIds.length),
              pace,
              deps.clock.now(),
            );
            batches.forEach((b, i) => (b.notBefore = starts[i]));
          }
          const last = page[page.length - 1]!.id;
          const checkpoint = { cursor: last, nextSeq: seq + batches.length, targeted: sendable.length, notAllowed };
          if (!(await deps.delivery.saveFanoutPage(deps.db, notificationId, generation, batches, checkpoint))) {
            log.info('superseded by a newer generation, or canceled, during fan-out');
            return false;
          }
          for (const b of batches) await enqueue(b);
          cursor = last;
          seq += batches.length;
          if (page.length < limit) return true;
        }
      };

      const plan = n.local_plan;
      if (!plan) {
        if (!(await fanOut(n.fanout_cursor))) return;
      } else {
        if (n.wave === 0 && plan.past.length > 0) {
          const skipped = await deps.devices.countDeliverableIn(deps.db, n.app_id, filters, now, waveSlice(plan, plan.past));
          await deps.delivery.setSkippedPastLocalTime(deps.db, notificationId, skipped);
        }
        if (n.wave === 0 && plan.dropped?.length) {
          const dropped = await deps.devices.countDeliverableIn(deps.db, n.app_id, filters, now, waveSlice(plan, plan.dropped));
          await deps.delivery.setSkippedQuietHours(deps.db, notificationId, dropped);
        }
        for (let w = n.wave; w < plan.waves.length; w++) {
          const wave = plan.waves[w]!;
          if (new Date(wave.at) > now) {
            await deps.delivery.awaitWave(deps.db, notificationId, generation, new Date(wave.at));
            log.info({ wave: w, at: wave.at }, 'waiting for the next local-time wave');
            return;
          }
          if (!(await fanOut(w === n.wave ? n.fanout_cursor : null, waveSlice(plan, wave.zones)))) return;
          await deps.delivery.finishWave(deps.db, notificationId, generation, w + 1);
        }
      }
      await deps.delivery.markFanoutDone(deps.db, notificationId, generation);
      log.info({ batches: seq }, 'fan-out done');
    }
    // Batches stored by an earlier run whose jobs may never have been enqueued (crash, lost queue): the
    // deterministic job ids make this a no-op for jobs that exist.
    for (const b of await deps.delivery.pendingBatches(deps.db, notificationId, generation)) await enqueue(b);
    await deps.delivery.completeIfFinished(deps.db, [{ id: notificationId, generation }]);
  };
}
