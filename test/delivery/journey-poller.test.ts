import { describe, expect, it } from 'vitest';
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

  it('polls once more, at once, after a poll that a tick came during', async () => {
    const began: number[] = [];
    let finish!: () => void;
    const steps: JourneySteps = {
      runDue: async () => {
        began.push(performance.now());
        // the first poll runs until the test lets it end, past the next tick
        if (began.length === 1) await new Promise<void>((resolve) => (finish = resolve));
        return 0;
      },
      msUntilNextDue: () => null,
    };
    const poller = startJourneyPoller({ steps, log, intervalMs: 200 });
    await new Promise((r) => setTimeout(r, 500));
    // the tick at 400 ms came while the first poll (from 200 ms) ran: it began none of its own
    expect(began).toHaveLength(1);
    const finishedAt = performance.now();
    finish();
    await new Promise((r) => setTimeout(r, 50));
    // the poll the tick asked for, right after the first ended, not at the next tick (600 ms)
    expect(began).toHaveLength(2);
    expect(began[1]! - finishedAt).toBeLessThan(50);
    await poller.stop();
  });

  it('wakes at the next due moment when it comes before the next tick, and not after stop', async () => {
    const began: number[] = [];
    const t0 = performance.now();
    const steps: JourneySteps = {
      runDue: async () => (began.push(performance.now() - t0), 0),
      msUntilNextDue: () => (began.length === 1 ? 150 : null),
    };
    const poller = startJourneyPoller({ steps, log, intervalMs: 1000 });
    await new Promise((r) => setTimeout(r, 1400));
    await poller.stop();
    const stoppedAt = began.length;
    await new Promise((r) => setTimeout(r, 1100));
    // the tick at 1 s, the wake-up 150 ms after it, the tick at 2 s never (stopped at 1.4 s)
    expect(began).toHaveLength(2);
    expect(began[1]! - began[0]!).toBeGreaterThanOrEqual(150);
    expect(began[1]! - began[0]!).toBeLessThan(400);
    expect(began.length).toBe(stoppedAt);
  });

  it("sets no wake-up from a wake-up's poll: one a tick at most", async () => {
    const began: number[] = [];
    const t0 = performance.now();
    // something always comes due 50 ms on (a stream of entrants, or a paused journey's)
    const steps: JourneySteps = { runDue: async () => (began.push(performance.now() - t0), 0), msUntilNextDue: () => 50 };
    const poller = startJourneyPoller({ steps, log, intervalMs: 1000 });
    await new Promise((r) => setTimeout(r, 1500));
    await poller.stop();
    // the tick at 1 s and its wake-up 50 ms on; a chain of them would have polled every 50 ms since
    expect(began).toHaveLength(2);
    expect(began[1]! - began[0]!).toBeLessThan(300);
  });
});
