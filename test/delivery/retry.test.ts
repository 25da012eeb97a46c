import { describe, expect, it } from 'vitest';
import { backoffDelay, RetryLaterError } from '../../src/delivery/retry.js';

const policy = { attempts: 10, baseDelayMs: 1000, maxDelayMs: 60_000 };
const half = () => 0.5;

describe('backoffDelay and the expiry', () => {
  it('never waits past the expiry, however long the backoff or Retry-After', () => {
    expect(backoffDelay(policy, 5, new RetryLaterError('x', undefined), half)).toBe(12_000);
    expect(backoffDelay(policy, 5, new RetryLaterError('x', undefined, 3000), half)).toBe(3000);
    expect(backoffDelay(policy, 1, new RetryLaterError('x', 30_000, 2000), half)).toBe(2000);
    // rounded up, so the retry comes back at or after the expiry and finds it expired
    expect(backoffDelay(policy, 5, new RetryLaterError('x', undefined, 1.2), half)).toBe(2);
    expect(backoffDelay(policy, 5, new RetryLaterError('x', undefined, 0), half)).toBe(0);
  });

  it('keeps the backoff when the expiry is further away', () => {
    expect(backoffDelay(policy, 1, new RetryLaterError('x', undefined, 60_000), half)).toBe(750);
    expect(backoffDelay(policy, 1, new RetryLaterError('x', 30_000, 60_000), half)).toBe(30_000);
  });
});
