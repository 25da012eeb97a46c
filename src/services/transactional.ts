import type { Db } from '../db/database.js';
import type { BatchHead } from '../db/repositories/delivery.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { Notification } from '../db/schema.js';
import { msLeft, resolveDeliveryOptions } from '../domain/delivery-options.js';
import { ValidationError } from '../domain/errors.js';
import { transactionalFilters, type TransactionalRequest } from '../domain/transactional-request.js';
import { attemptBatch, type BatchAttemptDeps } from '../queue/delivery.js';
import { cutBatches } from '../queue/fanout.js';
import { backoffDelay, RetryLaterError, type RetryPolicy } from '../queue/retry.js';
import { Replay, type IdempotencyKeys, type IdempotentRequest } from './idempotency.js';

/** Most devices one transactional send reaches: one device, or one user's. */
export const TRANSACTIONAL_MAX_DEVICES = 100;

export interface TransactionalResult {
  notification: Notification;
  /** pushes the gateways accepted, tokens they reported uninstalled, devices not reached (expired ones included) */
  success: number;
  uninstalled: number;
  failures: string[];
}

/**
 * Sends within the request. The notification and its batches are committed first, exactly as a small audience's
 * are, so a process that dies mid-send leaves them to the sweeper and the workers (at least once, as for every
 * notification). Then the batches are sent here, retried until `timeoutMs`; what is still unsent at the deadline
 * counts as failed (`deadline_exceeded`) and is reported, so the caller decides whether to send again. A push
 * that expires first is not retried past its expiry: it is recorded expired and reported among the failures.
 */
export class TransactionalService {
  constructor(
    private readonly db: Db,
    private readonly notifications: NotificationsRepository,
    private readonly devices: DevicesRepository,
    private readonly idempotency: IdempotencyKeys,
    /** what sending a batch takes: the gateways, the delivery repository, metrics */
    private readonly sending: BatchAttemptDeps,
    private readonly settings: { batchSize: number; timeoutMs: number; retry: RetryPolicy },
  ) {}

  /**
   * With an Idempotency-Key the key is claimed in the transaction that commits the notification and names it; its
   * answer is stored once the send is over. A retry meanwhile (or after a process died mid-send) answers 409
   * naming the notification, which the workers finish; a retry after the answer replays it.
   */
  async send(
    appId: string,
    request: TransactionalRequest,
    idempotency?: IdempotentRequest<TransactionalResult>,
  ): Promise<TransactionalResult | Replay> {
    const now = new Date();
    const deadline = now.getTime() + this.settings.timeoutMs;
    const options = resolveDeliveryOptions(request.notification, now);
    const filters = transactionalFilters(request);
    const committed = await this.db.transaction().execute(async (trx) => {
      const replay = await this.idempotency.claim(trx, appId, idempotency);
      if (replay) return replay;
      const devices = await this.devices.pageDeliverable(trx, appId, filters, {
        afterId: null,
        limit: TRANSACTIONAL_MAX_DEVICES + 1,
        now,
      });
      if (devices.length > TRANSACTIONAL_MAX_DEVICES) {
        throw new ValidationError(`to: matches more than ${TRANSACTIONAL_MAX_DEVICES} devices; send to an audience instead`);
      }
      const inserted = await this.notifications.insertOrCollapse(trx, {
        appId,
        audienceId: null,
        request: request as unknown as Record<string, unknown>,
        payload: request.notification.payload,
        collapseKey: null,
        group: request.group,
        options,
      });
      const batches = cutBatches(inserted.id, inserted.generation, devices, 0, this.settings.batchSize);
      await this.sending.delivery.saveWholeAudience(trx, inserted.id, inserted.generation, batches, devices.length);
      await this.idempotency.pending(trx, appId, idempotency, inserted.id);
      return { notification: inserted, batches };
    });
    if (committed instanceof Replay) return committed;
    const { notification, batches } = committed;

    const heads: BatchHead[] = batches.map((b) => ({
      id: b.id,
      notification_id: notification.id,
      generation: notification.generation,
      platform: b.platform,
      development: b.development,
      state: 'pending',
      attempts: 0,
    }));
    const outcomes = await Promise.all(heads.map((head) => this.sendUntil(notification, head, deadline)));
    await this.sending.delivery.completeIfFinished(this.db, notification.id, notification.generation);
    const result = {
      notification: (await this.notifications.findById(this.db, notification.id)) ?? notification,
      success: outcomes.reduce((sum, o) => sum + o.succeeded, 0),
      uninstalled: outcomes.reduce((sum, o) => sum + o.uninstalled, 0),
      failures: outcomes.flatMap((o) => o.failed),
    };
    await this.idempotency.store(this.db, appId, idempotency, result);
    return result;
  }

  /** Attempts one batch until nothing is left to retry, the attempts run out or the deadline comes. */
  private async sendUntil(n: Notification, head: BatchHead, deadline: number) {
    const total = { succeeded: 0, uninstalled: 0, failed: [] as string[] };
    for (let batch = head; ; batch = { ...batch, attempts: batch.attempts + 1 }) {
      const final = batch.attempts + 1 >= this.settings.retry.attempts;
      const { summary, done } = await attemptBatch(this.sending, n, batch, final);
      total.succeeded += summary.succeeded.length;
      total.uninstalled += summary.invalidated.length;
      total.failed.push(...summary.failed.map((f) => f.deviceId), ...summary.expired);
      if (done) {
        if (final) total.failed.push(...summary.retry); // recorded as retries_exhausted
        return total;
      }
      const untilExpiryMs = msLeft(n.expires_at, new Date());
      const delay = backoffDelay(
        this.settings.retry,
        batch.attempts + 1,
        new RetryLaterError('retry', summary.retryAfterMs, untilExpiryMs),
      );
      if (Date.now() + delay >= deadline) {
        const next = { ...batch, attempts: batch.attempts + 1 };
        const left = summary.retry.map((deviceId) => ({ deviceId, reason: 'deadline_exceeded' }));
        await this.sending.delivery.recordAttempt(
          this.db,
          next,
          { succeeded: [], failed: left, invalidated: [], retry: [], expired: [], lastError: 'deadline_exceeded' },
          true,
        );
        total.failed.push(...summary.retry);
        return total;
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
