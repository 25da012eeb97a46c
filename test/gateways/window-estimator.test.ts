import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { WindowEstimator } from '../../src/gateways/stream-pool.js';

const MIN = 200;
const MAX = 2500;
const QUEUEING_MS = 1000;

const estimator = (origin: string) => new WindowEstimator({ min: MIN, max: MAX, queueingMs: QUEUEING_MS, probeWindow: 10, origin });

/** A gateway 100 ms away: every chunk in the window is answered within the tick, the window is what limits. */
function busyTick(e: WindowEstimator, rttMs = 100): void {
  vi.advanceTimersByTime(100);
  const now = performance.now();
  e.record(e.window, rttMs, now - rttMs);
}

/** One-device sends every 500 ms: each tick's rate is a trickle, and the window falls back to the floor. */
function trickle(e: WindowEstimator, sends: number): void {
  for (let i = 0; i < sends; i++) {
    vi.advanceTimersByTime(500);
    e.record(1, 100, performance.now() - 100);
  }
}

function broadcastToMax(e: WindowEstimator): number[] {
  const windows: number[] = [];
  e.burst();
  for (let i = 0; i < 6; i++) windows.push((busyTick(e), e.window));
  return windows;
}

describe('WindowEstimator', () => {
  beforeEach(() => void vi.useFakeTimers({ toFake: ['performance'] }));
  afterEach(() => void vi.useRealTimers());

  it('starts a broadcast after a quiet spell at half the last good window, then grows', () => {
    const e = estimator('https://quiet.test');
    expect(e.window).toBe(MIN);
    expect(broadcastToMax(e)).toEqual([400, 800, 1600, 2500, 2500, 2500]);

    vi.advanceTimersByTime(30_000);
    trickle(e, 20);
    expect(e.window).toBe(MIN); // what the sends between broadcasts leave

    e.burst();
    expect(e.window).toBe(1250);
    busyTick(e);
    expect(e.window).toBe(2500);
  });

  it('a gateway built anew for the same origin starts a broadcast from what the process learned', () => {
    const first = estimator('https://shared.test');
    broadcastToMax(first);

    const again = estimator('https://shared.test');
    expect(again.window).toBe(MIN);
    again.burst();
    expect(again.window).toBe(1250);

    const elsewhere = estimator('https://elsewhere.test');
    elsewhere.burst();
    expect(elsewhere.window).toBe(MIN); // nothing learned for this origin: the floor, as before
  });

  /** Half a tick's chunks answered past queueingMs: they waited in a queue. */
  const queueAnswers = (e: ReturnType<typeof estimator>) => {
    vi.advanceTimersByTime(50);
    e.record(1250, 100, performance.now() - 100);
    vi.advanceTimersByTime(50);
    e.record(1250, QUEUEING_MS + 500, performance.now() - QUEUEING_MS - 500);
  };

  it('halves the window when answers queue, and remembers the smaller window as the good one', () => {
    const e = estimator('https://queueing.test');
    broadcastToMax(e);
    queueAnswers(e);
    expect(e.window).toBe(1250);

    vi.advanceTimersByTime(30_000);
    trickle(e, 20);
    e.burst();
    expect(e.window).toBe(625);
  });

  it('opens a broadcast to what the gateway offers, within max and the ceiling queueing left', () => {
    const e = estimator('https://offered.test');
    trickle(e, 20); // one-device sends: a round trip known, no window learned
    e.burst();
    expect(e.window).toBe(MIN);
    e.burst(1000);
    expect(e.window).toBe(1000);
    busyTick(e);
    expect(e.window).toBe(2000);

    const wide = estimator('https://offered-wide.test');
    trickle(wide, 20);
    wide.burst(4000);
    expect(wide.window).toBe(MAX);
    // answers queued: the window halves, and an offer does not open it past the ceiling that left
    queueAnswers(wide);
    expect(wide.window).toBe(1250);
    wide.burst(4000);
    expect(wide.window).toBe(1250);
  });

  it('opens to the offer only until a broadcast is measured: its later batches do not reopen the window', () => {
    const e = estimator('https://near.test');
    trickle(e, 20);
    e.burst(2000);
    expect(e.window).toBe(2000);
    busyTick(e, 1); // a gateway 1 ms away needs 40 streams for this rate: the floor
    expect(e.window).toBe(MIN);
    e.burst(2000);
    expect(e.window).toBe(MIN);
  });

  it('does not open the window for a burst while it probes the round trip', () => {
    const e = estimator('https://probe.test');
    broadcastToMax(e);
    vi.advanceTimersByTime(5_000);
    busyTick(e, 300); // the fastest chunk of a tick at 3 × the round trip: the gateway may have moved
    expect(e.window).toBe(10);
    e.burst();
    expect(e.window).toBe(10);
    vi.advanceTimersByTime(300);
    e.record(10, 300, performance.now() - 300); // the probe's chunk: 300 ms is the distance now
    expect(e.window).toBeGreaterThan(MIN);
  });
});
