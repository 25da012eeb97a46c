import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, useHarness, type Harness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';
import { journeyApi } from '../http/journey-support.js';
import { JourneyEngine } from '../../src/services/journey-engine.js';
import { createRepositories } from '../../src/services/deps.js';
import { createLogger } from '../../src/platform/logger.js';

type App = Awaited<ReturnType<Harness['createApp']>>;
const HOUR = 3_600_000;

/**
 * How the engine runs the due batches of a poll (JourneyEngine.runGroups): two at once, of one group or of several,
 * each runner beginning the next as soon as its own ends; a group's 20 a round at most, only while they come full,
 * and before one has come back only as many at once as the poll saw entrants for.
 */
describe("journeys: a group's due batches", () => {
  const clock = new ManualClock(new Date('2026-06-01T10:00:00Z'));
  const h = useHarness({ clock });
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });
  const { create, stepCounts, device } = journeyApi(h, () => app);

  /** A journey with `n` device entrants whose delay has ended. */
  const dueEntrants = async (name: string, n: number) => {
    const j = await create({ name, trigger: { api: true }, steps: [{ id: 'wait', type: 'delay', duration: '1h' }] });
    const ids = await Promise.all(Array.from({ length: n }, () => device()));
    for (const id of ids) await call(h, 'POST', `/v6/journeys/${j.id}/entries`, app.keys.write, { device_id: id });
    clock.advance(2 * HOUR);
    return j;
  };

  /** An engine of batches of 2 that runs `around` around each batch it begins (its number, from 1). */
  const watched = (around: (k: number, run: () => Promise<number>) => Promise<number>) => {
    let begun = 0;
    class Watched extends JourneyEngine {
      override async runGroup(...args: Parameters<JourneyEngine['runGroup']>): Promise<number> {
        return around(++begun, () => super.runGroup(...args));
      }
    }
    const { notifications, messages } = h.ctx.services;
    const deps = { db: h.db.db, repos: createRepositories(), notifications, messages, clock, log: createLogger('silent'), batchSize: 2 };
    return { engine: new Watched(deps), begun: () => begun };
  };

  it('two at once from the first, never more, the next begun as soon as one ends, 20 a round', async () => {
    const j = await dueEntrants('Runners', 41);
    // the second batch (the other runner's first) is held until the first runner has begun three more after its
    // own, which two batches at a time in lockstep never do
    let running = 0;
    let most = 0;
    const atBegin: number[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const { engine, begun } = watched(async (k, run) => {
      atBegin.push(running);
      most = Math.max(most, ++running);
      if (k === 5) release();
      if (k === 2) await Promise.race([held, rejectAfter(10_000, 'batch 2 held: no batch began while it waited')]);
      try {
        return await run();
      } finally {
        running--;
      }
    });
    expect(await engine.runDue()).toBe(41);
    // the poll saw 41 due: the second begins beside the first
    expect(atBegin.slice(0, 2)).toEqual([0, 1]);
    expect(most).toBe(2);
    // a round of 20 full batches, then the one left alone (it is not full: no more begin)
    expect(begun()).toBe(20 + 1);
    expect((await stepCounts(j.id)).wait).toMatchObject({ entered: 41, waiting: 0, passed: 41 });
  });

  it('groups of a few entrants run at once, and a group begins no batch beside its first for entrants it has not', async () => {
    const [a, b] = [await dueEntrants('Few A', 1), await dueEntrants('Few B', 3)];
    // the first batch is held until another begins: run group by group, none would
    let release!: () => void;
    const second = new Promise<void>((resolve) => (release = resolve));
    const ran: number[] = [];
    const { engine, begun } = watched(async (k, run) => {
      if (k === 2) release();
      if (k === 1) await Promise.race([second, rejectAfter(10_000, 'batch 1 held: no other batch began beside it')]);
      const n = await run();
      ran.push(n);
      return n;
    });
    expect(await engine.runDue()).toBe(4);
    // A's one entrant in one batch; B's 3 in two (2 and 1), and no third begun beside them for entrants not seen
    expect(begun()).toBe(3);
    expect(ran.sort()).toEqual([1, 1, 2]);
    expect((await stepCounts(a.id)).wait).toMatchObject({ entered: 1, waiting: 0, passed: 1 });
    expect((await stepCounts(b.id)).wait).toMatchObject({ entered: 3, waiting: 0, passed: 3 });
  });

  it('a batch that fails ends the poll: the other runner begins no more', async () => {
    const j = await dueEntrants('Failing', 20);
    let release!: () => void;
    const failed = new Promise<void>((resolve) => (release = resolve));
    const { engine, begun } = watched(async (k, run) => {
      if (k === 3) {
        release();
        throw new Error('batch 3 failed');
      }
      // the other runner's batch ends after the failure
      if (k === 2) await failed;
      return run();
    });
    await expect(engine.runDue()).rejects.toThrow('batch 3 failed');
    await new Promise((r) => setTimeout(r, 200));
    expect(begun()).toBe(3);
    // batches 1 and 2 moved their entrants; the rest are due at the next poll
    expect((await stepCounts(j.id)).wait).toMatchObject({ entered: 20, waiting: 16, passed: 4 });
  });
});

function rejectAfter(ms: number, message: string): Promise<never> {
  return new Promise((_, reject) => setTimeout(() => reject(new Error(message)), ms));
}
