import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, useHarness, type Harness } from '../helpers/harness.js';
import { journeyApi } from '../http/journey-support.js';
import { JourneyEngine } from '../../src/services/journey-engine.js';
import { createRepositories } from '../../src/services/deps.js';
import { createLogger } from '../../src/platform/logger.js';

type App = Awaited<ReturnType<Harness['createApp']>>;

/** When the engine tells the poller the next entrant comes due (JourneyEngine.msUntilNextDue), read by its polls. */
describe('journeys: the next due moment', () => {
  const clock = new ManualClock(new Date('2026-06-01T10:00:00Z'));
  const h = useHarness({ clock });
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });
  const { create, device, enter } = journeyApi(h, () => app);

  it("is the waiting entrants' earliest due moment, as the last poll read it", async () => {
    const { notifications, messages } = h.ctx.services;
    const deps = { db: h.db.db, repos: createRepositories(), notifications, messages, clock, log: createLogger('silent'), batchSize: 100 };
    const engine = new JourneyEngine(deps);
    const later = await create({ name: 'Later', trigger: { api: true }, steps: [{ id: 'wait', type: 'delay', duration: '3m' }] });
    const sooner = await create({ name: 'Sooner', trigger: { api: true }, steps: [{ id: 'wait', type: 'delay', duration: '90s' }] });
    expect(await engine.runDue()).toBe(0);
    expect(engine.msUntilNextDue()).toBeNull();
    // entered through the API: the next poll reads their delays' ends
    await enter(later.id, await device());
    await enter(sooner.id, await device());
    expect(engine.msUntilNextDue()).toBeNull();
    expect(await engine.runDue()).toBe(0);
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
    expect(engine.msUntilNextDue()).toBeNull();
  });
});
