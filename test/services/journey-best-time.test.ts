import { beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { ManualClock, useHarness, type Harness } from '../helpers/harness.js';
import { journeyApi } from '../http/journey-support.js';

type App = Awaited<ReturnType<Harness['createApp']>>;
const T0 = '2026-06-10T10:00:00Z';

/**
 * A delay until the best time: each device's likeliest local hour from its own sessions of the last weeks, the
 * default hour where it has none, within the step's window. The sessions are stored at chosen times.
 */
describe('journeys: a delay until the best time', () => {
  const clock = new ManualClock(new Date(T0));
  const h = useHarness({ clock });
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });

  const runDue = () => h.ctx.services.journeyEngine.runDue();
  const api = journeyApi(h, () => app);
  /** A session as a report stores it (the reports' own check of their dates reads the real time, not the test's clock). */
  const session = async (deviceId: string, startedAt: string) => {
    await h.db.db
      .insertInto('app_sessions')
      .values({ device_id: deviceId, id: randomUUID(), app_id: app.app.id, started_at: new Date(startedAt) })
      .execute();
  };
  const dueAt = async (journeyId: string, deviceId: string) => {
    const [entry] = await api.entrants(journeyId, `device:${deviceId}`);
    return { phase: entry!.phase, due_at: entry!.due_at, until: entry!.history.at(-1)!.until };
  };
  const bestTimeJourney = async (within?: string) =>
    api.create({
      name: 'Best',
      trigger: { api: true },
      steps: [
        { id: 'best', type: 'delay', until: 'best_time', ...(within && { within }) },
        { id: 'nudge', type: 'send', notification: { payload: { alert: 'now is good' } } },
      ],
    });
  const { enter } = api;

  it('waits for the local hour the device is most often active in, in its own zone, and then goes on', async () => {
    clock.set(T0);
    // in New York (UTC-4 in June): mostly at 19:xx, once at 08:xx
    const evening = await api.device({ time_zone: 'America/New_York' });
    for (const day of ['06-05', '06-07', '06-08']) await session(evening, `2026-${day}T23:20:00Z`);
    await session(evening, '2026-06-09T12:10:00Z');
    const j = await bestTimeJourney();
    await enter(j.id, evening);
    await runDue();
    // 19:00 in New York
    expect(await dueAt(j.id, evening)).toEqual({ phase: 'waiting', due_at: '2026-06-10T23:00:00.000Z', until: '2026-06-10T23:00:00.000Z' });
    clock.set('2026-06-10T22:59:00Z');
    await runDue();
    expect((await api.stepCounts(j.id)).nudge).toMatchObject({ entered: 0 });
    clock.set('2026-06-10T23:00:00Z');
    await runDue();
    await runDue();
    expect((await api.stepCounts(j.id)).nudge).toMatchObject({ entered: 1, sent: 1 });
  });

  it('a device with no activity in the last four weeks goes at the default hour (10:00 local)', async () => {
    clock.set(T0);
    const [fresh, tokyo] = [await api.device({ time_zone: 'UTC' }), await api.device({ time_zone: 'Asia/Tokyo' })];
    // five weeks back: too old to count
    await session(fresh, '2026-05-06T15:30:00Z');
    const j = await bestTimeJourney();
    await enter(j.id, fresh);
    await enter(j.id, tokyo);
    await runDue();
    // T0 is 10:00 UTC exactly: the next 10:00 is tomorrow's
    expect((await dueAt(j.id, fresh)).due_at).toBe('2026-06-11T10:00:00.000Z');
    // 10:00 in Tokyo (UTC+9)
    expect((await dueAt(j.id, tokyo)).due_at).toBe('2026-06-11T01:00:00.000Z');
  });

  it('within a short window: the best hour in it, else the first hour that starts in it', async () => {
    clock.set(T0);
    const [late, early] = [await api.device({ time_zone: 'UTC' }), await api.device({ time_zone: 'UTC' })];
    // late: active at 13:xx and 20:xx; early: only at 21:xx, outside a 4h window
    await session(late, '2026-06-08T13:30:00Z');
    await session(late, '2026-06-08T20:30:00Z');
    await session(late, '2026-06-09T20:30:00Z');
    await session(early, '2026-06-09T21:05:00Z');
    const j = await bestTimeJourney('4h');
    await enter(j.id, late);
    await enter(j.id, early);
    await runDue();
    expect((await dueAt(j.id, late)).due_at).toBe('2026-06-10T13:00:00.000Z');
    expect((await dueAt(j.id, early)).due_at).toBe('2026-06-10T11:00:00.000Z');
  });
});
