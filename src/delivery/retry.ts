import type { Config } from '../platform/config.js';

/**
 * Retry policy of deliveries. The error a delivery job throws carries what the gateway asked for
 * (Retry-After); the backoff is exponential with full jitter and never shorter than that, except that no retry
 * waits past the notification's expiry (the attempt then records its pushes expired).
 */
export class RetryLaterError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs: number | undefined,
    /** time left before the notification expires: no retry is put off beyond it */
    readonly untilExpiryMs?: number,
  ) {
    super(message);
    this.name = 'RetryLaterError';
  }
}

export interface RetryPolicy {
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

/** The policy the settings give: DELIVERY_MAX_ATTEMPTS attempts, backoff from RETRY_BASE_MS up to RETRY_MAX_MS. */
export function retryPolicyOf(config: Pick<Config, 'DELIVERY_MAX_ATTEMPTS' | 'RETRY_BASE_MS' | 'RETRY_MAX_MS'>): RetryPolicy {
  return { attempts: config.DELIVERY_MAX_ATTEMPTS, baseDelayMs: config.RETRY_BASE_MS, maxDelayMs: config.RETRY_MAX_MS };
}

export function backoffDelay(policy: RetryPolicy, attemptsMade: number, err: unknown, random: () => number = Math.random): number {
  const exp = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, attemptsMade - 1));
  const jittered = exp / 2 + random() * (exp / 2);
  const asked = err instanceof RetryLaterError && err.retryAfterMs ? err.retryAfterMs : 0;
  const delay = Math.round(Math.max(jittered, Math.min(asked, policy.maxDelayMs)));
  if (!(err instanceof RetryLaterError) || err.untilExpiryMs === undefined) return delay;
  // Rounded up: a retry back a moment before the expiry would send again instead of finding it expired.
  return Math.min(delay, Math.ceil(err.untilExpiryMs));
}
