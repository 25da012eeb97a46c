import { beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { basic, ManualClock, useHarness, type Harness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';
import { journeyApi, applyEvents } from '../http/journey-support.js';
import { createLogger } from '../../src/platform/logger.js';
import { maintainPartitions, retentionOf } from '../../src/delivery/retention.js';
import { createRepositories } from '../../src/services/deps.js';

type App = Awaited<ReturnType<Harness['createApp']>>;
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const T0 = '2026-06-01T10:00:00Z';

/**
 * Each step type and life-cycle rule of issue 58 that journey-engine.test.ts does not run: branch, message, wait_for
 * leading to a step, exit_on wherever the entrant is, pause holding events too, a new version's rules for new
 * entrants only, until_local_time in the app's zone, and the entrants' retention. The test moves the clock and runs
 * the engine itself (no workers: nothing runs but what it asks for).
 */
describe('journeys: the steps and the life cycle', () => {
  const clock = new ManualClock(new Date(T0));
  const h = useHarness({ clock, env: { RETENTION_JOURNEY_ENTRANTS_DAYS: '3' } });
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });

  const runDue = () => h.ctx.services.journeyEngine.runDue();
  const api = journeyApi(h, () => app);
  const { journey, stepCounts, device, event } = api;
  const create = (definition: Record<string, unknown>) => api.create({ name: 'J', ...definition });
  const enter = async (journeyId: string, deviceId: string) => {
    const res = await call(h, 'POST', `/v6/journeys/${journeyId}/entries`, app.keys.write, { device_id: deviceId });
    expect(res.json()).toEqual({ entered: true, outcome: 'entered' });
  };
  /** What each step of the journey sent, as "step:device,device" (sorted), read from the notifications. */
  const sent = async (journeyId: string) => {
    const rows = await h.db.db
      .selectFrom('notifications')
      .select('request')
      .where(sql<boolean>`request->'journey'->>'id' = ${journeyId}`)
      .execute();
    return rows
      .map((r) => {
        const request = r.request as { journey: { step: string }; to: { criteria: string[] }[] };
        return `${request.journey.step}:${[...request.to[0]!.criteria].sort().join(',')}`;
      })
      .sort();
  };
  const to = (step: string, ...ids: string[]) => `${step}:${[...ids].sort().join(',')}`;
  const entrants = (journeyId: string) =>
    h.db.db
      .selectFrom('journey_entrants')
      .select(['device_id', 'step_id', 'phase', 'outcome', 'due_at'])
      .where('journey_id', '=', journeyId)
      .execute();
  const outcomeOf = async (journeyId: string, deviceId: string) => (await entrants(journeyId)).find((e) => e.device_id === deviceId);

  it("branch: the filters are evaluated on the entrant's device when the step runs, then or else", async () => {
    clock.set(T0);
    const j = await create({
      trigger: { api: true },
      steps: [
        { id: 'wait', type: 'delay', duration: '10m' },
        { id: 'where', type: 'branch', filters: [{ name: 'country', criteria: ['US'] }], then: 'us', else: 'rest' },
        { id: 'us', type: 'send', notification: { payload: { alert: 'howdy' } }, next: 'end' },
        { id: 'rest', type: 'send', notification: { payload: { alert: 'hello' } } },
      ],
    });
    const [american, french, moving] = [await device({ country: 'US' }), await device({ country: 'FR' }), await device({ country: 'FR' })];
    for (const d of [american, french, moving]) await enter(j.id, d);
    // it moves to the US during the delay: the branch sees where it is now
    expect((await call(h, 'PUT', `/v6/devices/${moving}`, app.keys.write, { device: { country: 'US' } })).statusCode).toBe(200);
    clock.advance(10 * MINUTE);
    await runDue();
    await runDue();
    expect(await sent(j.id)).toEqual([to('rest', french), to('us', american, moving)]);
    const counts = await stepCounts(j.id);
    expect(counts.where).toMatchObject({ entered: 3, waiting: 0, passed: 3 });
    expect(counts.us).toMatchObject({ entered: 2, sent: 2 });
    expect(counts.rest).toMatchObject({ entered: 1, sent: 1 });
  });

  it("message: the step puts an in-app message in the entrant's stream, its push tagged with the journey and step", async () => {
    clock.set(T0);
    const j = await create({
      trigger: { api: true },
      steps: [
        {
          id: 'tips',
          type: 'message',
          message: { title: 'Three tips', text: 'One, two, three', notification: { payload: { alert: 'Tips inside' } } },
        },
      ],
    });
    const [d, other] = [await device(), await device()];
    await enter(j.id, d);
    await runDue();
    const stream = async (id: string) => (await call(h, 'GET', `/v6/devices/${id}/messages`, app.keys.sdk)).json().messages;
    const [message] = await stream(d);
    expect([message.title, message.text]).toEqual(['Three tips', 'One, two, three']);
    expect(await stream(other)).toEqual([]);
    expect(await sent(j.id)).toEqual([to('tips', d)]);
    const listed = (await call(h, 'GET', '/v6/notifications', app.keys.read)).json().notifications;
    const push = listed.find((n: { journey?: { id: string } }) => n.journey?.id === j.id);
    expect(push.journey).toEqual({ id: j.id, version: 1, step: 'tips' });
    expect((await call(h, 'GET', `/v6/notifications/${push.id}`, app.keys.read)).json().journey).toEqual(push.journey);
    expect((await stepCounts(j.id)).tips).toMatchObject({ entered: 1, waiting: 0, sent: 1 });
  });

  it("send: quiet hours and expiry apply to the step's notification as to one made through POST /v6/notifications", async () => {
    clock.set(T0);
    const options = { ttl: 600, priority: 'normal', quiet_hours: { start: '09:00', end: '11:00', then: 'hold' } };
    const j = await create({
      trigger: { api: true },
      steps: [{ id: 'quiet', type: 'send', notification: { payload: { alert: 'shh' }, ...options } }],
    });
    const d = await device({ time_zone: 'UTC' });
    await enter(j.id, d);
    await runDue();
    const listed = (await call(h, 'GET', '/v6/notifications', app.keys.read)).json().notifications;
    const fromJourney = listed.find((n: { journey?: { id: string } }) => n.journey?.id === j.id);
    const direct = await call(h, 'POST', '/v6/notifications', app.keys.write, {
      notification: { to: [{ name: 'device_id', criteria: [d] }], payload: { alert: 'shh' }, ...options },
    });
    expect(direct.statusCode, direct.body).toBe(201);
    const record = async (id: string) => {
      const r = (await call(h, 'GET', `/v6/notifications/${id}`, app.keys.read)).json();
      const expires = r.expires_at && Date.parse(r.expires_at) - Date.parse(r.created_at);
      return { state: r.state, send_at: r.send_at, expires_after_ms: expires, priority: r.priority, quiet: r.notification.quiet_hours };
    };
    const held = await record(fromJourney.id);
    // held to the quiet hours' end, with its ttl and priority
    expect(held).toMatchObject({ state: 'scheduled', priority: 'normal', quiet: options.quiet_hours });
    expect(held.expires_after_ms).toBeGreaterThan(0);
    expect(held).toEqual(await record(direct.json().id));
  });

  it("wait_for: the entrant's own event takes it to on_event, another's or an earlier one does not, else on_timeout", async () => {
    clock.set(T0);
    const j = await create({
      trigger: { event: 'signup' },
      steps: [
        { id: 'opened', type: 'wait_for', event: 'app_open', timeout: '1h', on_event: 'thanks', on_timeout: 'end' },
        { id: 'thanks', type: 'send', notification: { payload: { alert: 'thanks for opening' } } },
      ],
    });
    const [opener, idle, early, stranger] = [await device(), await device(), await device(), await device()];
    await event(early, 'app_open');
    for (const d of [opener, idle, early]) await event(d, 'signup');
    await runDue();
    await event(opener, 'app_open');
    await event(stranger, 'app_open');
    await runDue();
    expect(await sent(j.id)).toEqual([to('thanks', opener)]);
    expect((await stepCounts(j.id)).opened).toMatchObject({ entered: 3, waiting: 2, passed: 1 });
    clock.advance(HOUR);
    await runDue();
    expect(await sent(j.id)).toEqual([to('thanks', opener)]);
    expect((await stepCounts(j.id)).opened).toMatchObject({ entered: 3, waiting: 0, passed: 3 });
    expect((await entrants(j.id)).map((e) => e.outcome)).toEqual(['completed', 'completed', 'completed']);
  });

  it("a user entrant: another of the user's devices, or the user's own event, wakes and converts it", async () => {
    clock.set(T0);
    const j = await create({
      trigger: { event: 'browsed' },
      exit_on: ['purchase'],
      steps: [
        { id: 'opened', type: 'wait_for', event: 'app_open', timeout: '1d', on_event: 'wait', on_timeout: 'end' },
        { id: 'wait', type: 'delay', duration: '1d' },
      ],
    });
    const [phone, tablet] = [await device({ user_id: 'grace' }), await device({ user_id: 'grace' })];
    await event(phone, 'browsed');
    await runDue();
    await event(tablet, 'app_open');
    await runDue();
    expect((await entrants(j.id)).map((e) => [e.device_id, e.step_id, e.phase])).toEqual([[phone, 'wait', 'waiting']]);
    const bought = await call(h, 'POST', '/v6/users/grace/events', app.keys.write, { events: [{ name: 'purchase' }] });
    await applyEvents(h);
    expect(bought.statusCode).toBe(202);
    expect((await entrants(j.id)).map((e) => e.outcome)).toEqual(['converted']);
    expect(await stepCounts(j.id)).toMatchObject({ opened: { passed: 1 }, wait: { entered: 1, converted: 1, waiting: 0 } });
  });

  it('exit_on: an exit event takes the entrant out converted wherever it is, and nothing more is sent to it', async () => {
    clock.set(T0);
    const j = await create({
      trigger: { event: 'trial_started' },
      exit_on: ['subscribed'],
      steps: [
        { id: 'hi', type: 'send', notification: { payload: { alert: 'hi' } } },
        { id: 'opened', type: 'wait_for', event: 'app_open', timeout: '1d' },
        { id: 'later', type: 'delay', duration: '1d' },
        { id: 'bye', type: 'send', notification: { payload: { alert: 'last chance' } } },
      ],
    });
    const [atWait, atDelay, atStart, stays] = [await device(), await device(), await device(), await device()];
    for (const d of [atWait, atDelay, atStart, stays]) await event(d, 'trial_started');
    // converts before its first step ran: it gets nothing
    await event(atStart, 'subscribed');
    await runDue();
    await event(atWait, 'subscribed');
    clock.advance(DAY);
    await runDue();
    await event(atDelay, 'subscribed');
    clock.advance(DAY);
    await runDue();
    expect(await sent(j.id)).toEqual([to('bye', stays), to('hi', atWait, atDelay, stays)]);
    const counts = await stepCounts(j.id);
    expect(counts.hi).toMatchObject({ entered: 4, sent: 3, converted: 1, waiting: 0 });
    expect(counts.opened).toMatchObject({ entered: 3, passed: 2, converted: 1, waiting: 0 });
    expect(counts.later).toMatchObject({ entered: 2, passed: 1, converted: 1, waiting: 0 });
    expect((await journey(j.id)).counts.trigger).toMatchObject({ entered: 4, converted: 3 });
    for (const d of [atWait, atDelay, atStart]) expect((await outcomeOf(j.id, d))?.outcome).toBe('converted');
    expect((await outcomeOf(j.id, stays))?.outcome).toBe('completed');
  });

  it('pause: events neither wake nor convert its entrants; after resume they go on from where they were', async () => {
    clock.set(T0);
    const j = await create({
      trigger: { api: true },
      exit_on: ['purchase'],
      steps: [
        { id: 'opened', type: 'wait_for', event: 'app_open', timeout: '1h', on_event: 'end', on_timeout: 'nudge' },
        { id: 'nudge', type: 'send', notification: { payload: { alert: 'nudge' } } },
      ],
    });
    const [opener, buyer] = [await device(), await device()];
    await enter(j.id, opener);
    await enter(j.id, buyer);
    await runDue();
    await call(h, 'POST', `/v6/journeys/${j.id}/pause`, app.keys.write);
    await event(opener, 'app_open');
    await event(buyer, 'purchase');
    expect((await stepCounts(j.id)).opened).toMatchObject({ waiting: 2, passed: 0, converted: 0 });
    expect((await entrants(j.id)).map((e) => [e.step_id, e.phase])).toEqual([
      ['opened', 'waiting'],
      ['opened', 'waiting'],
    ]);
    clock.advance(2 * HOUR);
    expect(await runDue()).toBe(0);
    await call(h, 'POST', `/v6/journeys/${j.id}/resume`, app.keys.write);
    await runDue();
    await runDue();
    expect(await sent(j.id)).toEqual([to('nudge', buyer, opener)]);
  });

  it('PUT: those inside keep their version’s exit_on and steps; new entrants take the new trigger, exit_on and steps', async () => {
    clock.set(T0);
    const v1 = {
      trigger: { event: 'v1_in' },
      exit_on: ['v1_out'],
      steps: [
        { id: 'wait', type: 'delay', duration: '1h' },
        { id: 'say', type: 'send', notification: { payload: { alert: 'v1' } } },
      ],
    };
    const j = await create(v1);
    const [old1, old2, new1, new2] = [await device(), await device(), await device(), await device()];
    await event(old1, 'v1_in');
    await event(old2, 'v1_in');
    const v2 = { ...v1, name: 'J', trigger: { event: 'v2_in' }, exit_on: ['v2_out'] };
    expect((await call(h, 'PUT', `/v6/journeys/${j.id}`, app.keys.write, { journey: v2 })).json().journey.version).toBe(2);
    // the old trigger enters no one now
    await event(new1, 'v1_in');
    expect((await journey(j.id)).counts.trigger.entered).toBe(2);
    await event(new1, 'v2_in');
    await event(new2, 'v2_in');
    // each exit event converts only the entrants of the version that names it
    for (const d of [old1, new1]) await event(d, 'v2_out');
    for (const d of [old2, new2]) await event(d, 'v1_out');
    expect((await outcomeOf(j.id, old1))?.outcome).toBeNull();
    expect((await outcomeOf(j.id, old2))?.outcome).toBe('converted');
    expect((await outcomeOf(j.id, new1))?.outcome).toBe('converted');
    expect((await outcomeOf(j.id, new2))?.outcome).toBeNull();
    clock.advance(HOUR);
    await runDue();
    await runDue();
    expect(await sent(j.id)).toEqual([to('say', new2), to('say', old1)].sort());
  });

  it("until_local_time: the device's own zone, else the app's default zone, else UTC", async () => {
    clock.set(T0);
    /** When a journey waiting until 09:00 local ends its wait for a device in Tokyo and one with no zone. */
    const nineOClock = async () => {
      const j = await create({ trigger: { api: true }, steps: [{ id: 'morning', type: 'delay', until_local_time: '09:00' }] });
      const [tokyo, zoneless] = [await device({ time_zone: 'Asia/Tokyo' }), await device()];
      await enter(j.id, tokyo);
      await enter(j.id, zoneless);
      await runDue();
      return { tokyo: (await outcomeOf(j.id, tokyo))?.due_at, zoneless: (await outcomeOf(j.id, zoneless))?.due_at };
    };
    // 10:00Z is 19:00 in Tokyo: its next 09:00 is 00:00Z the next day; the zoneless device's is UTC's
    expect(await nineOClock()).toEqual({ tokyo: new Date('2026-06-02T00:00:00Z'), zoneless: new Date('2026-06-02T09:00:00Z') });

    const patchApp = (body: unknown) =>
      h.server.inject({ method: 'PATCH', url: '/v6/app', headers: { authorization: basic(app.keys.write) }, payload: body as object });
    const patched = await patchApp({ default_time_zone: 'America/New_York' });
    expect(patched.statusCode, patched.body).toBe(200);
    try {
      // 10:00Z is 06:00 in New York (EDT): 09:00 there is 13:00Z the same day
      expect(await nineOClock()).toEqual({ tokyo: new Date('2026-06-02T00:00:00Z'), zoneless: new Date('2026-06-01T13:00:00Z') });
    } finally {
      await patchApp({ default_time_zone: null });
    }
  });

  it('retention: entrants are kept RETENTION_JOURNEY_ENTRANTS_DAYS from the day they entered, then dropped with it', async () => {
    clock.set('2026-05-10T12:00:00Z');
    const j = await create({ trigger: { api: true }, steps: [{ id: 'wait', type: 'delay', duration: '1h' }] });
    const d = await device();
    await enter(j.id, d);
    const retention = retentionOf(h.config);
    expect(retention.journey_entrants).toBe(3);
    const maintain = (at: string) =>
      maintainPartitions({ db: h.db.db, repos: createRepositories(), log: createLogger('silent') }, retention, new Date(at));
    const where = async () =>
      (
        await h.db.pool.query<{ p: string }>(`SELECT tableoid::regclass::text AS p FROM journey_entrants WHERE journey_id = $1`, [j.id])
      ).rows.map((r) => r.p);
    await maintain('2026-05-10T12:00:00Z');
    expect(await where()).toEqual(['journey_entrants_p20260510']);
    expect((await maintain('2026-05-13T12:00:00Z')).journey_entrants.dropped).not.toContain('2026-05-10');
    expect(await where()).toEqual(['journey_entrants_p20260510']);
    expect((await maintain('2026-05-14T12:00:00Z')).journey_entrants.dropped).toContain('2026-05-10');
    expect(await where()).toEqual([]);
  });
});
