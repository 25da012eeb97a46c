import { describe, expect, it } from 'vitest';
import { StreamPool } from '../../src/gateways/stream-pool.js';

/** A stand-in connection: what its peer announces, and the most streams it carried at once. */
class FakeConnection {
  active = 0;
  peak = 0;
  constructor(public window: number | undefined) {}
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function pool(
  windows: (number | undefined)[],
  options: { maxConnections: number; maxInFlight: number; minInFlight?: number; chunkSize?: number; queueingMs?: number; origin?: string },
  roundTripMs = 2,
  /** Tokens the gateway answers per millisecond; beyond that, streams queue at the gateway. */
  capacityPerMs = Infinity,
  /** Extra time an answer takes now (a stalled host, a handshake); none by default. */
  delayMs: (c: FakeConnection) => number = () => 0,
) {
  const opened: FakeConnection[] = [];
  const p = new StreamPool(
    () => {
      const c = new FakeConnection(windows[opened.length]);
      opened.push(c);
      return c;
    },
    (c) => c.window,
    options,
  );
  let inFlight = 0;
  let peak = 0;
  let gatewayFreeAt = 0;
  const send = async (c: FakeConnection, chunk: number[]) => {
    c.active += chunk.length;
    inFlight += chunk.length;
    c.peak = Math.max(c.peak, c.active);
    peak = Math.max(peak, inFlight);
    const now = performance.now();
    gatewayFreeAt = Math.max(now, gatewayFreeAt) + chunk.length / capacityPerMs;
    await sleep(delayMs(c) + roundTripMs + (gatewayFreeAt - now));
    c.active -= chunk.length;
    inFlight -= chunk.length;
  };
  return { p, opened, send, peak: () => peak };
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

describe('StreamPool', () => {
  it('stays on one connection while the peer allows enough streams', async () => {
    const { p, opened, send } = pool([1000, 1000], { maxConnections: 4, maxInFlight: 500, minInFlight: 500 });
    await p.run(range(5000), send);
    expect(opened).toHaveLength(1);
    expect(opened[0]!.peak).toBe(500); // the in-flight bound, reached
  });

  it('keeps a near gateway at the floor: more streams would only queue', async () => {
    // 1 ms away and answering 20 pushes a millisecond: 20 streams keep it busy, more only wait at the gateway
    const { p, opened, send, peak } = pool([1000], { maxConnections: 4, maxInFlight: 2000 }, 1, 20);
    await p.run(range(20_000), send);
    expect(opened).toHaveLength(1);
    expect(peak()).toBe(200);
    expect(p.window).toBeLessThan(400);
  });

  it('widens the window for a far gateway, up to maxInFlight, over more connections as they fill', async () => {
    const { p, opened, send, peak } = pool([1000, 1000, 1000], { maxConnections: 3, maxInFlight: 2500 }, 60);
    const t0 = Date.now();
    await p.run(range(40_000), send);
    // at the 200 it starts with, 40,000 pushes would take 200 round trips (12 s)
    expect(Date.now() - t0).toBeLessThan(4000);
    expect(peak()).toBeGreaterThan(2000);
    expect(peak()).toBeLessThanOrEqual(2500);
    expect(opened).toHaveLength(3);
    expect(opened.map((c) => c.peak).every((n) => n <= 1000)).toBe(true);
  });

  it('measures the round trip again when the gateway moves away: one-device sends at 1 ms do not pin a broadcast at 60', async () => {
    let distanceMs = 0;
    const { p, send, peak } = pool([1000, 1000, 1000], { maxConnections: 3, maxInFlight: 2500 }, 1, Infinity, () => distanceMs);
    for (let i = 0; i < 50; i++) await p.run(range(1), send);
    distanceMs = 60;
    const t0 = Date.now();
    await p.run(range(40_000), send);
    // pinned at the floor of 200 by the 1 ms learned before, 40,000 pushes take 200 round trips (12 s)
    expect(Date.now() - t0).toBeLessThan(4500);
    expect(peak()).toBeGreaterThan(2000);
  });

  it('a broadcast on a gateway built anew for the same origin starts at half the window learned before', async () => {
    const options = { maxConnections: 3, maxInFlight: 2500, origin: 'https://far.stream-pool.test' };
    const first = pool([1000, 1000, 1000], options, 60);
    await first.p.run(range(40_000), first.send);
    expect(first.p.window).toBeGreaterThan(1000);

    const again = pool([1000, 1000, 1000], options, 60);
    expect(again.p.window).toBe(200);
    const running = again.p.run(range(40_000), again.send);
    expect(again.p.window).toBeGreaterThan(400); // half of over 1,000, not the floor of 200
    await running;
  });

  it('backs off while answers wait in a queue: a host too busy to answer quickly does not open the window', async () => {
    // 5 ms away, 2 pushes a millisecond; for the first 2.5 s every answer also waits 400 ms (a saturated host),
    // more than the 300 ms no gateway is away: measured from those, the window would open to 1,600 streams
    // that wait 800 ms in the gateway's queue on top
    const t0 = performance.now();
    let stalledPeak = 0;
    let inFlight = 0;
    const { p, send } = pool([1000, 1000], { maxConnections: 2, maxInFlight: 2000, queueingMs: 300 }, 5, 2, () =>
      performance.now() - t0 < 2500 ? 400 : 0,
    );
    await p.run(range(8000), async (c, chunk) => {
      inFlight += chunk.length;
      if (performance.now() - t0 < 2500) stalledPeak = Math.max(stalledPeak, inFlight);
      await send(c, chunk);
      inFlight -= chunk.length;
    });
    expect(stalledPeak).toBeLessThanOrEqual(400);
  });

  it('opens another connection when the open ones are full, each carrying at most what its peer announced', async () => {
    const { p, opened, send, peak } = pool([30, 50, 20], { maxConnections: 3, maxInFlight: 1000 });
    await p.run(range(2000), send);
    expect(opened).toHaveLength(3);
    expect(opened.map((c) => c.peak)).toEqual([30, 50, 20]);
    expect(peak()).toBe(100);
  });

  it('does not open another connection while one is still connecting (its window unknown)', async () => {
    const { p, opened, send } = pool([undefined, 100], { maxConnections: 4, maxInFlight: 1000 });
    await p.run(range(1000), send);
    expect(opened).toHaveLength(1);
    expect(opened[0]!.peak).toBe(10); // one chunk at a time until the peer's settings are known
  });

  it('sends more as soon as the peer announces its window, without waiting for the first answer', async () => {
    const opened: FakeConnection[] = [];
    const p = new StreamPool(
      () => {
        const c = new FakeConnection(undefined);
        opened.push(c);
        setTimeout(() => (c.window = 100), 20); // the peer's SETTINGS arrive
        return c;
      },
      (c) => c.window,
      { maxConnections: 1, maxInFlight: 1000 },
    );
    const started: number[] = [];
    let firstAnswered = Infinity;
    const t0 = Date.now();
    // a slow gateway: every answer takes 2 s (long enough that a stalled test process still sees the order)
    await p.run(range(100), async () => {
      started.push(Date.now() - t0);
      await sleep(2000);
      firstAnswered = Math.min(firstAnswered, Date.now() - t0);
    });
    expect(started).toHaveLength(10);
    expect(Math.max(...started)).toBeLessThan(firstAnswered); // all ten chunks left before the first one was answered
  });

  it('shares the bounds across concurrent runs, and finishes every chunk', async () => {
    const { p, opened, send, peak } = pool([40, 40], { maxConnections: 2, maxInFlight: 60 });
    const done: number[] = [];
    await Promise.all([1, 2, 3].map(() => p.run(range(300), async (c, chunk) => (await send(c, chunk), void done.push(...chunk)))));
    expect(done).toHaveLength(900);
    expect(peak()).toBeLessThanOrEqual(60);
    expect(opened).toHaveLength(2);
  });

  it('a chunk larger than a tiny window still goes, on an idle connection', async () => {
    const { p, send } = pool([1], { maxConnections: 1, maxInFlight: 100, chunkSize: 10 });
    const sent: number[] = [];
    await p.run(range(25), async (c, chunk) => (await send(c, chunk), void sent.push(...chunk)));
    expect(sent.sort((a, b) => a - b)).toEqual(range(25));
  });
});
