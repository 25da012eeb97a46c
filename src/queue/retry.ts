/**
 * Retry policy of deliveries. The error a delivery job throws carries what the gateway asked for
 * (Retry-After); the backoff is exponential with full jitter and never shorter than that.
 */
export class RetryLaterError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs: number | undefined,
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

export function backoffDelay(policy: RetryPolicy, attemptsMade: number, err: unknown, random: () => number = Math.random): number {
  const exp = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, attemptsMade - 1));
  const jittered = exp / 2 + random() * (exp / 2);
  const asked = err instanceof RetryLaterError && err.retryAfterMs ? err.retryAfterMs : 0;
  return Math.round(Math.max(jittered, Math.min(asked, policy.maxDelayMs)));
}
