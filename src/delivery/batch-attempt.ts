import type { AttemptInput, AttemptNotification, BatchOutcome, PendingTarget, StopReason } from '../db/repositories/batches.js';
import type { DeliveryStore } from './delivery-store.js';
import type { PushResult, PushTarget } from '../gateways/types.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { GatewayProvider } from '../gateways/provider.js';
import { isExpired, msLeft } from '../domain/delivery-options.js';
import { hasTemplates } from '../domain/templates.js';
import { RetryLaterError } from './retry.js';
import type { Clock } from '../platform/clock.js';

/** What attempting a batch takes, whoever attempts it. */
export interface BatchAttemptDeps {
  metrics: Metrics;
  gateways: GatewayProvider;
  store: DeliveryStore;
  /** what an expiry is checked against */
  clock: Clock;
  log: Logger;
}

/** The notification as an attempt sends it; one just committed has no `state` read (it sends). */
export type AttemptSubject = Pick<
  AttemptNotification,
  'id' | 'app_id' | 'payload' | 'localized' | 'expires_at' | 'priority' | 'generation' | 'capped'
> &
  Partial<Pick<AttemptNotification, 'state' | 'live_activity'>>;

/**
 * A batch to attempt: as read with its notification and pending devices (`DeliveryStore.load`), or as just committed,
 * its devices with the tokens read to cut it (`committedBatches`, `direct-delivery.ts`).
 */
export interface BatchToAttempt {
  batch: Omit<AttemptInput['batch'], 'seq' | 'not_before'> & Partial<Pick<AttemptInput['batch'], 'seq' | 'not_before'>>;
  notification: AttemptSubject;
  pending: PendingTarget[];
}

export type AttemptSummary = BatchOutcome & { retryAfterMs?: number };

/**
 * What a path that attempts batches decides for itself; the rest (the stop check, the send, the record, the
 * notification's close) is the same for all.
 */
export interface AttemptPolicy {
  /** names the path in the attempt's log line */
  via: 'delivery' | 'direct' | 'transactional';
  maxAttempts: number;
  /** attempts the caller counts already, when the batch's own count may be behind (a queue job's) */
  attemptsMade?: number;
  /** after the stop check, before the send: a paced batch waits for its reserved start */
  beforeSend?: (input: BatchToAttempt) => Promise<void>;
  /** once the gateway has answered, before the results are recorded: frees a large batch's turn */
  sent?: () => void;
  /** each attempt once recorded; `final` when it was the batch's last */
  recorded?: (summary: AttemptSummary, at: { input: BatchToAttempt; final: boolean; closed: boolean }) => void;
  /**
   * What is left to retry after a recorded attempt: true to attempt it again here, now (the policy has waited), on
   * what the batch has pending read again; false when it goes on elsewhere (a job of its own) or was given up. A
   * throw fails the caller (a job: the queue runs it again).
   */
  retry: (left: RetryLaterError, at: { input: BatchToAttempt; summary: AttemptSummary }) => Promise<boolean>;
  /** false: the caller closes the notification itself once all its batches are done (one look for several) */
  completes: boolean;
}

/** How a batch's attempts ended here. */
export type AttemptEnd =
  /** unknown, or no longer pending: nothing to do */
  | { kind: 'gone' }
  /** closed unsent: its notification canceled, or a newer generation of it */
  | { kind: 'stopped'; reason: StopReason; pending: PendingTarget[] }
  /** recorded: done (sent, failed or given up), or left to retry elsewhere */
  | { kind: 'recorded'; done: boolean; summary: AttemptSummary };

/**
 * The one way a batch is attempted, by a delivery job, the direct sends and a transactional send alike: stop check
 * (canceled, superseded) → send and record (expired: recorded unsent) → close the notification when nothing is left,
 * or ask the policy what becomes of what is left to retry. A throw before the attempt is recorded means it may not
 * have been sent or recorded: the caller sends it again, at least once.
 */
export async function attemptBatch(deps: BatchAttemptDeps, first: BatchToAttempt | undefined, policy: AttemptPolicy): Promise<AttemptEnd> {
  for (let input = first; ;) {
    if (!input || input.batch.state !== 'pending') return { kind: 'gone' };
    const { batch, notification: n, pending } = input;
    const stop = stopOf(input);
    if (stop) {
      await deps.store.batches.closeBatchUnsent(deps.store.db, batch, stop);
      return { kind: 'stopped', reason: stop, pending };
    }
    await policy.beforeSend?.(input);
    const attempt = Math.max(policy.attemptsMade ?? 0, batch.attempts) + 1;
    const final = attempt >= policy.maxAttempts;
    const { summary, done, closed } = await sendAndRecord(deps, input, final, policy.sent);
    logAttempt(deps.log, { notificationId: n.id, batchId: batch.id, job: policy.via, attempt }, summary);
    policy.recorded?.(summary, { input, final, closed });
    if (done) {
      if (!closed && policy.completes) await deps.store.completeIfFinished(n.id, n.generation, batch.seq);
      return { kind: 'recorded', done, summary };
    }
    if (!(await policy.retry(retryLater(summary, n.expires_at, deps.clock), { input, summary })))
      return { kind: 'recorded', done, summary };
    input = await deps.store.load(batch.id);
  }
}

/** Why a batch as read is no longer sent: a collapse_key update replaced its send, or its notification was canceled. */
function stopOf({ batch, notification: n }: BatchToAttempt): StopReason | null {
  if (n.generation !== batch.generation) return 'superseded';
  return n.state === 'canceled' ? 'canceled' : null;
}

/** Sorts per-device gateway results into what the batch records. */
export function summarise(results: PushResult[]): AttemptSummary {
  const out: AttemptSummary = {
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

/**
 * One attempt at a stored batch: sends its still-pending devices (as just read with the batch) through the app's
 * gateway (so a retry resends exactly the tokens that failed temporarily) and commits the results. `done` when
 * nothing is left to retry; on the final attempt what is left counts as failed. An attempt at or after the
 * notification's expiry sends nothing: its pending devices are recorded expired and the batch is done.
 */
async function sendAndRecord(
  deps: BatchAttemptDeps,
  { notification: n, batch, pending }: BatchToAttempt,
  finalAttempt: boolean,
  sent?: () => void,
): Promise<{ summary: AttemptSummary; done: boolean; closed: boolean }> {
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

  // the app's credentials as stored now, and the long-lived gateway kept for them (none: an unknown app)
  const app = targets.length ? await deps.store.credentialsOf(n.app_id) : null;
  const gateway = app && deps.gateways.get(app, batch.platform, batch.development ? 'development' : 'production');
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
    const languages = n.localized ? await deps.store.byLanguage(targets, payload, n.localized) : [{ payload, targets }];
    // then by what each device's templates render to; a payload without templates is sent as it is
    const { groups, failed } = languages.some((l) => hasTemplates(l.payload))
      ? await deps.store.templates.render(n, batch.platform, languages)
      : { groups: languages, failed: [] };
    results = results.concat(failed);
    // a templated batch's many renders go as one send where the gateway can: not a send per render
    const answers =
      groups.length > 1 && gateway.sendEach
        ? [await gateway.sendEach(push, groups)]
        : await Promise.all(groups.map((g) => gateway.send({ ...push, payload: g.payload }, g.targets)));
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
function retryLater(summary: AttemptSummary, expiresAt: Date | null, clock: Clock): RetryLaterError {
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
 * is large, at debug for a clean small batch (a unicast's), which at info would be a line a notification.
 */
export function logAttempt(
  log: Logger,
  at: { notificationId: string; batchId: string; job: AttemptPolicy['via']; attempt: number },
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
