import type { Job } from 'bullmq';
import type { Db } from '../db/database.js';
import type { AudiencesRepository } from '../db/repositories/audiences.js';
import { RANGE_SEQ_STRIDE, type DeliveryRepository } from '../db/repositories/delivery.js';
import type { Deliverable, DeliverableGroups, DevicesRepository, ZoneSlice } from '../db/repositories/devices.js';
import { allowedOf, batchesOfGroups, cutAbPage, cutBatches, withTokens, type AbShare, type CutPage } from '../domain/batches.js';
import type { Notification, Platform } from '../db/schema.js';
import type { AppsRepository } from '../db/repositories/apps.js';
import type { Clock } from '../platform/clock.js';
import { waveSlice } from '../domain/campaign.js';
import { isVisiblePush } from '../domain/push-mapping.js';
import { PACE_EARLY_MS } from './delivery.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { Logger } from '../platform/logger.js';
import type { JobTypes } from './jobs.js';
import type { JobQueues } from './queues.js';
import type { DirectDelivery } from './direct-delivery.js';
import { committedBatches } from './batch-attempt.js';
import type { AbTestsRepository } from '../db/repositories/ab-tests.js';
import { abBounds, abTestOf, decideAt } from '../domain/ab-test.js';

/**
 * The gateways that take many tokens a request (HMS: 1,000): a fan-out reads their devices' tokens with the page and
 * sends their batches itself once stored (`DirectDelivery.sendInTurn`). A delivery job would read each batch's
 * tokens again and wait for the queue, which made such a broadcast a third of a bare client's speed: the sends are
 * cheap, and the trips to PostgreSQL and the queue between them were the time.
 */
export const SENT_BY_FANOUT: Platform[] = ['huawei'];

/**
 * Devices of a fan-out's first page: few, so that its first pushes leave at once (a page of 2,000 took a
 * broadcast's first push 500 ms to read, store, load and send, and a gateway sends nothing of a send until it
 * has opened all its streams: 200 took 20-76 ms to the first request, 20 took 2-10); each page after is ten times
 * larger, up to FANOUT_PAGE_SIZE.
 */
export const FIRST_PAGE_DEVICES = 20;

/** Pages read before a broadcast's size is estimated (`rangesAfter`): the first alone is too few devices to tell. */
const PAGES_BEFORE_SPLIT = 2;

/** Ranges a broadcast is split into at most (their seq blocks, RANGE_SEQ_STRIDE each, stay within an int). */
export const MAX_RANGES = 1000;

/** The id space as the first 52 bits of a UUID (13 hex digits, exact in a double). */
const ID_SPACE = 2 ** 52;
const positionOf = (uuid: string) => parseInt(uuid.replace(/-/g, '').slice(0, 13), 16);
/** The largest UUID at a position: the inclusive upper bound of a range that ends there. */
function lastUuidAt(position: number): string {
  const hex = position.toString(16).padStart(13, '0') + 'f'.repeat(19);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The ranges the rest of an audience is split into, after its first `seen` devices (in id order) ended at `last`:
 * device ids are random UUIDs, so the share of the id space those covered estimates the audience's size, and
 * equal slices of what is left hold about as many devices each. About `perRange` devices a range (at most
 * MAX_RANGES); none when the rest fits one range (it stays in the job that read the first page). Contiguous: each
 * range starts after the previous one's inclusive upper bound; the last is open-ended.
 */
export function rangesAfter(last: string, seen: number, perRange: number): { after: string; upTo: string | null }[] {
  const at = positionOf(last);
  const estimated = (seen * ID_SPACE) / (at + 1);
  const count = Math.min(MAX_RANGES, Math.ceil((estimated - seen) / perRange));
  if (!(count > 1)) return [];
  const rest = ID_SPACE - 1 - at;
  const ranges: { after: string; upTo: string | null }[] = [];
  let after = last;
  for (let i = 1; i <= count; i++) {
    const upTo = i === count ? null : lastUuidAt(at + Math.floor((rest * i) / count));
    ranges.push({ after, upTo });
    if (upTo) after = upTo;
  }
  return ranges;
}

/** What the fan-out jobs (a notification's and its ranges') need. */
export interface FanoutDeps {
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
  /** FANOUT_RANGE_DEVICES: a broadcast larger than this is split into ranges of about so many devices */
  rangeDevices: number;
  /** sends a fan-out's first page, and its multicast batches, from the job that stored them, without the queue */
  direct: Pick<DirectDelivery, 'take' | 'sendInTurn'>;
  abTests: AbTestsRepository;
}

const finished = (state: string) => state === 'sent' || state === 'failed' || state === 'canceled';

/**
 * Resolves a notification's audience to devices in keyset pages and turns each page into delivery batches.
 * Progress is checkpointed with the batches, so a killed fan-out resumes where it stopped. A fresh broadcast's
 * first page (FIRST_PAGE_DEVICES) is sent by this job as soon as it is stored (`direct`), without a delivery job:
 * its first pushes leave a queue round trip and a batch read sooner; if the worker dies first, the batches are
 * pending with no job, and the sweeper or the fan-out's next run enqueues them (at least once, as always). So are
 * the batches of every page for a gateway that takes many tokens a request (`SENT_BY_FANOUT`), each when a turn is
 * free, while the next page is read. A broadcast whose
 * first two pages come back full and estimate more than one range of devices is split: the rest of the id space is
 * cut into ranges, each fanned out by a `fanoutRange` job (`fanoutRangeProcessor`) that any worker takes. A
 * local-time send fans out one wave (the zones whose wall time has come) at a time and then waits for the next;
 * a paced one reserves each batch's start (delivery_batches.not_before) and its delivery job waits until then.
 * Those two stay one job: a wave's devices are found by zone, not spread over the id space, and a pace is one
 * schedule that ranges reserving at once would only take turns on.
 */
export function fanoutProcessor(deps: FanoutDeps) {
  return async (job: Job<JobTypes['fanout']>): Promise<void> => {
    const { notificationId, generation } = job.data;
    const log = deps.log.child({ notificationId, generation, job: 'fanout' });
    // the audience's filters and the app's pace come with it: each round trip before the first page is on the way
    // to the first push
    const found = await deps.notifications.findForFanout(deps.db, notificationId);
    const n = found?.notification;
    if (!n || n.generation !== generation || finished(n.state)) {
      log.debug('nothing to fan out (superseded, finished or canceled)');
      return;
    }
    if (found.audienceMissing && !n.fanout_done) return failAudienceMissing(deps, log, n);
    const test = abTestOf(n.request);
    // an A/B test between its two stages: its winner's job, not a fan-out, moves it on
    if (test && n.ab_stage === 'waiting') return;
    const ab: AbShare | null = test && { bounds: abBounds(test), rest: n.ab_stage === 'rest', winner: n.ab_winner };
    const now = deps.clock.now(); // date math resolves once per fan-out, the same for every page
    if (n.next_due_at && n.next_due_at > now) return; // not due yet: the due poller releases it
    const paging = !n.fanout_done && n.fanout_seq < RANGE_SEQ_STRIDE && n.audience_id !== null;
    const settings = paging && found ? ([found.filters, found.settings] as const) : null;
    // marked sending while the first page is read: awaited before anything is stored or enqueued
    const marking = deps.delivery.markSending(deps.db, notificationId, generation);
    marking.catch(() => undefined);
    /** the batches this run sent itself (its first page's): not enqueued as pending at its end */
    const sentHere = new Set<string>();
    // a paced batch's job comes a little before its reserved start, and waits for it (delivery.ts)
    const enqueue = (b: { id: string; not_before?: Date | null; notBefore?: Date | null }) => {
      const start = b.notBefore ?? b.not_before;
      const delay = start ? start.getTime() - deps.clock.now().getTime() - PACE_EARLY_MS : 0;
      return deps.queues.add('delivery', { batches: [{ notificationId, batchId: b.id }], bulk: true }, delay);
    };

    // a fan-out of pages waits for the mark once its first page is asked for (`fanOut`), any other before it starts
    if (n.fanout_done || n.fanout_seq >= RANGE_SEQ_STRIDE || n.local_plan) await marking;
    if (!n.fanout_done && n.fanout_seq >= RANGE_SEQ_STRIDE) {
      // split by an earlier run: the ranges not fanned out yet get their jobs (a no-op for jobs that exist), and
      // one whose job finished the last range but not the fan-out (a crash between the two) finishes it
      const ranges = await deps.delivery.rangesOf(deps.db, notificationId, generation);
      const open = ranges.filter((r) => !r.done);
      for (const r of open) await enqueueRange(deps, n.id, generation, r.range_no, now);
      if (!open.length && ranges.length) await deps.delivery.finishRange(deps.db, notificationId, generation, ranges[0]!.range_no);
    } else if (!n.fanout_done) {
      if (!settings) throw new Error('a transactional send is cut when it is created; it has no audience to fan out');
      const [filters, { max_per_minute: appPerMinute }] = settings;
      const pace = { notification: n.throttle_per_minute, app: appPerMinute };
      const paced = pace.notification !== null || pace.app !== null;
      // a paced batch holds about a second of its pace, so the pushes spread evenly
      const slowest = Math.min(pace.notification ?? Infinity, pace.app ?? Infinity);
      const batchSize = paced ? Math.max(1, Math.min(deps.batchSize, Math.ceil(slowest / 60))) : deps.batchSize;
      let seq = n.fanout_seq;
      // a Live Activity shows whatever the device's notification setting (ActivityKit has its own)
      const visible = !n.live_activity && isVisiblePush(n.payload);
      const cutPage = (page: Deliverable[], first: number): CutPage => {
        if (ab) return cutAbPage(ab, notificationId, generation, page, first, batchSize);
        const { sendable, notAllowed } = allowedOf(page);
        return {
          batches: cutBatches(notificationId, generation, sendable, first, batchSize),
          targeted: sendable.length,
          notAllowed,
          holdout: [],
        };
      };
      const cutGroups = (page: DeliverableGroups, first: number) => ({
        batches: batchesOfGroups(notificationId, generation, page.groups, first, batchSize),
        targeted: page.read - page.notAllowed,
        notAllowed: page.notAllowed,
        holdout: [],
        read: page.read,
        last: page.last,
        groups: page.groups,
      });
      /** The audience is fanned out: done, or an A/B test's share waits for its winner. */
      const finishFanout = async () => {
        if (test && !ab!.rest) {
          await deps.abTests.awaitWinner(deps.db, notificationId, generation, decideAt(test, deps.clock.now()));
          log.info({ batches: seq }, 'A/B test share fanned out; waiting for the winner');
          return;
        }
        await deps.delivery.markFanoutDone(deps.db, notificationId, generation);
        log.info({ batches: seq }, 'fan-out done');
      };

      /**
       * Pages through the devices (of some zones), from `cursor`: 'done', 'split' (ranges go on with the rest), or
       * 'stopped' when superseded or canceled meanwhile.
       */
      const fanOut = async (cursor: string | null, zones?: ZoneSlice): Promise<'done' | 'split' | 'stopped'> => {
        // an A/B test is cut into its shares by one job (its stages follow its one checkpoint)
        const fresh = cursor === null && seq === 0 && !zones && !paced && !ab;
        let seen = 0;
        const limitOf = (pages: number) => Math.min(deps.pageSize, batchSize * 10 ** pages, FIRST_PAGE_DEVICES * 10 ** pages);
        // A fresh broadcast's first page is read with its tokens and sent from here once stored, as a small
        // audience's batches are from the API process; an A/B test's page device by device (each has its bucket);
        // any other as ids grouped by gateway. A Live Activity's pushes go to the activity's tokens.
        const readPage = async (afterId: string | null, pages: number) => {
          const read = { afterId, limit: limitOf(pages), now, zones, visible };
          const spec = { ...read, liveActivity: n.live_activity, tokensOf: paced || ab || zones ? [] : SENT_BY_FANOUT };
          if (fresh && pages === 0 && !n.live_activity) {
            const first = await deps.devices.pageDeliverableNow(deps.db, n.app_id, filters, read);
            return { first, byDevice: first, groups: null };
          }
          if (ab) return { first: null, byDevice: await deps.devices.pageDeliverable(deps.db, n.app_id, filters, spec), groups: null };
          return { first: null, byDevice: null, groups: await deps.devices.pageDeliverableGroups(deps.db, n.app_id, filters, spec) };
        };
        let reading = readPage(cursor, 0);
        reading.catch(() => undefined);
        await marking;
        for (let pages = 0; ; pages++) {
          const limit = limitOf(pages);
          const { first, byDevice, groups } = await reading;
          const cut = byDevice
            ? { ...cutPage(byDevice, seq), read: byDevice.length, last: byDevice.at(-1)?.id ?? null }
            : cutGroups(groups!, seq);
          if (cut.last === null) return 'done';
          const { batches, targeted, notAllowed, holdout, last } = cut;
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
          // the next page is read while this one is stored and its jobs enqueued: its cursor is this page's last
          // device; dropped unread when this page ends the fan-out or splits it
          if (cut.read === limit) reading = readPage(last, pages + 1);
          reading.catch(() => undefined);
          const checkpoint = { cursor: last, nextSeq: seq + batches.length, targeted, notAllowed, holdout, at: deps.clock.now() };
          if (!(await deps.delivery.saveFanoutPage(deps.db, notificationId, generation, batches, checkpoint))) {
            log.info('superseded by a newer generation, or canceled, during fan-out');
            return 'stopped';
          }
          const tokens = first && new Map(first.map((d) => [d.id, d.token]));
          if (tokens && deps.direct.take(committedBatches(n, batches, tokens))) for (const b of batches) sentHere.add(b.id);
          else {
            const direct = withTokens(batches, 'groups' in cut ? cut.groups : []);
            await Promise.all(batches.filter((b) => !direct.sent.includes(b)).map(enqueue));
            for (const b of direct.sent) sentHere.add(b.id);
            await deps.direct.sendInTurn(committedBatches(n, direct.sent, direct.tokens));
          }
          seq += batches.length;
          seen += cut.read;
          if (cut.read < limit) return 'done';
          const ranges = fresh && pages === PAGES_BEFORE_SPLIT - 1 ? rangesAfter(last, seen, deps.rangeDevices) : [];
          if (ranges.length) {
            if (!(await deps.delivery.splitFanout(deps.db, notificationId, generation, ranges))) return 'stopped';
            for (let r = 0; r < ranges.length; r++) await enqueueRange(deps, notificationId, generation, r, now);
            log.info({ ranges: ranges.length }, 'fan-out split into ranges');
            return 'split';
          }
        }
      };

      const plan = n.local_plan;
      if (!plan) {
        const outcome = await fanOut(n.fanout_cursor);
        if (outcome === 'stopped') return;
        if (outcome === 'done') await finishFanout();
      } else {
        // an A/B test's rest counts nothing again: what its test stage counted was over the whole audience
        if (n.wave === 0 && !ab?.rest && plan.past.length > 0) {
          const skipped = await deps.devices.countDeliverableIn(deps.db, n.app_id, filters, now, waveSlice(plan, plan.past));
          await deps.delivery.setSkippedPastLocalTime(deps.db, notificationId, skipped);
        }
        if (n.wave === 0 && !ab?.rest && plan.dropped?.length) {
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
          if ((await fanOut(w === n.wave ? n.fanout_cursor : null, waveSlice(plan, wave.zones))) === 'stopped') return;
          await deps.delivery.finishWave(deps.db, notificationId, generation, w + 1);
        }
        await finishFanout();
      }
    }
    // Batches stored by an earlier run whose jobs may never have been enqueued (crash, lost queue): the
    // deterministic job ids make this a no-op for jobs that exist. Those this run is sending itself have none.
    for (const b of await deps.delivery.pendingBatches(deps.db, notificationId, generation)) if (!sentHere.has(b.id)) await enqueue(b);
    await deps.delivery.completeIfFinished(deps.db, [{ id: notificationId, generation }]);
  };
}

/** A notification whose audience was deleted fails, and sends nothing (its filters are unknown, not "every device"). */
async function failAudienceMissing(deps: Pick<FanoutDeps, 'db' | 'notifications'>, log: Logger, n: Notification): Promise<void> {
  log.warn({ audienceId: n.audience_id }, 'the audience of this notification is gone: failed, nothing sent');
  await deps.notifications.failAudienceMissing(deps.db, n.id, n.generation);
}

/** Enqueues the job of one range of a split fan-out; idempotent (its id is the range's). */
function enqueueRange(deps: Pick<FanoutDeps, 'queues'>, notificationId: string, generation: number, range: number, at: Date) {
  return deps.queues.add('fanoutRange', { notificationId, generation, range, at: at.toISOString() });
}

/**
 * One range of a split broadcast's audience (`fanoutProcessor`), on whichever worker takes it: its devices in
 * keyset pages from its own checkpoint up to its upper bound, cut into batches of its own seq block, each page
 * stored with its checkpoint atomically (a killed job resumes after its last stored page and recreates no batch;
 * the batch ids are deterministic, so a repeat enqueues nothing twice). The last range to finish finishes the
 * notification's fan-out.
 */
export function fanoutRangeProcessor(deps: FanoutDeps) {
  return async (job: Job<JobTypes['fanoutRange']>): Promise<void> => {
    const { notificationId, generation, range: rangeNo } = job.data;
    const log = deps.log.child({ notificationId, generation, range: rangeNo, job: 'fanoutRange' });
    const n = await deps.notifications.findById(deps.db, notificationId);
    const [range] = await deps.delivery.rangesOf(deps.db, notificationId, generation, rangeNo);
    if (!n || n.generation !== generation || finished(n.state) || !range) {
      log.debug('nothing to fan out (superseded, finished or canceled)');
      return;
    }
    const enqueue = (batchId: string) => deps.queues.add('delivery', { batches: [{ notificationId, batchId }], bulk: true });
    const block = { from: (rangeNo + 1) * RANGE_SEQ_STRIDE, to: (rangeNo + 2) * RANGE_SEQ_STRIDE };
    // batches an earlier run stored whose jobs may never have been enqueued (deterministic ids: no-ops otherwise)
    if (range.next_seq > block.from)
      for (const b of await deps.delivery.pendingBatches(deps.db, notificationId, generation, block)) await enqueue(b.id);
    if (!range.done) {
      if (n.audience_id === null) throw new Error('a transactional send has no audience to fan out');
      const filters = await deps.audiences.filtersOf(deps.db, n.audience_id);
      if (filters === undefined) return failAudienceMissing(deps, log, n);
      // a Live Activity shows whatever the device's notification setting (ActivityKit has its own)
      const visible = !n.live_activity && isVisiblePush(n.payload);
      const now = new Date(job.data.at);
      let seq = range.next_seq;
      const readPage = (afterId: string | null) =>
        deps.devices.pageDeliverableGroups(deps.db, n.app_id, filters, {
          afterId,
          upToId: range.up_to_id,
          limit: deps.pageSize,
          now,
          visible,
          liveActivity: n.live_activity,
          tokensOf: SENT_BY_FANOUT,
        });
      let reading = readPage(range.cursor_id);
      for (;;) {
        const page = await reading;
        if (page.last === null) break;
        const { last, notAllowed } = page;
        // the next page is read while this one is stored (`fanoutProcessor`)
        if (page.read === deps.pageSize) reading = readPage(last);
        reading.catch(() => undefined);
        const batches = batchesOfGroups(notificationId, generation, page.groups, seq, deps.batchSize);
        const checkpoint = { cursor: last, nextSeq: seq + batches.length, targeted: page.read - notAllowed, notAllowed };
        if (!(await deps.delivery.saveRangePage(deps.db, { notificationId, generation, rangeNo }, batches, checkpoint))) {
          log.info('superseded by a newer generation, or canceled, during fan-out');
          return;
        }
        const direct = withTokens(batches, page.groups);
        await Promise.all(batches.filter((b) => !direct.sent.includes(b)).map((b) => enqueue(b.id)));
        await deps.direct.sendInTurn(committedBatches(n, direct.sent, direct.tokens));
        seq += batches.length;
        if (page.read < deps.pageSize) break;
      }
      log.info({ batches: seq - (rangeNo + 1) * RANGE_SEQ_STRIDE }, 'fan-out range done');
    }
    if (await deps.delivery.finishRange(deps.db, notificationId, generation, rangeNo)) {
      log.info('fan-out done (its last range)');
      await deps.delivery.completeIfFinished(deps.db, [{ id: notificationId, generation }]);
    }
  };
}
