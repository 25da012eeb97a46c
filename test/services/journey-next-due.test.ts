import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, useHarness, type Harness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';
import { journeyApi } from '../http/journey-support.js';
import { JourneyEngine } from '../../src/services/journey-engine.js';
import { createRepositories } from '../../src/services/deps.js';
import { createLogger } from '../../src/platform/logger.js';

type App = Awaited<ReturnType<Harness['createApp']>>;
const MINUTE = 60_000;

/** When the engine tells the poller the next entrant comes due (JourneyEngine.msUntilNextDue), read by its polls. */
describe('journeys: the next due moment', () => {
  const clock = new ManualClock(new Date('2026-06-01T10:00:00Z'));
  const h = useHarness({ clock });
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });
  const { create, device, enter } = journeyApi(h, () => app);
  /** An engine that looks `aheadMs` past now for the next due moment, as one polling at that interval does. */
  const engineLooking = (aheadMs: number) => {
    const { notifications, messages } = h.ctx.services;
    const log = createLogger('silent');
    return new JourneyEngine({
      db: h.db.db,
      repos: createRepositories(),
      notifications,
      messages,
      clock,
      log,
      batchSize: 100,
      dueAheadMs: aheadMs,
    });
  };
  const delayed = async (name: string, duration: string) => {
    const j = await create({ name, trigger: { api: true }, steps: [{ id: 'wait', type: 'delay', duration }] });
    await enter(j.id, await device());
    return j;
  };

  it("is the earliest due moment of an active journey's entrants within the look ahead, as the last poll read it", async () => {
    const engine = engineLooking(10 * MINUTE);
    const paused = await delayed('Paused', '1m');
    await delayed('Later', '3m');
    await delayed('Sooner', '90s');
    await delayed('Too far', '1h');
    expect((await call(h, 'POST', `/v6/journeys/${paused.id}/pause`, app.keys.write)).statusCode).toBe(200);
    expect(engine.msUntilNextDue()).toBeNull();
    expect(await engine.runDue()).toBe(0);
    // the paused journey's entrant, due first, is not one a worker would move
    expect(engine.msUntilNextDue()).toBe(90_000);
    // as time goes on, from the same reading
    clock.advance(30_000);
    expect(engine.msUntilNextDue()).toBe(60_000);
    // the first delay ends: the poll moves it, and reads the other
    clock.advance(60_000);
    expect(await engine.runDue()).toBe(1);
    expect(engine.msUntilNextDue()).toBe(90_000);
    clock.advance(90_000);
    expect(await engine.runDue()).toBe(1);
    // the hour's delay is beyond the look ahead
    expect(engine.msUntilNextDue()).toBeNull();
    clock.advance(60 * MINUTE);
    expect(await engine.runDue()).toBe(1);
  });

  it('is read beside the groups due now', async () => {
    const now = await delayed('Due now', '1m');
    await delayed('Due soon', '2m');
    clock.advance(MINUTE);
    const due = await createRepositories().journeyEntrants.dueGroups(h.db.db, { now: clock.now(), aheadMs: 5 * MINUTE, limit: 50 });
    expect(due.groups.map((g) => g.journey_id)).toEqual([now.id]);
    // the other's, a minute on
    expect(due.nextDue?.getTime()).toBe(clock.now().getTime() + MINUTE);
  });
});
