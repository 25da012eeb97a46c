import type { Job } from 'bullmq';
import type { AttemptInput, AttemptNotification, BatchHead, BatchOutcome, PendingTarget } from '../db/repositories/delivery.js';
import type { DeliveryStore } from './delivery-store.js';
import type { PushResult, PushTarget } from '../gateways/types.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { GatewayProvider } from '../gateways/provider.js';
import type { BatchRef, JobTypes } from './jobs.js';
import { isExpired, msLeft } from '../domain/delivery-options.js';
import { RetryLaterError } from './retry.js';
import type { Clock } from '../platform/clock.js';
import { Semaphore } from '../platform/semaphore.js';

/** Sorts per-device gateway results into what the batch records. */
export function summarise(results: PushResult[]): BatchOutcome & { retryAfterMs?: number } {
  const out: BatchOutcome & { retryAfterMs?: number } = {
    succeeded: [],
    failed: [],
    invalidated: [],
    retry: [],
    expired: [],
    lastError: null,
  };
  for (const { deviceId, outcome } of results) {
    switch (outcome.kind) {
      case 'ok':
        out.succeeded.push(deviceId);
        break;
      case 'invalid_token':
        out.invalidated.push({ deviceId, reason: outcome.reason });
        break;
      case 'failed':
        out.failed.push({ deviceId, reason: outcome.reason });
        out.lastError = outcome.reason;
        break;
      case 'retry':
        out.retry.push(deviceId);
        out.lastError = outcome.reason;
        if (outcome.retryAfterMs) out.retryAfterMs = Math.max(out.retryAfterMs ?? 0, outcome.retryAfterMs);
        break;
    }
  }
  return out;
}

export interface BatchAttemptDeps {
  metrics: Metrics;
  gateways: GatewayProvider;
  store: DeliveryStore;
  /** what an expiry is checked against */
  clock: Clock;
}

/**
 * One attempt at a stored batch: sends its still-pending devices (as just read with the batch) through the app's
 * gateway (so a retry resends exactly the tokens that failed temporarily) and commits the results. `done` when nothing is left to retry; on
 * the final attempt what is left counts as failed. An attempt at or after the notification's expiry sends
 * nothing: its pending devices are recorded expired and the batch is done.
 */
export async function attemptBatch(
  deps: BatchAttemptDeps,
  n: Pick<AttemptNotification, 'id' | 'app_id' | 'payload' | 'localized' | 'expires_at' | 'priority' | 'capped'> &
    Partial<Pick<AttemptNotification, 'live_activity'>>,
  batch: BatchHead,
  pending: PendingTarget[],
  finalAttempt: boolean,
  /** called once the gateway has answered, before the results are recorded */
  sent?: () => void,
): Promise<{ summary: ReturnType<typeof summarise>; done: boolean; closed: boolean }> {
  if (isExpired(n.expires_at, deps.clock.now())) {
    const summary = { ...summarise([]), expired: pending.map((p) => p.deviceId), lastError: 'expired' };
    if (summary.expired.length > 0) deps.metrics.pushes.inc({ platform: batch.platform, outcome: 'expired' }, summary.expired.length);
    const closed = await deps.store.record({ batch, outcome: summary, finalAttempt });
    return { summary, done: true, closed };
  }
  let targets: PushTarget[] = [];
  let results: PushResult[] = [];
  // a batch's first attempt takes the caps' slots; its retries resend to devices that already hold one
  const capped = n.capped && batch.attempts === 0 ? await capDevices(deps, n.app_id, pending) : [];
  if (capped.length) {
    const out = new Set(capped);
    pending = pending.filter((p) => !out.has(p.deviceId));
    deps.metrics.pushes.inc({ platform: batch.platform, outcome: 'capped' }, capped.length);
  }
  for (const p of pending) {
    if (p.token === null) results.push({ deviceId: p.deviceId, outcome: { kind: 'failed', reason: 'device_unavailable' } });
    else targets.push(p as PushTarget);
  }
  if (batch.platform === 'web' && targets.length) {
    // a browser's push is encrypted to its subscription keys, read as they are now beside the endpoint
    const keyed = await deps.store.withWebPushKeys(targets);
    targets = keyed.filter((t) => t.keys);
    for (const t of keyed) if (!t.keys) results.push({ deviceId: t.deviceId, outcome: { kind: 'failed', reason: 'device_unavailable' } });
  }

  const gateway = targets.length ? await deps.gateways.gatewayFor(n.app_id, batch.platform, batch.development) : null;
  if (targets.length && !gateway) {
    results = results.concat(
      targets.map((t) => ({ deviceId: t.deviceId, outcome: { kind: 'failed', reason: 'no_credentials' } as const })),
    );
  }
  // the moment the pushes go out: the succeeded devices' receipts start here (what their events are measured from)
  const sentAt = deps.clock.now();
  if (gateway) {
    const stop = deps.metrics.gatewayLatency.startTimer({ platform: batch.platform });
    const push = { notificationId: n.id, expiresAt: n.expires_at, priority: n.priority, ...(n.live_activity && { liveActivity: true }) };
    const payload = n.payload as Record<string, unknown>;
    // a push in one language goes as one send, as it always did; one with content per language, one send per language
    const groups = n.localized ? await deps.store.byLanguage(targets, payload, n.localized) : [{ payload, targets }];
    const answers = await Promise.all(groups.map((g) => gateway.send({ ...push, payload: g.payload }, g.targets)));
    results = results.concat(...answers);
    stop();
  }
  sent?.();
  const summary = { ...summarise(results), sentAt, capped };
  if (n.live_activity && summary.invalidated.length) {
    // the dead token is the activity's, which alone is forgotten
    const tokenOf = new Map(targets.map((t) => [t.deviceId, t.token]));
    summary.invalidated = summary.invalidated.map((i) => ({ ...i, token: tokenOf.get(i.deviceId)! }));
  }
  // one increment per outcome and batch, not per push
  const counts = {
    ok: summary.succeeded.length,
    invalid_token: summary.invalidated.length,
    failed: summary.failed.length,
    retry: summary.retry.length,
  };
  for (const [outcome, count] of Object.entries(counts))
    if (count > 0) deps.metrics.pushes.inc({ platform: batch.platform, outcome }, count);
  const closed = await deps.store.record({ batch, outcome: summary, finalAttempt });
  return { summary, done: finalAttempt || summary.retry.length === 0, closed };
}

/** The devices of `pending` at one of the app's frequency caps (none when it has none, without a query). */
async function capDevices(deps: BatchAttemptDeps, appId: string, pending: PendingTarget[]): Promise<string[]> {
  const caps = await deps.store.capsOf(appId);
  if (!caps?.length) return [];
  const reachable = pending.filter((p) => p.token !== null).map((p) => p.deviceId);
  const allowed = await deps.store.takeCapSlots(caps, reachable, deps.clock.now());
  return reachable.filter((id) => !allowed.has(id));
}

/**
 * What an attempt that left pushes to retry asks of the next one: the gateway's Retry-After, and no later than the
 * notification's expiry (a retry after it would only find it expired).
 */
export function retryLater(summary: ReturnType<typeof summarise>, expiresAt: Date | null, clock: Clock): RetryLaterError {
  return new RetryLaterError(
    `${summary.retry.length} pushes to retry: ${summary.lastError}`,
    summary.retryAfterMs,
    msLeft(expiresAt, clock.now()),
  );
}

/** A batch attempt of this many pushes (a broadcast's) is logged at info even when every push went out. */
export const LOGGED_BATCH_PUSHES = 100;

/**
 * The line each recorded attempt at a batch logs, by whoever made it: at info when a push was not sent or the batch
 * is large, at debug for a clean small batch (a unicast's), which at info was a line a notification (issue 43).
 */
export function logAttempt(
  log: Logger,
  at: { notificationId: string; batchId: string; job: 'delivery' | 'direct'; attempt: number },
  summary: BatchOutcome,
): void {
  const sent = summary.succeeded.length;
  const notSent = summary.failed.length + summary.invalidated.length + summary.retry.length + summary.expired.length;
  const level = notSent > 0 || sent >= LOGGED_BATCH_PUSHES ? 'info' : 'debug';
  if (!log.isLevelEnabled(level)) return;
  // the fields inline, not a child logger: a child is built even when its level is off, and this runs per batch
  log[level](
    {
      ...at,
      sent,
      failed: summary.failed.length,
      invalidated: summary.invalidated.length,
      retry: summary.retry.length,
      expired: summary.expired.length,
    },
    'batch attempt recorded',
  );
}

/**
 * The turns of the large batches: `atOnce` of them send at a time, and as many more may be sent and not yet recorded
 * (the recording of a batch's results is not on the way of the next send). What a crash re-sends is at most the
 * batches of both: a batch sent and not recorded is sent again whole.
 */
export class LargeBatchTurns {
  private readonly sending: Semaphore;
  private readonly unrecorded: Semaphore;

  constructor(atOnce: number) {
    this.sending = new Semaphore(atOnce);
    this.unrecorded = new Semaphore(2 * atOnce);
  }

  /** Waits for a turn; `sent` once the gateway has answered, `done` once the results are recorded (or not sent). */
  async take(): Promise<{ sent: () => void; done: () => void }> {
    await this.unrecorded.acquire();
    await this.sending.acquire();
    let sending = true;
    let held = true;
    const sent = () => {
      if (sending) this.sending.release();
      sending = false;
    };
    return {
      sent,
      done: () => {
        sent();
        if (held) this.unrecorded.release();
        held = false;
      },
    };
  }
}

/** A paced batch's job is released this much before its reserved start (queues' delays are not that exact). */
export const PACE_EARLY_MS = 1000;

/** Waits for a paced batch's reserved start on the clock; bounded, so a clock that stands still cannot hold a job. */
async function untilReserved(start: Date | null, clock: Clock): Promise<void> {
  if (!start) return;
  const giveUpAt = Date.now() + 5 * PACE_EARLY_MS;
  while (clock.now() < start && Date.now() < giveUpAt)
    await new Promise((r) => setTimeout(r, Math.min(50, start.getTime() - clock.now().getTime())));
}

/**
 * The delivery job: one attempt at each of its batches (one of a fan-out, or the batches of a group of small
 * notifications created together), all at once. A worker also runs many jobs at once, so that one-device
 * notifications do not wait on each other's round trips; of the large batches (more devices than an audience cut
 * at creation has) only `largeBatchesAtOnce` send at a time, which bounds memory and what a crash re-sends (a
 * batch interrupted mid-send, or sent and not yet recorded, is sent again whole; the job ends once its batches'
 * results are recorded). A batch left to retry makes its job fail and come back later;
 * in a job of several, each such batch goes on alone (the job keeps its first, the others get a job each, with
 * their own backoff), so that one gateway's Retry-After holds back no other batch, and no batch is sent again.
 */
export function deliveryProcessor(
  deps: BatchAttemptDeps & {
    log: Logger;
    maxAttempts: number;
    largeBatchesAtOnce: number;
    /** the process's turns of large batches, shared with the fan-outs' own sends (DirectDelivery.sendInTurn) */
    largeTurns: LargeBatchTurns;
    /** enqueues a batch's own job (its id is the batch's), after `delayMs` */
    retryAlone: (batch: BatchRef, delayMs: number) => Promise<void>;
    /** the delay before a batch's next attempt, as the queue's retries have it */
    backoff: (attemptsMade: number, err: unknown) => number;
  },
) {
  const turns = deps.largeTurns;
  const readAhead = new Semaphore(deps.largeBatchesAtOnce);
  const attemptOne = async (job: Job<JobTypes['delivery']>, batchId: string): Promise<void> => {
    const input = await deps.store.loadUnlessLarge(batchId);
    if (!input || !('large' in input)) return attemptLoaded(deps, job, input);
    // A large batch is read when its turn nears (as many are read ahead as send at once): a cancel or a newer
    // generation may have come while it waited.
    const [loaded, turn] = await readAhead.run(async () => {
      const read = await deps.store.load(batchId);
      return [read, await turns.take()] as const;
    });
    try {
      return await attemptLoaded(deps, job, loaded, turn.sent);
    } finally {
      turn.done();
    }
  };
  return async (job: Job<JobTypes['delivery']>): Promise<void> => {
    const { batches } = job.data;
    const settled = await Promise.all(
      batches.map((b) =>
        attemptOne(job, b.batchId).then(
          () => null,
          (err: unknown) => ({ b, err }),
        ),
      ),
    );
    const left = settled.filter((s) => s !== null);
    if (!left.length) return;
    const [kept, ...others] = left;
    await Promise.all(others.map(({ b, err }) => deps.retryAlone(b, deps.backoff(job.attemptsMade + 1, err))));
    // the job's own retry carries only the batch it keeps (the others have their jobs)
    if (batches.length > 1) await job.updateData({ batches: [kept!.b] });
    throw kept!.err;
  };
}

/** The delivery job's attempt at one batch as just read; what is left to retry throws (RetryLaterError). */
async function attemptLoaded(
  deps: BatchAttemptDeps & { log: Logger; maxAttempts: number },
  job: Job<JobTypes['delivery']>,
  input: AttemptInput | undefined,
  sent?: () => void,
): Promise<void> {
  if (!input || input.batch.state !== 'pending') return;
  const { batch, notification: n, pending } = input;
  // a batch that went on in a job of its own (deliveryProcessor) has had attempts its new job did not make
  const attemptsMade = Math.max(job.attemptsMade, batch.attempts);
  if (n.generation !== batch.generation) {
    await deps.store.delivery.closeBatchUnsent(deps.store.db, batch, 'superseded'); // a collapse_key update replaced this send
    return;
  }
  if (n.state === 'canceled') {
    await deps.store.delivery.closeBatchUnsent(deps.store.db, batch, 'canceled');
    return;
  }
  if (job.attemptsMade === 0) await untilReserved(batch.not_before, deps.clock);
  const { summary, done, closed } = await attemptBatch(deps, n, batch, pending, attemptsMade + 1 >= deps.maxAttempts, sent);
  logAttempt(deps.log, { notificationId: n.id, batchId: batch.id, job: 'delivery', attempt: attemptsMade + 1 }, summary);
  if (!done) throw retryLater(summary, n.expires_at, deps.clock);
  if (!closed) await deps.store.completeIfFinished(n.id, n.generation, input.batch.seq);
}
