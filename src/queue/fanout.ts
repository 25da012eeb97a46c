import type { Job } from 'bullmq';
import type { Db } from '../db/database.js';
import type { AudiencesRepository } from '../db/repositories/audiences.js';
import type { DeliveryRepository, NewBatch } from '../db/repositories/delivery.js';
import type { Deliverable, DevicesRepository } from '../db/repositories/devices.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { Logger } from '../platform/logger.js';
import type { JobTypes } from './jobs.js';
import type { JobQueues } from './queues.js';

/** Deterministic batch id, also the delivery job id: a re-run fan-out cannot create or enqueue twice. */
export const batchId = (notificationId: string, generation: number, seq: number) => `${notificationId}-g${generation}-b${seq}`;

/**
 * Splits one page of devices into batches per platform and environment (the gateway each one needs),
 * each of at most `batchSize` devices.
 */
export function cutBatches(
  notificationId: string,
  generation: number,
  page: Deliverable[],
  firstSeq: number,
  batchSize: number,
): NewBatch[] {
  const groups = new Map<string, Deliverable[]>();
  for (const d of page) {
    const key = `${d.platform}:${d.development}`;
    const list = groups.get(key);
    if (list) list.push(d);
    else groups.set(key, [d]);
  }
  const batches: NewBatch[] = [];
  for (const devices of groups.values()) {
    for (let i = 0; i < devices.length; i += batchSize) {
      const seq = firstSeq + batches.length;
      batches.push({
        id: batchId(notificationId, generation, seq),
        seq,
        platform: devices[0]!.platform,
        development: devices[0]!.development,
        deviceIds: devices.slice(i, i + batchSize).map((d) => d.id),
      });
    }
  }
  return batches;
}

/**
 * Resolves a notification's audience to devices in keyset pages and turns each page into delivery batches.
 * Progress is checkpointed with the batches, so a killed fan-out resumes where it stopped.
 */
export function fanoutProcessor(deps: {
  db: Db;
  log: Logger;
  queues: JobQueues;
  notifications: NotificationsRepository;
  audiences: AudiencesRepository;
  devices: DevicesRepository;
  delivery: DeliveryRepository;
  pageSize: number;
  batchSize: number;
}) {
  return async (job: Job<JobTypes['fanout']>): Promise<void> => {
    const { notificationId, generation } = job.data;
    const log = deps.log.child({ notificationId, generation, job: 'fanout' });
    const n = await deps.notifications.findById(deps.db, notificationId);
    if (!n || n.generation !== generation || n.state === 'sent' || n.state === 'failed') {
      log.debug('nothing to fan out (superseded or finished)');
      return;
    }
    await deps.delivery.markSending(deps.db, notificationId, generation);
    const enqueue = (b: { id: string }) => deps.queues.add('delivery', { notificationId, batchId: b.id });

    if (!n.fanout_done) {
      if (n.audience_id === null) throw new Error('a transactional send is cut when it is created; it has no audience to fan out');
      const filters = await deps.audiences.filtersOf(deps.db, n.audience_id);
      const now = new Date(); // date math resolves once per fan-out, the same for every page
      let cursor = n.fanout_cursor;
      let seq = n.fanout_seq;
      let pages = 0;
      for (;;) {
        // The first page is one batch, so the first pushes leave without waiting for a full page.
        const limit = pages === 0 ? Math.min(deps.batchSize, deps.pageSize) : deps.pageSize;
        const page = await deps.devices.pageDeliverable(deps.db, n.app_id, filters, { afterId: cursor, limit, now });
        if (page.length === 0) break;
        const batches = cutBatches(notificationId, generation, page, seq, deps.batchSize);
        const last = page[page.length - 1]!.id;
        if (!(await deps.delivery.saveFanoutPage(deps.db, notificationId, generation, batches, last, seq + batches.length, page.length))) {
          log.info('superseded by a newer generation during fan-out');
          return;
        }
        for (const b of batches) await enqueue(b);
        cursor = last;
        seq += batches.length;
        pages++;
        if (page.length < limit) break;
      }
      await deps.delivery.markFanoutDone(deps.db, notificationId, generation);
      log.info({ pages, batches: seq }, 'fan-out done');
    }
    // Batches stored by an earlier run whose jobs may never have been enqueued (crash, lost queue): the
    // deterministic job ids make this a no-op for jobs that exist.
    for (const b of await deps.delivery.pendingBatches(deps.db, notificationId, generation)) await enqueue(b);
    await deps.delivery.completeIfFinished(deps.db, notificationId, generation);
  };
}
