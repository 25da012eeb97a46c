import { beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { ManualClock, useHarness, type Harness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';
import { journeyApi, applyEvents } from '../http/journey-support.js';
import { createLogger } from '../../src/platform/logger.js';
import { maintainPartitions, retentionOf } from '../../src/delivery/retention.js';
import { createRepositories } from '../../src/services/deps.js';

type App = Awaited<ReturnType<Harness['createApp']>>;
const HOUR = 3_600_000;
const T0 = '2026-06-01T10:00:00Z';

/**
 * The first round's loose ends: a device that gets a user_id after entering, `never` across retention, counts of
 * earlier versions' steps, and an event that comes between entering and the wait beginning.
 */
describe('journeys: loose ends', () => {
  const clock = new ManualClock(new Date(T0));
  const h = useHarness({ clock, env: { RETENTION_JOURNEY_ENTRANTS_DAYS: '3' } });
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });
  const runDue = () => h.ctx.services.journeyEngine.runDue();
  const api = journeyApi(h, () => app);
  const { device, event, stepCounts } = api;
  const enter = async (journeyId: string, deviceId: string) =>
    (await call(h, 'POST', `/v6/journeys/${journeyId}/entries`, app.keys.write, { device_id: deviceId })).json().outcome as string;
  const sentTo = async (journeyId: string) =>
    (
      await h.db.db
        .selectFrom('notifications')
        .select('request')
        .where(sql<boolean>`request->'journey'->>'id' = ${journeyId}`)
        .execute()
    ).flatMap((r) => (r.request as { to: { criteria: string[] }[] }).to[0]!.criteria);
  const waitThenThank = (trigger: Record<string, unknown>) => ({
    name: 'J',
    trigger,
    exit_on: ['purchase'],
    steps: [
      { id: 'opened', type: 'wait_for', event: 'app_open', timeout: '1h', on_event: 'thanks', on_timeout: 'end' },
      { id: 'thanks', type: 'send', notification: { payload: { alert: 'thanks' } } },
    ],
  });

  it('a device that gets a user_id after entering still reaches its entrant with its events, and its user’s', async () => {
    clock.set(T0);
    const j = await api.create(waitThenThank({ event: 'signup' }));
    const [waker, converter] = [await device(), await device()];
    for (const d of [waker, converter]) await event(d, 'signup');
    await runDue();
    for (const [d, user] of [
      [waker, 'wendy'],
      [converter, 'carl'],
    ] as const)
      expect((await call(h, 'PUT', `/v6/devices/${d}`, app.keys.write, { device: { user_id: user } })).statusCode).toBe(200);
    await event(waker, 'app_open');
    const bought = await call(h, 'POST', '/v6/users/carl/events', app.keys.write, { events: [{ name: 'purchase' }] });
    await applyEvents(h);
    expect(bought.statusCode).toBe(202);
    await runDue();
    expect(await sentTo(j.id)).toEqual([waker]);
    expect((await stepCounts(j.id)).opened).toMatchObject({ entered: 2, passed: 1, converted: 1, waiting: 0 });
  });

  it('an event that comes between entering and the wait beginning wakes the entrant (no poll ran between)', async () => {
    clock.set(T0);
    const j = await api.create(waitThenThank({ event: 'signup' }));
    const d = await device();
    await event(d, 'signup');
    clock.advance(1000);
    await event(d, 'app_open');
    clock.advance(HOUR);
    await runDue();
    expect(await sentTo(j.id)).toEqual([d]);
  });

  it('an event that comes while the engine moves the entrant to a wait_for waits for that move and wakes it', async () => {
    clock.set(T0);
    const j = await api.create({
      name: 'J',
      trigger: { api: true },
      steps: [{ id: 'hold', type: 'delay', until_local_time: '23:00' }, ...waitThenThank({ api: true }).steps],
    });
    const d = await device();
    expect(await enter(j.id, d)).toBe('entered');
    // the engine's transaction, as it moves the entrant on to the wait_for: the row locked, then moved
    const client = await h.db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SELECT id FROM journey_entrants WHERE journey_id = $1 FOR UPDATE`, [j.id]);
      const eventDone = event(d, 'app_open').then(() => 'done');
      const waiting = async () => {
        for (let i = 0; i < 50; i++) {
          const { rows } = await h.db.pool.query(
            `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%journey_entrants%'`,
          );
          if (rows.length) return 'waiting';
          if ((await Promise.race([eventDone, new Promise((r) => setTimeout(() => r('not yet'), 100))])) === 'done') return 'done';
        }
        return 'timed out';
      };
      expect(await waiting()).toBe('waiting');
      await client.query(
        `UPDATE journey_entrants SET step_id = 'opened', phase = 'waiting', due_at = $2, wait_event = 'app_open', on_event = 'thanks',
           seq = seq + 1 WHERE journey_id = $1`,
        [j.id, new Date(Date.parse(T0) + HOUR)],
      );
      await client.query('COMMIT');
      await eventDone;
    } finally {
      client.release();
    }
    const [row] = await h.db.db.selectFrom('journey_entrants').select(['step_id', 'phase']).where('journey_id', '=', j.id).execute();
    expect(row).toEqual({ step_id: 'thanks', phase: 'arrived' });
  });

  it('re_entry "never" holds once retention dropped the entrant rows', async () => {
    clock.set('2026-05-10T12:00:00Z');
    const j = await api.create({
      name: 'Once',
      trigger: { api: true },
      steps: [{ id: 'hi', type: 'send', notification: { payload: { alert: 'hi' } } }],
    });
    const d = await device();
    expect(await enter(j.id, d)).toBe('entered');
    await runDue();
    const maintain = (at: string) =>
      maintainPartitions({ db: h.db.db, repos: createRepositories(), log: createLogger('silent') }, retentionOf(h.config), new Date(at));
    await maintain('2026-05-10T12:00:00Z');
    expect((await maintain('2026-05-14T12:00:00Z')).journey_entrants.dropped).toContain('2026-05-10');
    expect(await h.db.db.selectFrom('journey_entrants').select('id').where('journey_id', '=', j.id).execute()).toEqual([]);
    clock.set('2026-05-14T12:00:00Z');
    expect(await enter(j.id, d)).toBe('not_re_entered');
  });

  it("counts: the steps of earlier versions are still shown with their entrants' counts", async () => {
    clock.set(T0);
    const v1 = {
      name: 'V',
      trigger: { api: true },
      steps: [
        { id: 'wait', type: 'delay', duration: '1h' },
        { id: 'say', type: 'send', notification: { payload: { alert: 'v1' } } },
      ],
    };
    const j = await api.create(v1);
    expect(await enter(j.id, await device())).toBe('entered');
    const v2 = { ...v1, steps: [{ id: 'other', type: 'send', notification: { payload: { alert: 'v2' } } }] };
    expect((await call(h, 'PUT', `/v6/journeys/${j.id}`, app.keys.write, { journey: v2 })).statusCode).toBe(200);
    clock.advance(HOUR);
    await runDue();
    const counts = await stepCounts(j.id);
    expect(Object.keys(counts).sort()).toEqual(['other', 'say', 'wait']);
    expect(counts.wait).toMatchObject({ type: 'delay', version: 1, entered: 1, passed: 1 });
    expect(counts.say).toMatchObject({ type: 'send', version: 1, entered: 1, sent: 1 });
    expect(counts.other!.version).toBeUndefined();
  });
});
