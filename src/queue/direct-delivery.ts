import type { BatchHead, NewBatch, PendingTarget } from '../db/repositories/delivery.js';
import type { Logger } from '../platform/logger.js';
import { attemptBatch, logAttempt, type BatchAttemptDeps } from './delivery.js';
import type { NotificationScheduler } from './jobs.js';
import { msLeft } from '../domain/delivery-options.js';
import { RetryLaterError } from './retry.js';
import type { AttemptNotification } from '../db/repositories/delivery.js';

/** A batch just committed, with its devices' tokens as read in the statement that cut it. */
export interface CommittedBatch {
  notification: Pick<AttemptNotification, 'id' | 'app_id' | 'payload' | 'expires_at' | 'priority' | 'generation'>;
  head: BatchHead;
  targets: PendingTarget[];
}

/** The batches of a notification just stored, as its first attempt sends them: to the tokens read to cut them. */
export function committedBatches(
  notification: CommittedBatch['notification'],
  batches: NewBatch[],
  tokens: ReadonlyMap<string, string>,
): CommittedBatch[] {
  return batches.map((b) => ({
    notification,
    head: {
      id: b.id,
      notification_id: notification.id,
      generation: notification.generation,
      platform: b.platform,
      development: b.development,
      state: 'pending',
      attempts: 0,
    },
    targets: b.deviceIds.map((deviceId) => ({ deviceId, token: tokens.get(deviceId)! })),
  }));
}

/** Batches a process sends itself at once at most (each of a few devices); more go to the queue. */
export const DIRECT_MAX_IN_FLIGHT = 1000;

/**
 * Sends the batches of small audiences from the process that committed them, without a trip through the queue:
 * its first attempt right after the commit, with the tokens read to cut it. A batch left to retry goes to the
 * queue with its backoff, as a delivery job's retry would; one whose attempt could not be recorded goes to the
 * queue at once. At most `maxInFlight` batches are sent this way at a time (DIRECT_MAX_IN_FLIGHT): past that they are left to the queue,
 * which bounds what a slow gateway makes this process hold. If the process dies first, the sweeper finds the
 * batches pending with no job and enqueues them: at least once, as for every notification.
 */
export class DirectDelivery {
  private inFlight = 0;
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly deps: BatchAttemptDeps & {
      log: Logger;
      scheduler: NotificationScheduler;
      maxAttempts: number;
      maxInFlight: number;
      /** the delay before a batch's next attempt, as the delivery jobs' retries have it */
      backoff: (attemptsMade: number, err: unknown) => number;
    },
  ) {}

  /**
   * Starts sending batches stored together, all of them or none (false: at its bound, they go to the queue as one
   * job, the one their rows name).
   */
  take(batches: CommittedBatch[]): boolean {
    if (this.inFlight >= this.deps.maxInFlight) return false;
    for (const batch of batches) this.track(this.send(batch));
    return true;
  }

  /** Waits for the sends in flight (at shutdown: what is cut off is left to the sweeper). */
  async drain(): Promise<void> {
    while (this.running.size) await Promise.all(this.running);
  }

  private track(sending: Promise<void>): void {
    this.inFlight += 1;
    const done = sending.finally(() => {
      this.inFlight -= 1;
      this.running.delete(done);
    });
    this.running.add(done);
  }

  private async send({ notification: n, head, targets }: CommittedBatch): Promise<void> {
    const ref = { notificationId: n.id, batchId: head.id };
    try {
      const { summary, done, closed } = await attemptBatch(this.deps, n, head, targets, this.deps.maxAttempts <= 1);
      logAttempt(this.deps.log, { notificationId: n.id, batchId: head.id, job: 'direct', attempt: 1 }, summary);
      if (!done) {
        const untilExpiryMs = msLeft(n.expires_at, this.deps.clock.now());
        const err = new RetryLaterError(
          `${summary.retry.length} pushes to retry: ${summary.lastError}`,
          summary.retryAfterMs,
          untilExpiryMs,
        );
        await this.deps.scheduler.deliver([ref], this.deps.backoff(1, err));
      } else if (!closed) await this.deps.store.completeIfFinished(n.id, n.generation);
    } catch (err) {
      // not recorded (or not handed on): the queue sends it again, at least once
      this.deps.log.warn({ err, notificationId: n.id, batchId: head.id }, 'direct send failed; handed to the queue');
      await this.deps.scheduler.deliver([ref]).catch(() => undefined); // else the sweeper finds it
    }
  }
}
