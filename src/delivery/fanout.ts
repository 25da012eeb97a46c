import type { Job } from 'bullmq';
import { RANGE_SEQ_STRIDE } from '../db/repositories/fanout.js';
import type { Deliverable, DeliverableGroups, DeliverableNow, ZoneSlice } from '../db/repositories/deliverable-devices.js';
import {
  allowedOf,
  batchesOfGroups,
  cutAbPage,
  cutBatches,
  withTokens,
  type AbShare,
  type CutPage,
  type NewBatch,
} from '../domain/batches.js';
import type { Filter } from '../domain/filters.js';
import type { Notification, Platform } from '../db/schema.js';
import { waveSlice, type LocalPlan } from '../domain/campaign.js';
import { isVisiblePush } from '../domain/push-mapping.js';
import { PACE_EARLY_MS } from './delivery.js';
import type { Logger } from '../platform/logger.js';
import type { JobTypes } from './jobs.js';
import { abBounds, abTestOf, decideAt } from '../domain/ab-test.js';
import type { CampaignSettings } from '../db/repositories/apps.js';
import { bestTimeCut, isBestTime, releaseBestTimeWaves } from './best-time.js';
import type { FanoutDeps } from './fanout-deps.js';

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

const finished = (state: string) => state === 'sent' || state === 'failed' || state === 'canceled';

/** How a notification's pages are cut and sent: its pace, its batches' size, whether its push shows. */
export interface FanoutPlan {
  pace: { notification: number | null; app: number | null };
  paced: boolean;
  batchSize: number;
  /** the push shows something (a not-allowed device is not sent it) */
  visible: boolean;
}

/** The plan of a notification's fan-out, from its row and its app's ceiling (pure). */
export function planFanout(
  n: Pick<Notification, 'throttle_per_minute' | 'live_activity' | 'payload'>,
  appPerMinute: number | null,
  batchSize: number,
): FanoutPlan {
  const pace = { notification: n.throttle_per_minute, app: appPerMinute };
  const paced = pace.notification !== null || pace.app !== null;
  // a paced batch holds about a second of its pace, so the pushes spread evenly
  const slowest = Math.min(pace.notification ?? Infinity, pace.app ?? Infinity);
  // a Live Activity shows whatever the device's notification setting (ActivityKit has its own)
  const visible = !n.live_activity && isVisiblePush(n.payload);
  return { pace, paced, batchSize: paced ? Math.max(1, Math.min(batchSize, Math.ceil(slowest / 60))) : batchSize, visible };
}

/** A page as read: how many devices, the last one (the next cursor). */
interface ReadPage {
  read: number;
  last: string | null;
}

/** A page of a notification's fan-out: device by device (`first`: with their tokens), or grouped by gateway. */
interface RawPage extends ReadPage {
  first: DeliverableNow[] | null;
  byDevice: Deliverable[] | null;
  groups: DeliverableGroups['groups'];
  page?: DeliverableGroups;
}

const byDevice = (devices: DeliverableNow[] | Deliverable[], withTokens: boolean): RawPage => ({
  first: withTokens ? (devices as DeliverableNow[]) : null,
  byDevice: devices,
  groups: [],
  read: devices.length,
  last: devices.at(-1)?.id ?? null,
});

/**
 * The one page loop of the fan-outs: reads page after page from `cursor` (after `after`), the next while this one
 * is stored (its cursor is this page's last device; dropped unread when this page ends the loop), until `onPage`
 * says otherwise or a page comes back empty.
 */
async function pageLoop<P extends ReadPage, R extends string>(
  readPage: (afterId: string | null, pages: number) => Promise<P>,
  from: { cursor: string | null; limitOf: (pages: number) => number; after?: Promise<unknown> },
  onPage: (page: P & { last: string }, pages: number) => Promise<R | 'next'>,
): Promise<R | 'done'> {
  let reading = readPage(from.cursor, 0);
  reading.catch(() => undefined);
  await from.after;
  for (let pages = 0; ; pages++) {
    const page = await reading;
    if (page.last === null) return 'done';
    if (page.read === from.limitOf(pages)) reading = readPage(page.last, pages + 1);
    reading.catch(() => undefined);
    const next = await onPage(page as P & { last: string }, pages);
    if (next !== 'next') return next;
  }
}

/**
 * Sends a page's batches just stored: those whose tokens the page read from here (the first page's when the direct
 * sends take it, else the gateways' of `SENT_BY_FANOUT`); the others as delivery jobs. Answers the batches sent here.
 */
async function sendPage(
  deps: Pick<FanoutDeps, 'direct'>,
  n: Notification,
  batches: NewBatch[],
  read: { first?: DeliverableNow[] | null; groups: DeliverableGroups['groups'] },
  enqueue: (b: NewBatch) => Promise<unknown>,
): Promise<NewBatch[]> {
  const tokens = read.first && new Map(read.first.map((d) => [d.id, d.token]));
  if (tokens && deps.direct.take([{ notification: n, batches, tokens }])) return batches;
  const direct = withTokens(batches, read.groups);
  await Promise.all(batches.filter((b) => !direct.sent.includes(b)).map(enqueue));
  await deps.direct.sendInTurn({ notification: n, batches: direct.sent, tokens: direct.tokens });
  return direct.sent;
}

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
    // an A/B test between its two stages: its winner's job, not a fan-out, moves it on
    if (abTestOf(n.request) && n.ab_stage === 'waiting') return;
    const now = deps.clock.now(); // date math resolves once per fan-out, the same for every page
    if (n.next_due_at && n.next_due_at > now) return; // not due yet: the due poller releases it
    const run = new FanoutRun({ deps, n, log, found, now });
    const split = !n.fanout_done && n.fanout_seq >= RANGE_SEQ_STRIDE;
    // a fan-out of pages waits for the mark once its first page is asked for (`pages`), any other before it starts
    if (n.fanout_done || split || n.local_plan) await run.marking;
    if (split) await run.resumeRanges();
    else if (!n.fanout_done) {
      if (n.audience_id === null) throw new Error('a transactional send is cut when it is created; it has no audience to fan out');
      const outcome = n.local_plan ? await run.waves(n.local_plan) : await run.pages(n.fanout_cursor);
      if (outcome === 'stopped' || outcome === 'waiting') return;
      if (outcome === 'done') await run.finish();
    }
    if (run.bestTime) return releaseBestTimeWaves({ ...deps, log }, n, { now, appPerMinute: found.settings.max_per_minute }, run.enqueue);
    // Batches stored by an earlier run whose jobs may never have been enqueued (crash, lost queue): the
    // deterministic job ids make this a no-op for jobs that exist. Those this run is sending itself have none.
    for (const b of await deps.batches.pendingBatches(deps.db, notificationId, generation))
      if (!run.sentHere.has(b.id)) await run.enqueue(b);
    await deps.notifications.completeIfFinished(deps.db, [{ id: notificationId, generation }]);
  };
}

interface FanoutRunDeps {
  deps: FanoutDeps;
  n: Notification;
  log: Logger;
  found: { filters: Filter[] | null; settings: CampaignSettings };
  /** date math resolves once per fan-out, the same for every page */
  now: Date;
}

/** One run of a notification's fan-out job: what its pages share. */
class FanoutRun {
  /** marked sending while the first page is read: awaited before anything is stored or enqueued */
  readonly marking: Promise<void>;
  /** the batches this run sent itself (its first page's): not enqueued as pending at its end */
  readonly sentHere = new Set<string>();
  private readonly deps: FanoutDeps;
  private readonly n: Notification;
  private readonly log: Logger;
  private readonly filters: Filter[] | null;
  private readonly now: Date;
  private readonly plan: FanoutPlan;
  private readonly test: ReturnType<typeof abTestOf>;
  private readonly ab: AbShare | null;
  /** the seq of the next batch cut */
  private seq: number;
  /** each device at its best hour: every page cut into hourly waves first (`bestTimeCut`), none sent while cutting */
  readonly bestTime: boolean;
  private readonly settings: CampaignSettings;

  constructor({ deps, n, log, found, now }: FanoutRunDeps) {
    this.deps = deps;
    this.n = n;
    this.log = log;
    this.filters = found.filters;
    this.now = now;
    this.plan = planFanout(n, found.settings.max_per_minute, deps.batchSize);
    this.test = abTestOf(n.request);
    this.ab = this.test && { bounds: abBounds(this.test), rest: n.ab_stage === 'rest', winner: n.ab_winner };
    this.seq = n.fanout_seq;
    this.bestTime = isBestTime(n);
    this.settings = found.settings;
    // a best-time send stays scheduled until its first wave goes out
    this.marking = this.bestTime ? Promise.resolve() : deps.notifications.markSending(deps.db, n.id, n.generation);
    this.marking.catch(() => undefined);
  }

  /** A batch's delivery job; a paced batch's comes a little before its reserved start, and waits for it (delivery.ts). */
  readonly enqueue = (b: { id: string; not_before?: Date | null; notBefore?: Date | null }) => {
    const start = b.notBefore ?? b.not_before;
    const delay = start ? start.getTime() - this.deps.clock.now().getTime() - PACE_EARLY_MS : 0;
    return this.deps.queues.add('delivery', { batches: [{ notificationId: this.n.id, batchId: b.id }], bulk: true }, delay);
  };

  /**
   * Split by an earlier run: the ranges not fanned out yet get their jobs (a no-op for jobs that exist), and one
   * whose job finished the last range but not the fan-out (a crash between the two) finishes it.
   */
  async resumeRanges(): Promise<void> {
    const { deps, n } = this;
    const ranges = await deps.fanout.rangesOf(deps.db, n.id, n.generation);
    const open = ranges.filter((r) => !r.done);
    for (const r of open) await enqueueRange(deps, n.id, n.generation, r.range_no, this.now);
    if (!open.length && ranges.length) await deps.fanout.finishRange(deps.db, n.id, n.generation, ranges[0]!.range_no);
  }

  /** The waves of a local-time send that are due, each its zones' pages; 'waiting' for the next wave. */
  async waves(plan: LocalPlan): Promise<'done' | 'stopped' | 'waiting'> {
    const { deps, n, now, filters } = this;
    // an A/B test's rest counts nothing again: what its test stage counted was over the whole audience
    if (n.wave === 0 && !this.ab?.rest && plan.past.length > 0) {
      const skipped = await deps.deliverableDevices.countDeliverableIn(deps.db, n.app_id, filters, now, waveSlice(plan, plan.past));
      await deps.notifications.setSkippedPastLocalTime(deps.db, n.id, skipped);
    }
    if (n.wave === 0 && !this.ab?.rest && plan.dropped?.length) {
      const dropped = await deps.deliverableDevices.countDeliverableIn(deps.db, n.app_id, filters, now, waveSlice(plan, plan.dropped));
      await deps.notifications.setSkippedQuietHours(deps.db, n.id, dropped);
    }
    for (let w = n.wave; w < plan.waves.length; w++) {
      const wave = plan.waves[w]!;
      if (new Date(wave.at) > now) {
        await deps.notifications.awaitWave(deps.db, n.id, n.generation, new Date(wave.at));
        this.log.info({ wave: w, at: wave.at }, 'waiting for the next local-time wave');
        return 'waiting';
      }
      if ((await this.pages(w === n.wave ? n.fanout_cursor : null, waveSlice(plan, wave.zones))) === 'stopped') return 'stopped';
      await deps.notifications.finishWave(deps.db, n.id, n.generation, w + 1);
    }
    return 'done';
  }

  /** The audience is fanned out: done, or an A/B test's share waits for its winner. */
  async finish(): Promise<void> {
    const { deps, n } = this;
    if (this.test && !this.ab!.rest) {
      await deps.abTests.awaitWinner(deps.db, n.id, n.generation, decideAt(this.test, deps.clock.now()));
      this.log.info({ batches: this.seq }, 'A/B test share fanned out; waiting for the winner');
      return;
    }
    await deps.notifications.markFanoutDone(deps.db, n.id, n.generation);
    this.log.info({ batches: this.seq }, 'fan-out done');
  }

  /**
   * Pages through the devices (of some zones), from `cursor`: 'done', 'split' (ranges go on with the rest), or
   * 'stopped' when superseded or canceled meanwhile.
   */
  async pages(cursor: string | null, zones?: ZoneSlice): Promise<'done' | 'split' | 'stopped'> {
    const { deps, n, plan } = this;
    // an A/B test is cut into its shares by one job (its stages follow its one checkpoint)
    const fresh = cursor === null && this.seq === 0 && !zones && !plan.paced && !this.ab && !this.bestTime;
    let seen = 0;
    const limitOf = (pages: number) => Math.min(deps.pageSize, plan.batchSize * 10 ** pages, FIRST_PAGE_DEVICES * 10 ** pages);
    return pageLoop(
      (afterId, pages) => this.readPage(afterId, limitOf(pages), fresh && pages === 0, zones),
      { cursor, limitOf, after: this.marking },
      async (page, pages) => {
        const { batches, targeted, notAllowed, holdout } = this.bestTime
          ? await bestTimeCut(deps, n, page.byDevice!, { seq: this.seq, batchSize: plan.batchSize, now: this.now, settings: this.settings })
          : this.cut(page);
        if (plan.paced && !this.bestTime) {
          const sizes = batches.map((b) => b.deviceIds.length);
          const starts = await deps.fanout.reserveSlots(deps.db, n.id, n.app_id, sizes, plan.pace, deps.clock.now());
          batches.forEach((b, i) => (b.notBefore = starts[i]));
        }
        const checkpoint = { cursor: page.last, nextSeq: this.seq + batches.length, targeted, notAllowed, holdout, at: deps.clock.now() };
        if (!(await deps.fanout.saveFanoutPage(deps.db, n.id, n.generation, batches, checkpoint))) {
          this.log.info('superseded by a newer generation, or canceled, during fan-out');
          return 'stopped';
        }
        // a best-time send's batches wait for their hour (`releaseBestTimeWaves`)
        if (!this.bestTime) for (const b of await sendPage(deps, n, batches, page, this.enqueue)) this.sentHere.add(b.id);
        this.seq += batches.length;
        seen += page.read;
        if (page.read < limitOf(pages)) return 'done';
        const ranges = fresh && pages === PAGES_BEFORE_SPLIT - 1 ? rangesAfter(page.last, seen, deps.rangeDevices) : [];
        if (!ranges.length) return 'next';
        if (!(await deps.fanout.splitFanout(deps.db, n.id, n.generation, ranges))) return 'stopped';
        for (let r = 0; r < ranges.length; r++) await enqueueRange(deps, n.id, n.generation, r, this.now);
        this.log.info({ ranges: ranges.length }, 'fan-out split into ranges');
        return 'split';
      },
    );
  }

  /**
   * A page of the audience: a fresh broadcast's first page is read with its tokens and sent from here once stored,
   * as a small audience's batches are from the API process; an A/B test's device by device (each has its bucket);
   * any other as ids grouped by gateway. A Live Activity's pushes go to the activity's tokens.
   */
  private async readPage(afterId: string | null, limit: number, first: boolean, zones: ZoneSlice | undefined): Promise<RawPage> {
    const { deps, n, plan, ab, filters } = this;
    const read = { afterId, limit, now: this.now, zones, visible: plan.visible };
    const spec = { ...read, liveActivity: n.live_activity, tokensOf: plan.paced || ab || zones ? [] : SENT_BY_FANOUT };
    if (first && !n.live_activity)
      return byDevice(await deps.deliverableDevices.pageDeliverableNow(deps.db, n.app_id, filters, read), true);
    if (ab || this.bestTime) return byDevice(await deps.deliverableDevices.pageDeliverable(deps.db, n.app_id, filters, spec), false);
    const page = await deps.deliverableDevices.pageDeliverableGroups(deps.db, n.app_id, filters, spec);
    return { first: null, byDevice: null, groups: page.groups, page, read: page.read, last: page.last };
  }

  /** A page cut into batches from the run's next seq: an A/B test's by its shares, any other's by gateway. */
  private cut({ byDevice, page }: RawPage): CutPage {
    const { n, ab } = this;
    const { batchSize } = this.plan;
    if (!byDevice) {
      const batches = batchesOfGroups(n.id, n.generation, page!.groups, this.seq, batchSize);
      return { batches, targeted: page!.read - page!.notAllowed, notAllowed: page!.notAllowed, holdout: [] };
    }
    if (ab) return cutAbPage(ab, n.id, n.generation, byDevice, this.seq, batchSize);
    const { sendable, notAllowed } = allowedOf(byDevice);
    return { batches: cutBatches(n.id, n.generation, sendable, this.seq, batchSize), targeted: sendable.length, notAllowed, holdout: [] };
  }
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
    const [range] = await deps.fanout.rangesOf(deps.db, notificationId, generation, rangeNo);
    if (!n || n.generation !== generation || finished(n.state) || !range) {
      log.debug('nothing to fan out (superseded, finished or canceled)');
      return;
    }
    const enqueue = (b: { id: string }) => deps.queues.add('delivery', { batches: [{ notificationId, batchId: b.id }], bulk: true });
    const block = { from: (rangeNo + 1) * RANGE_SEQ_STRIDE, to: (rangeNo + 2) * RANGE_SEQ_STRIDE };
    // batches an earlier run stored whose jobs may never have been enqueued (deterministic ids: no-ops otherwise)
    if (range.next_seq > block.from)
      for (const b of await deps.batches.pendingBatches(deps.db, notificationId, generation, block)) await enqueue(b);
    if (!range.done) {
      if (n.audience_id === null) throw new Error('a transactional send has no audience to fan out');
      const filters = await deps.audiences.filtersOf(deps.db, n.audience_id);
      if (filters === undefined) return failAudienceMissing(deps, log, n);
      // a Live Activity shows whatever the device's notification setting (ActivityKit has its own)
      const visible = !n.live_activity && isVisiblePush(n.payload);
      const now = new Date(job.data.at);
      let seq = range.next_seq;
      const readPage = (afterId: string | null) =>
        deps.deliverableDevices.pageDeliverableGroups(deps.db, n.app_id, filters, {
          afterId,
          upToId: range.up_to_id,
          limit: deps.pageSize,
          now,
          visible,
          liveActivity: n.live_activity,
          tokensOf: SENT_BY_FANOUT,
        });
      const limitOf = () => deps.pageSize;
      const outcome = await pageLoop(readPage, { cursor: range.cursor_id, limitOf }, async (page) => {
        const { last, notAllowed } = page;
        const batches = batchesOfGroups(notificationId, generation, page.groups, seq, deps.batchSize);
        const checkpoint = { cursor: last, nextSeq: seq + batches.length, targeted: page.read - notAllowed, notAllowed };
        if (!(await deps.fanout.saveRangePage(deps.db, { notificationId, generation, rangeNo }, batches, checkpoint))) {
          log.info('superseded by a newer generation, or canceled, during fan-out');
          return 'stopped';
        }
        await sendPage(deps, n, batches, page, enqueue);
        seq += batches.length;
        return page.read < deps.pageSize ? 'done' : 'next';
      });
      if (outcome === 'stopped') return;
      log.info({ batches: seq - (rangeNo + 1) * RANGE_SEQ_STRIDE }, 'fan-out range done');
    }
    if (await deps.fanout.finishRange(deps.db, notificationId, generation, rangeNo)) {
      log.info('fan-out done (its last range)');
      await deps.notifications.completeIfFinished(deps.db, [{ id: notificationId, generation }]);
    }
  };
}
