import { beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { ManualClock, useHarness, type Harness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';
import { applyEvents, journeyApi } from '../http/journey-support.js';
import { JourneyEngine } from '../../src/services/journey-engine.js';
import { JourneyService } from '../../src/services/journeys.js';
import { JourneysRepository } from '../../src/db/repositories/journeys.js';
import { JourneyEventsRepository } from '../../src/db/repositories/journey-events.js';
import { JourneyDevicesRepository } from '../../src/db/repositories/journey-devices.js';
import { createRepositories, serviceDeps } from '../../src/services/deps.js';
import { createLogger } from '../../src/platform/logger.js';

type App = Awaited<ReturnType<Harness['createApp']>>;
const HOUR = 3_600_000;
const T0 = '2026-06-01T10:00:00Z';

/**
 * Events reach journeys through journey_events: the request writes a row, the workers apply it. What that must
 * keep: nothing lost to a crash, an entrant's events in order, a step waiting for its entrant's events; and the
 * second round's loose ends, a user's digest and an update's devices_changed.
 */
describe('journeys: recorded events applied by the workers', () => {
  const clock = new ManualClock(new Date(T0));
  const h = useHarness({ clock });
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });
  const api = journeyApi(h, () => app);
  const { create, device, journey, entrants } = api;
  const pending = async () => (await sql<{ n: number }>`select count(*)::int as n from journey_events`.execute(h.db.db)).rows[0]!.n;
  const post = async (path: string, name: string) =>
    expect((await call(h, 'POST', `${path}/events`, app.keys.write, { events: [{ name }] })).statusCode).toBe(202);

  it('a request writes one row only when a journey listens; a worker killed before its commit loses nothing', async () => {
    clock.set(T0);
    const d = await device();
    await post(`/v6/devices/${d}`, 'nobody_listens');
    expect(await pending()).toBe(0);
    const j = await create({ name: 'Kill', trigger: { event: 'kill_me' }, steps: [{ id: 'later', type: 'delay', duration: '1d' }] });
    await post(`/v6/devices/${d}`, 'kill_me');
    expect(await pending()).toBe(1);
    expect((await journey(j.id)).counts.trigger.entered).toBe(0);
    // the counters are the batch's last statement: dying there rolls back the entries and the rows' deletion
    class Dying extends JourneysRepository {
      override async bump(): Promise<void> {
        throw new Error('killed before commit');
      }
    }
    const dying = new JourneyService({
      ...serviceDeps(h.db.db, clock),
      repos: { ...createRepositories(), journeys: new Dying() },
      minCycleMs: HOUR,
    });
    await expect(dying.takeEvents(100)).rejects.toThrow('killed before commit');
    expect(await pending()).toBe(1);
    expect(await entrants(j.id, `device:${d}`)).toEqual([]);
    expect(await applyEvents(h)).toBe(1);
    expect(await pending()).toBe(0);
    expect((await journey(j.id)).counts.trigger.entered).toBe(1);
    expect(await entrants(j.id, `device:${d}`)).toHaveLength(1);
  });

  /** Two workers at once: one takes the oldest row and holds it; what each took, by entrant key. */
  const takeWhileOneIsHeld = async () => {
    const repo = new JourneyEventsRepository();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let taken!: () => void;
    const tookFirst = new Promise<void>((r) => (taken = r));
    const first = h.db.db.transaction().execute(async (trx) => {
      const rows = await repo.take(trx, 1);
      taken();
      await held;
      return rows.map((r) => r.entrant_key);
    });
    await tookFirst;
    const second = await h.db.db.transaction().execute(async (trx) => (await repo.take(trx, 10)).map((r) => r.entrant_key));
    release();
    return { first: await first, second };
  };

  it("one batch enters every entrant's journeys at once, and an entrant's rows in their order", async () => {
    clock.set(T0);
    const later = [{ id: 'later', type: 'delay', duration: '1d' }];
    const j = await create({ name: 'Batch', trigger: { event: 'shop' }, exit_on: ['paid'], re_entry: 'after_exit', steps: later });
    const us = await create({
      name: 'Batch US',
      trigger: { event: 'shop' },
      entry_filters: [{ name: 'country', criteria: ['US'] }],
      steps: later,
    });
    const ds = [await device({ country: 'US' }), await device({ country: 'FR' }), await device({ country: 'US' }), await device()];
    for (const d of ds) await post(`/v6/devices/${d}`, 'shop');
    // the first device's next rows come in the same batch: converted out of the first entry, then in again
    await post(`/v6/devices/${ds[0]}`, 'paid');
    await post(`/v6/devices/${ds[0]}`, 'shop');
    expect(await h.ctx.services.journeys.takeEvents(100)).toBe(6);
    const first = await entrants(j.id, `device:${ds[0]}`);
    // both entered at the one instant of the clock: in no order
    expect(first.map((e) => e.history.map((x) => x.what).join(' ')).sort()).toEqual(['entered waiting', 'entered waiting converted']);
    for (const d of ds.slice(1)) expect(await entrants(j.id, `device:${d}`)).toHaveLength(1);
    // the US journey: the first device entered once (its second shop is no re-entry), the third too; the others filtered
    expect(await entrants(us.id, `device:${ds[0]}`)).toHaveLength(1);
    expect(await entrants(us.id, `device:${ds[1]}`)).toEqual([]);
    expect(await entrants(us.id, `device:${ds[2]}`)).toHaveLength(1);
    expect((await journey(j.id)).counts.trigger).toMatchObject({ entered: 5, converted: 1 });
    expect((await journey(us.id)).counts.trigger).toMatchObject({ entered: 2, filtered: 2, skipped: 1 });
  });

  it("an entrant's later row is not taken while another worker holds an earlier one", async () => {
    const [d, other] = [await device(), await device()];
    await create({ name: 'Order', trigger: { event: 'first' }, steps: [{ id: 'w', type: 'wait_for', event: 'second', timeout: '1d' }] });
    await post(`/v6/devices/${d}`, 'first');
    await post(`/v6/devices/${d}`, 'second');
    await post(`/v6/devices/${other}`, 'first');
    const { first, second } = await takeWhileOneIsHeld();
    // the other transaction took d's first row: d's second waits; the other device's is taken
    expect(first).toEqual([`d:${d}`]);
    expect(second).toEqual([`d:${other}`]);
    await applyEvents(h);
  });

  it('a row recorded after its device got a user waits for the rows the device recorded before', async () => {
    const [d, other] = [await device(), await device()];
    await create({ name: 'Identified', trigger: { event: 'browse' }, steps: [{ id: 'w', type: 'wait_for', event: 'buy', timeout: '1d' }] });
    await post(`/v6/devices/${d}`, 'browse');
    // the device is identified between its two events: the second row is the user's, and holds the device's key too
    await h.db.db
      .updateTable('devices')
      .set({ user_id: `ana-${d}` })
      .where('id', '=', d)
      .execute();
    await post(`/v6/devices/${d}`, 'buy');
    await post(`/v6/devices/${other}`, 'browse');
    const { first, second } = await takeWhileOneIsHeld();
    expect(first).toEqual([`d:${d}`]);
    expect(second).toEqual([`d:${other}`]);
    await applyEvents(h);
  });

  it("a wait_for's timeout waits for the entrant's events recorded before it: the event wins", async () => {
    clock.set(T0);
    const j = await create({
      name: 'Timeout',
      trigger: { event: 'asked' },
      steps: [
        { id: 'w', type: 'wait_for', event: 'answered', timeout: '1h', on_event: 'end', on_timeout: 'nudge' },
        { id: 'nudge', type: 'delay', duration: '1d' },
      ],
    });
    const d = await device();
    await post(`/v6/devices/${d}`, 'asked');
    await applyEvents(h);
    await post(`/v6/devices/${d}`, 'answered');
    clock.advance(2 * HOUR);
    // an engine that does not apply events (another worker does): the entrant's timeout is not run meanwhile
    const base = { db: h.db.db, repos: createRepositories(), notifications: h.ctx.services.notifications };
    await new JourneyEngine({ ...base, messages: h.ctx.services.messages, clock, log: createLogger('silent'), batchSize: 100 }).runDue();
    expect((await entrants(j.id, `device:${d}`))[0]).toMatchObject({ step: 'w', phase: 'waiting' });
    await applyEvents(h);
    const [entry] = await entrants(j.id, `device:${d}`);
    expect(entry!.history.map((x) => x.what)).toEqual(['entered', 'waiting', 'event']);
    expect((await journey(j.id)).counts.steps.find((s: { id: string }) => s.id === 'nudge')?.entered ?? 0).toBe(0);
  });

  it("digest: a user's events are counted once each, whichever of its devices or the user records them", async () => {
    clock.set(T0);
    const j = await create({
      name: 'Digest',
      trigger: { api: true },
      steps: [{ id: 'gather', type: 'digest', event: 'liked', window: '1h' }],
    });
    await device({ user_id: 'dana' });
    const tablet = await device({ user_id: 'dana' });
    // before the window: not counted
    await post('/v6/users/dana', 'liked');
    await applyEvents(h);
    expect((await call(h, 'POST', `/v6/journeys/${j.id}/entries`, app.keys.write, { user_id: 'dana' })).statusCode).toBe(202);
    await h.ctx.services.journeyEngine.runDue();
    // in the window: one for the user (recorded on both devices) and one from the tablet
    await post('/v6/users/dana', 'liked');
    await post(`/v6/devices/${tablet}`, 'liked');
    await applyEvents(h);
    clock.advance(HOUR);
    await h.ctx.services.journeyEngine.runDue();
    const [entry] = await entrants(j.id, 'user:dana');
    expect(entry!.history.find((x) => x.what === 'digest')).toMatchObject({ event: 'liked', count: 2 });
  });

  it("update: the history's devices_changed counts the entrant's devices the step wrote", async () => {
    clock.set(T0);
    const j = await create({
      name: 'Update',
      trigger: { api: true },
      steps: [{ id: 'tag', type: 'update', add_tags: ['seen'] }],
    });
    await device({ user_id: 'erin' });
    await device({ user_id: 'erin' });
    const alone = await device();
    expect((await call(h, 'POST', `/v6/journeys/${j.id}/entries`, app.keys.write, { user_id: 'erin' })).statusCode).toBe(202);
    await api.enter(j.id, alone);
    await h.ctx.services.journeyEngine.runDue();
    const updated = async (key: string) => (await entrants(j.id, key))[0]!.history.find((x) => x.what === 'updated');
    expect(await updated('user:erin')).toMatchObject({ step: 'tag', devices_changed: 2 });
    expect(await updated(`device:${alone}`)).toMatchObject({ step: 'tag', devices_changed: 1 });
  });

  it('a row that cannot be applied holds only its own entrant, and is dropped after a few polls', async () => {
    clock.set(T0);
    const j = await create({ name: 'Poison', trigger: { event: 'poison' }, steps: [{ id: 'later', type: 'delay', duration: '1d' }] });
    const [bad, good] = [await device(), await device()];
    // the bad entrant's two rows come before the good one's: its second waits behind its first, the good one does not
    await post(`/v6/devices/${bad}`, 'poison');
    await post(`/v6/devices/${bad}`, 'poison');
    await post(`/v6/devices/${good}`, 'poison');
    expect(await pending()).toBe(3);
    // reading the bad device's row always fails, as a row the code cannot apply would
    class Failing extends JourneyDevicesRepository {
      override async liveDevices(...args: Parameters<JourneyDevicesRepository['liveDevices']>) {
        if (args[1].includes(bad)) throw new Error('cannot apply');
        return super.liveDevices(...args);
      }
    }
    const repos = { ...createRepositories(), journeyDevices: new Failing() };
    const intake = new JourneyService({ ...serviceDeps(h.db.db, clock), repos, minCycleMs: HOUR });
    const engine = new JourneyEngine({
      db: h.db.db,
      repos,
      notifications: h.ctx.services.notifications,
      messages: h.ctx.services.messages,
      clock,
      log: createLogger('silent'),
      batchSize: 100,
      intake,
    });
    const attempts = async () =>
      (await sql<{ attempts: number }>`select attempts from journey_events order by id`.execute(h.db.db)).rows.map((r) => r.attempts);
    await engine.runDue();
    // the good device's row went in a transaction of its own; the bad one's first is tried once a poll, its second waits
    expect(await entrants(j.id, `device:${good}`)).toHaveLength(1);
    expect(await entrants(j.id, `device:${bad}`)).toEqual([]);
    expect(await attempts()).toEqual([1, 0]);
    for (let poll = 2; poll <= 5; poll += 1) await engine.runDue();
    // the first dropped at its fifth poll; the second is tried from the next
    expect(await attempts()).toEqual([0]);
    for (let poll = 1; poll <= 5; poll += 1) await engine.runDue();
    expect(await pending()).toBe(0);
    expect(await entrants(j.id, `device:${bad}`)).toEqual([]);
  });

  it('a batch whose events enter many journeys each takes a lock an entrant, not one an entry', async () => {
    clock.set(T0);
    // 100 events entering 150 journeys each: 15,000 entries, past what PostgreSQL's lock table holds by default
    const journeys = [];
    for (let k = 0; k < 150; k++)
      journeys.push(
        await create({ name: `Crowd ${k}`, trigger: { event: 'crowd' }, steps: [{ id: 'later', type: 'delay', duration: '1d' }] }),
      );
    const ds = [];
    for (let k = 0; k < 100; k++) ds.push(await device());
    for (const d of ds) await post(`/v6/devices/${d}`, 'crowd');
    expect(await h.ctx.services.journeys.takeEvents(100)).toBe(100);
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from journey_entrants where journey_id = any(${journeys.map((j) => j.id)}::uuid[])`.execute(h.db.db);
    expect(rows[0]!.n).toBe(15_000);
    for (const j of [journeys[0]!, journeys[149]!]) expect((await journey(j.id)).counts.trigger.entered).toBe(100);
  });
});
