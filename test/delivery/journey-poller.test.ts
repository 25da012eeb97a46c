import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { sql } from 'kysely';
import { useHarness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';
import { startJourneyPoller, type JourneySteps } from '../../src/delivery/journeys.js';
import { createLogger } from '../../src/platform/logger.js';

type Harness = ReturnType<typeof useHarness>;

/** A journey of `steps` through the API, a device entered into it; answers the journey's notifications as they are made. */
async function enterJourney(h: Harness, name: string, steps: unknown[]) {
  const app = await h.createApp();
  const journey = { name, trigger: { api: true }, steps };
  const j = (await call(h, 'POST', '/v6/journeys', app.keys.write, { journey })).json().journey;
  const device = (await call(h, 'POST', '/v6/devices', app.keys.write, { device: { platform: 'ios' } })).json().device;
  expect((await call(h, 'POST', `/v6/journeys/${j.id}/entries`, app.keys.write, { device_id: device.id })).statusCode).toBe(202);
  const sent = () =>
    h.db.db
      .selectFrom('notifications')
      .select(['id', 'created_at'])
      .where(sql<boolean>`request->'journey'->>'id' = ${j.id}`)
      .orderBy('created_at')
      .execute();
  const until = async (n: number) => {
    const deadline = Date.now() + 15_000;
    while ((await sent()).length < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    return sent();
  };
  return { app, j, until };
}

describe('journeys: the workers poll for due entrants', () => {
  const h = useHarness({ workers: true, env: { JOURNEY_POLL_MS: '50' } });

  it('a worker process runs a due step without being asked', async () => {
    const { app, j, until } = await enterJourney(h, 'Polled', [{ id: 'hi', type: 'send', notification: { payload: { alert: 'hi' } } }]);
    expect(await until(1)).toHaveLength(1);
    const counts = (await call(h, 'GET', `/v6/journeys/${j.id}`, app.keys.read)).json().journey.counts;
    expect(counts.steps[0]).toMatchObject({ id: 'hi', entered: 1, waiting: 0, sent: 1 });
  });
});

describe('journeys: a step due before the next poll', () => {
  // polls 3 s apart: a delay of 1 s after the first send would end at the next poll, 3 s after it, without the wake-up
  const h = useHarness({ workers: true, env: { JOURNEY_POLL_MS: '3000' } });

  it('runs at its due moment, not at the next poll', async () => {
    const { until } = await enterJourney(h, 'On time', [
      { id: 'first', type: 'send', notification: { payload: { alert: 'first' } } },
      { id: 'wait', type: 'delay', duration: '1s' },
      { id: 'second', type: 'send', notification: { payload: { alert: 'second' } } },
    ]);
    const [first, second] = await until(2);
    const gap = second!.created_at.getTime() - first!.created_at.getTime();
    expect(gap).toBeGreaterThanOrEqual(1000);
    expect(gap).toBeLessThan(2000);
  });
});

describe('the journey poller', () => {
  const log = createLogger('silent');
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** Steps whose polls are recorded (ms on the fake clock); `hold` keeps a poll running until its release is called. */
  const recorded = (next: (polls: number) => number | null, hold = (_poll: number) => false) => {
    const began: number[] = [];
    const releases: (() => void)[] = [];
    const steps: JourneySteps = {
      runDue: async () => {
        began.push(Date.now());
        if (hold(began.length)) await new Promise<void>((resolve) => releases.push(resolve));
        return 0;
      },
      msUntilNextDue: () => next(began.length),
    };
    return { steps, began, release: () => releases.shift()!() };
  };

  it('polls once more, at once, after a poll that a tick came during', async () => {
    const { steps, began, release } = recorded(
      () => null,
      (poll) => poll === 1,
    );
    const t0 = Date.now();
    const poller = startJourneyPoller({ steps, log, intervalMs: 200 });
    await vi.advanceTimersByTimeAsync(500);
    // the tick at 400 ms came while the first poll (from 200 ms) ran: it began none of its own
    expect(began.map((t) => t - t0)).toEqual([200]);
    release();
    await vi.advanceTimersByTimeAsync(0);
    // the poll the tick asked for, right after the first ended, not at the next tick (600 ms)
    expect(began.map((t) => t - t0)).toEqual([200, 500]);
    await poller.stop();
  });

  it('wakes at the next due moment when it comes before the next tick', async () => {
    const { steps, began } = recorded((polls) => (polls === 1 ? 150 : null));
    const t0 = Date.now();
    const poller = startJourneyPoller({ steps, log, intervalMs: 1000 });
    await vi.advanceTimersByTimeAsync(1500);
    // the tick at 1 s, and the wake-up 150 ms (and its margin) after it
    expect(began.map((t) => t - t0)).toEqual([1000, 1155]);
    await poller.stop();
  });

  it('begins nothing after stop: not the wake-up set, nor the poll a tick asked for', async () => {
    const woken = recorded(() => 300);
    const t0 = Date.now();
    const first = startJourneyPoller({ steps: woken.steps, log, intervalMs: 1000 });
    await vi.advanceTimersByTimeAsync(1100);
    await first.stop();
    await vi.advanceTimersByTimeAsync(2000);
    expect(woken.began.map((t) => t - t0)).toEqual([1000]);

    const held = recorded(
      () => null,
      (poll) => poll === 1,
    );
    const second = startJourneyPoller({ steps: held.steps, log, intervalMs: 200 });
    await vi.advanceTimersByTimeAsync(500);
    const stopped = second.stop();
    held.release();
    await stopped;
    await vi.advanceTimersByTimeAsync(1000);
    expect(held.began).toHaveLength(1);
  });

  it("sets a wake-up's next no sooner than a quarter interval on", async () => {
    // something comes due 50 ms on, every time (a stream of entrants)
    const { steps, began } = recorded(() => 50);
    const t0 = Date.now();
    const poller = startJourneyPoller({ steps, log, intervalMs: 1000 });
    await vi.advanceTimersByTimeAsync(1999);
    await poller.stop();
    // the tick at 1 s, its wake-up 50 ms on, then one every 250 ms: not a poll every 50
    expect(began.map((t) => t - t0)).toEqual([1000, 1055, 1310, 1565, 1820]);
  });
});
