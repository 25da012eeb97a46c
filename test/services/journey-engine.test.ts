import { beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { ManualClock, useHarness, type Harness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';
import { journeyApi, applyEvents } from '../http/journey-support.js';
import { JourneyEngine } from '../../src/services/journey-engine.js';
import { EXITS_AT_ONCE } from '../../src/services/journey-exits.js';
import { JourneyEntrantsRepository } from '../../src/db/repositories/journey-entrants.js';
import { createRepositories } from '../../src/services/deps.js';
import { createLogger } from '../../src/platform/logger.js';
import type { NotificationService } from '../../src/services/notifications.js';

type App = Awaited<ReturnType<Harness['createApp']>>;
const HOUR = 3_600_000;
const T0 = '2026-06-01T10:00:00Z';

describe('journeys: the engine', () => {
  const clock = new ManualClock(new Date(T0));
  const h = useHarness({ clock });
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });

  const engine = () => h.ctx.services.journeyEngine;
  const { create, journey, stepCounts, device, event } = journeyApi(h, () => app);
  const enter = async (journeyId: string, who: Record<string, string>) =>
    (await call(h, 'POST', `/v6/journeys/${journeyId}/entries`, app.keys.write, who)).json();
  /** The notifications a journey sent, oldest first: the step, and who they went to. */
  const sends = async (journeyId: string) => {
    const rows = await h.db.db
      .selectFrom('notifications')
      .select(['id', 'request', 'payload'])
      .where(sql<boolean>`request->'journey'->>'id' = ${journeyId}`)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map((r) => {
      const request = r.request as { journey: { step: string; version: number }; to: { name: string; criteria: string[] }[] };
      const to = request.to[0]!;
      return {
        id: r.id,
        step: request.journey.step,
        version: request.journey.version,
        to: `${to.name}:${[...to.criteria].sort().join(',')}`,
      };
    });
  };

  it('the cart-abandonment journey end to end: delay, send, wait_for, local time, conversion, entry filters', async () => {
    clock.set(T0);
    const cart = await create({
      name: 'Cart',
      trigger: { event: 'cart_abandoned' },
      entry_filters: [{ name: 'country', criteria: ['US', 'DE'] }],
      exit_on: ['purchase'],
      steps: [
        { id: 'wait', type: 'delay', duration: '1h' },
        { id: 'remind', type: 'send', notification: { payload: { alert: 'Your cart is waiting' } } },
        { id: 'opened', type: 'wait_for', event: 'app_open', timeout: '1d', on_event: 'end', on_timeout: 'morning' },
        { id: 'morning', type: 'delay', until_local_time: '09:00' },
        { id: 'again', type: 'send', notification: { payload: { alert: 'Still there?' } } },
      ],
    });
    const a = await device({ country: 'US' });
    await device({ country: 'DE', user_id: 'u1', time_zone: 'Europe/Berlin' });
    await device({ country: 'DE', user_id: 'u1', time_zone: 'Europe/Berlin' });
    const buyer = await device({ country: 'US' });
    const french = await device({ country: 'FR' });
    await event(a, 'cart_abandoned');
    const user = await call(h, 'POST', '/v6/users/u1/events', app.keys.write, { events: [{ name: 'cart_abandoned' }] });
    await applyEvents(h);
    expect(user.statusCode).toBe(202);
    await event(buyer, 'cart_abandoned');
    await event(french, 'cart_abandoned');
    expect((await journey(cart.id)).counts.trigger).toEqual({ entered: 3, skipped: 0, filtered: 1, converted: 0 });

    await engine().runDue();
    expect((await stepCounts(cart.id)).wait).toMatchObject({ entered: 3, waiting: 3, passed: 0 });
    await event(buyer, 'purchase');
    expect((await stepCounts(cart.id)).wait).toMatchObject({ waiting: 2, converted: 1 });

    clock.advance(HOUR - 1000);
    await engine().runDue();
    expect(await sends(cart.id)).toEqual([]);

    clock.advance(1000);
    await engine().runDue();
    // the two entrants due at once: one notification per kind of target (a user's devices, a device)
    const first = await sends(cart.id);
    expect(first.map((s) => [s.step, s.to]).sort()).toEqual([
      ['remind', `device_id:${a}`],
      ['remind', 'user_id:u1'],
    ]);
    const shown = await call(h, 'GET', `/v6/notifications/${first[0]!.id}`, app.keys.read);
    expect(shown.json().journey).toEqual({ id: cart.id, version: 1, step: 'remind' });
    const listed = (await call(h, 'GET', '/v6/notifications', app.keys.read)).json().notifications;
    expect(listed.filter((n: { journey?: { id: string } }) => n.journey?.id === cart.id)).toHaveLength(2);

    await event(a, 'app_open');
    await engine().runDue();
    clock.advance(24 * HOUR);
    await engine().runDue();
    // u1 timed out at 2026-06-02T11:00Z: 09:00 in Berlin next comes on the 3rd, at 07:00Z
    const [waiting] = await h.db.db
      .selectFrom('journey_entrants')
      .select(['step_id', 'due_at'])
      .where('journey_id', '=', cart.id)
      .where('outcome', 'is', null)
      .execute();
    expect(waiting).toEqual({ step_id: 'morning', due_at: new Date('2026-06-03T07:00:00Z') });
    clock.set('2026-06-03T07:00:00Z');
    await engine().runDue();
    expect((await sends(cart.id)).map((s) => [s.step, s.to])).toContainEqual(['again', 'user_id:u1']);
    expect(await sends(cart.id)).toHaveLength(3);

    const counts = await stepCounts(cart.id);
    expect(counts.wait).toMatchObject({ entered: 3, waiting: 0, passed: 2, converted: 1 });
    expect(counts.remind).toMatchObject({ entered: 2, waiting: 0, sent: 2 });
    expect(counts.opened).toMatchObject({ entered: 2, waiting: 0, passed: 2 });
    expect(counts.again).toMatchObject({ entered: 1, waiting: 0, sent: 1 });
    expect((await journey(cart.id)).counts.trigger).toEqual({ entered: 3, skipped: 0, filtered: 1, converted: 1 });
    const outcomes = await h.db.db.selectFrom('journey_entrants').select('outcome').where('journey_id', '=', cart.id).execute();
    expect(outcomes.map((o) => o.outcome).sort()).toEqual(['completed', 'completed', 'converted']);
  });

  it('a step runs once per entrant when the worker dies before or after its commit', async () => {
    clock.set(T0);
    const j = await create({
      name: 'Once',
      trigger: { api: true },
      re_entry: 'after_exit',
      steps: [{ id: 'hello', type: 'send', notification: { payload: { alert: 'hello' } } }],
    });
    const ids = [await device(), await device(), await device()];
    for (const id of ids) expect(await enter(j.id, { device_id: id })).toEqual({ entered: true, outcome: 'entered' });

    const base = {
      db: h.db.db,
      repos: createRepositories(),
      notifications: h.ctx.services.notifications,
      messages: h.ctx.services.messages,
      clock,
      log: createLogger('silent'),
      batchSize: 1000,
    };
    // dies after the send is inserted, before the commit: the send is rolled back with the transitions
    class DyingBeforeCommit extends JourneyEntrantsRepository {
      override async advance(...args: Parameters<JourneyEntrantsRepository['advance']>): Promise<Set<string>> {
        await super.advance(...args);
        throw new Error('killed before commit');
      }
    }
    await expect(
      new JourneyEngine({ ...base, repos: { ...base.repos, journeyEntrants: new DyingBeforeCommit() } }).runDue(),
    ).rejects.toThrow('killed before commit');
    expect(await sends(j.id)).toEqual([]);

    // dies after the commit, before it handed the send to the queue: the sweeper re-enqueues it; the step is done
    const dyingAfterCommit = Object.create(h.ctx.services.notifications) as NotificationService;
    dyingAfterCommit.release = () => Promise.reject(new Error('killed after commit'));
    const afterCommit = new JourneyEngine({ ...base, notifications: dyingAfterCommit });
    await expect(afterCommit.runDue()).rejects.toThrow('killed after commit');
    await engine().runDue();
    await engine().runDue();
    const sent = await sends(j.id);
    expect(sent).toEqual([{ id: sent[0]!.id, step: 'hello', version: 1, to: `device_id:${[...ids].sort().join(',')}` }]);
    expect((await stepCounts(j.id)).hello).toMatchObject({ entered: 3, waiting: 0, sent: 3 });
  });

  it('pause holds entrants and skips triggers; resume moves them; archive makes them leave', async () => {
    clock.set(T0);
    const j = await create({
      name: 'Pausing',
      trigger: { event: 'signup' },
      steps: [
        { id: 'wait', type: 'delay', duration: '10m' },
        { id: 'hi', type: 'send', notification: { payload: { alert: 'hi' } } },
        { id: 'later', type: 'delay', duration: '3d' },
      ],
    });
    const [d1, d2, d3] = [await device(), await device(), await device()];
    await event(d1, 'signup');
    await event(d2, 'signup');
    await engine().runDue();
    expect((await call(h, 'POST', `/v6/journeys/${j.id}/pause`, app.keys.write)).statusCode).toBe(200);
    await event(d3, 'signup');
    clock.advance(HOUR);
    await engine().runDue();
    expect(await sends(j.id)).toEqual([]);
    expect((await journey(j.id)).counts.trigger).toMatchObject({ entered: 2, skipped: 1 });

    await call(h, 'POST', `/v6/journeys/${j.id}/resume`, app.keys.write);
    await engine().runDue();
    expect(await sends(j.id)).toHaveLength(1);
    expect((await stepCounts(j.id)).later).toMatchObject({ waiting: 2 });

    await call(h, 'POST', `/v6/journeys/${j.id}/archive`, app.keys.write);
    expect((await stepCounts(j.id)).later).toMatchObject({ waiting: 0, exited: 2 });
    clock.advance(4 * 24 * HOUR);
    expect(await engine().runDue()).toBe(0);
    await event(d3, 'signup');
    expect((await journey(j.id)).counts.trigger).toMatchObject({ entered: 2, skipped: 1 });
  });

  it('an archive exits a batch of entrants with its answer and the workers the rest, a batch a transaction', async () => {
    clock.set(T0);
    const j = await create({ name: 'Crowded', trigger: { event: 'crowd' }, steps: [{ id: 'wait', type: 'delay', duration: '3d' }] });
    const d = await device();
    await event(d, 'crowd');
    // more entrants than a batch, as many entering would leave them (their rows and counts), written at once
    const more = EXITS_AT_ONCE + 500;
    await sql`
      insert into journey_entrants (journey_id, version, app_id, entrant_key, device_id, step_id, phase, due_at, entered_at)
      select ${j.id}::uuid, 1, ${app.app.id}::uuid, 'd:' || x.id, x.id, 'wait', 'waiting', ${new Date(clock.now().getTime() + 3 * 24 * HOUR)},
             ${clock.now()}
      from (select gen_random_uuid() as id from generate_series(1, ${more})) x`.execute(h.db.db);
    await createRepositories().journeys.bump(h.db.db, [
      { journeyId: j.id, step: 'wait', counter: 'entered', n: more },
      { journeyId: j.id, step: 'wait', counter: 'waiting', n: more },
    ]);
    const inside = async () =>
      (
        await sql<{ n: number }>`select count(*)::int as n from journey_entrants where journey_id = ${j.id} and outcome is null`.execute(
          h.db.db,
        )
      ).rows[0]!.n;

    const archived = await call(h, 'POST', `/v6/journeys/${j.id}/archive`, app.keys.write);
    expect(archived.statusCode).toBe(200);
    expect(archived.json().journey).toMatchObject({ state: 'archived', exiting: true });
    expect(await inside()).toBe(more + 1 - EXITS_AT_ONCE);
    expect((await stepCounts(j.id)).wait).toMatchObject({ entered: more + 1, waiting: more + 1 - EXITS_AT_ONCE, exited: EXITS_AT_ONCE });

    // the next poll exits the rest (a journey's due steps are not run: it is archived)
    expect(await engine().runDue()).toBe(0);
    expect(await inside()).toBe(0);
    expect(await journey(j.id)).toMatchObject({ state: 'archived', exiting: false });
    expect((await stepCounts(j.id)).wait).toMatchObject({ entered: more + 1, waiting: 0, exited: more + 1 });
    const history = await call(h, 'GET', `/v6/journeys/${j.id}/entrants/device:${d}`, app.keys.read);
    expect(history.json().entrants[0].history.map((e: { what: string }) => e.what)).toEqual(['entered', 'waiting', 'exited']);
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n
      from journey_entrant_history x
      join journey_entrants e on e.id = x.entrant_id and e.entered_at = x.entered_at
      where e.journey_id = ${j.id} and x.entries @> '[{"k": "exited"}]'`.execute(h.db.db);
    expect(rows[0]!.n).toBe(more + 1);
    expect((await call(h, 'GET', `/v6/journeys`, app.keys.read)).json().journeys.find((x: { id: string }) => x.id === j.id)).toMatchObject({
      exiting: false,
    });
  });

  it('a batch of a journey paused or archived after the poll saw it does not run', async () => {
    clock.set(T0);
    const j = await create({
      name: 'Stopped',
      trigger: { event: 'stop' },
      steps: [{ id: 'hi', type: 'send', notification: { payload: { alert: 'hi' } } }],
    });
    await event(await device(), 'stop');
    const [group] = (await new JourneyEntrantsRepository().dueGroups(h.db.db, { now: clock.now(), aheadMs: 0, limit: 50 })).groups.filter(
      (g) => g.journey_id === j.id,
    );
    expect(group).toBeDefined();
    expect((await call(h, 'POST', `/v6/journeys/${j.id}/pause`, app.keys.write)).statusCode).toBe(200);
    expect(await engine().runGroup(group!, clock.now())).toBe(0);
    expect(await sends(j.id)).toEqual([]);
    await call(h, 'POST', `/v6/journeys/${j.id}/resume`, app.keys.write);
    expect(await engine().runGroup(group!, clock.now())).toBe(1);
    expect(await sends(j.id)).toHaveLength(1);
  });

  it('an archive waits for the entering that read its journey, and its entrant leaves with the rest', async () => {
    clock.set(T0);
    const j = await create({ name: 'Fenced', trigger: { event: 'fence' }, steps: [{ id: 'wait', type: 'delay', duration: '3d' }] });
    const repos = createRepositories();
    let archived: Promise<{ statusCode: number }> | undefined;
    let settled = false;
    const id = await device();
    await h.db.db.transaction().execute(async (trx) => {
      // as a batch of recorded events does: the journeys listening, then the entrant written
      expect((await repos.journeys.listening(trx, [app.app.id], ['fence'])).map((x) => x.id)).toEqual([j.id]);
      archived = call(h, 'POST', `/v6/journeys/${j.id}/archive`, app.keys.write).then((r) => ((settled = true), r));
      await new Promise((r) => setTimeout(r, 300));
      expect(settled).toBe(false);
      await sql`
        insert into journey_entrants (journey_id, version, app_id, entrant_key, device_id, step_id, phase, due_at, entered_at)
        values (${j.id}::uuid, 1, ${app.app.id}::uuid, ${'d:' + id}, ${id}::uuid, 'wait', 'waiting', ${new Date(clock.now().getTime() + HOUR)}, ${clock.now()})
      `.execute(trx);
    });
    expect((await archived!).statusCode).toBe(200);
    const { rows } = await sql<{ outcome: string | null }>`select outcome from journey_entrants where journey_id = ${j.id}`.execute(
      h.db.db,
    );
    expect(rows).toEqual([{ outcome: 'exited' }]);
    expect(await journey(j.id)).toMatchObject({ state: 'archived', exiting: false });
  });

  it("an archived journey whose entrants cannot leave holds back neither the others' exits nor their steps", async () => {
    clock.set(T0);
    const stuck = await create({ name: 'Stuck', trigger: { event: 'stuck' }, steps: [{ id: 'wait', type: 'delay', duration: '3d' }] });
    const gone = await create({ name: 'Gone', trigger: { event: 'gone' }, steps: [{ id: 'wait', type: 'delay', duration: '3d' }] });
    const moving = await create({ name: 'On', trigger: { event: 'on' }, steps: [{ id: 'wait', type: 'delay', duration: '1h' }] });
    const d = await device();
    for (const name of ['stuck', 'gone', 'on']) await event(d, name);
    await engine().runDue();
    // archived as a request whose exits did not finish leaves them (exiting, entrants inside)
    await sql`update journeys set state = 'archived', exiting = true where id in (${stuck.id}, ${gone.id})`.execute(h.db.db);
    await sql`
      create function pushd_test_refuse_exit() returns trigger language plpgsql as $$
      begin
        if new.journey_id = ${sql.lit(stuck.id)}::uuid and new.outcome = 'exited' then raise exception 'refused'; end if;
        return new;
      end $$`.execute(h.db.db);
    await sql`create trigger pushd_test_refuse_exit before update on journey_entrants for each row execute function pushd_test_refuse_exit()`.execute(
      h.db.db,
    );
    try {
      clock.advance(2 * HOUR);
      await engine().runDue();
    } finally {
      await sql`drop trigger pushd_test_refuse_exit on journey_entrants`.execute(h.db.db);
      await sql`drop function pushd_test_refuse_exit()`.execute(h.db.db);
    }
    expect((await stepCounts(moving.id)).wait).toMatchObject({ entered: 1, waiting: 0, passed: 1 });
    expect(await journey(gone.id)).toMatchObject({ exiting: false });
    expect(await journey(stuck.id)).toMatchObject({ exiting: true });
    await engine().runDue();
    expect(await journey(stuck.id)).toMatchObject({ exiting: false });
  });

  it("a paused journey's due entrants, however many, do not hold back an active one's", async () => {
    clock.set(T0);
    const paused = await create({ name: 'Held', trigger: { event: 'held' }, steps: [{ id: 'wait', type: 'delay', duration: '1h' }] });
    const active = await create({ name: 'Moving', trigger: { event: 'moving' }, steps: [{ id: 'wait', type: 'delay', duration: '2h' }] });
    const d = await device();
    await event(d, 'moving');
    expect((await call(h, 'POST', `/v6/journeys/${paused.id}/pause`, app.keys.write)).statusCode).toBe(200);
    // more due before it than a poll looks at
    await sql`
      insert into journey_entrants (journey_id, version, app_id, entrant_key, device_id, step_id, phase, due_at, entered_at)
      select ${paused.id}::uuid, 1, ${app.app.id}::uuid, 'd:' || x.id, x.id, 'wait', 'waiting', ${new Date(clock.now().getTime() + HOUR)},
             ${clock.now()}
      from (select gen_random_uuid() as id from generate_series(1, 6000)) x`.execute(h.db.db);
    clock.advance(3 * HOUR);
    await engine().runDue();
    expect((await stepCounts(active.id)).wait).toMatchObject({ entered: 1, waiting: 0, passed: 1 });
    await sql`delete from journey_entrants where journey_id = ${paused.id}`.execute(h.db.db);
  });

  it('versions: entrants inside finish the version they entered, new ones take the new one', async () => {
    clock.set(T0);
    const v1 = {
      name: 'Versions',
      trigger: { api: true },
      steps: [
        { id: 'wait', type: 'delay', duration: '1h' },
        { id: 'say', type: 'send', notification: { payload: { alert: 'v1' } } },
      ],
    };
    const j = await create(v1);
    const [old, fresh] = [await device(), await device()];
    await enter(j.id, { device_id: old });
    await engine().runDue();
    const v2 = { ...v1, steps: [{ id: 'say', type: 'send', notification: { payload: { alert: 'v2' } } }] };
    expect((await call(h, 'PUT', `/v6/journeys/${j.id}`, app.keys.write, { journey: v2 })).json().journey.version).toBe(2);
    await enter(j.id, { device_id: fresh });
    await engine().runDue();
    clock.advance(HOUR);
    await engine().runDue();
    const rows = await h.db.db
      .selectFrom('notifications')
      .select(['payload', 'request'])
      .where(sql<boolean>`request->'journey'->>'id' = ${j.id}`)
      .orderBy('created_at')
      .execute();
    expect(
      rows.map((r) => [(r.payload as { alert: string }).alert, (r.request as { to: { criteria: string[] }[] }).to[0]!.criteria]),
    ).toEqual([
      ['v2', [fresh]],
      ['v1', [old]],
    ]);
  });

  it('re-entry: never, after_exit, or after a time since the last entry', async () => {
    clock.set(T0);
    const make = (re_entry: unknown) =>
      create({ name: 'Again', trigger: { api: true }, re_entry, steps: [{ id: 'w', type: 'delay', duration: '1h' }] });
    const [never, afterExit, afterWeek] = [await make('never'), await make('after_exit'), await make({ after: '7d' })];
    const d = await device();
    for (const j of [never, afterExit, afterWeek]) expect((await enter(j.id, { device_id: d })).outcome).toBe('entered');
    // still inside: none lets it in again
    for (const j of [never, afterExit, afterWeek]) expect((await enter(j.id, { device_id: d })).outcome).toBe('not_re_entered');
    await engine().runDue();
    clock.advance(2 * HOUR);
    await engine().runDue();
    expect((await enter(never.id, { device_id: d })).outcome).toBe('not_re_entered');
    expect((await enter(afterExit.id, { device_id: d })).outcome).toBe('entered');
    expect((await enter(afterWeek.id, { device_id: d })).outcome).toBe('not_re_entered');
    clock.advance(7 * 24 * HOUR);
    expect((await enter(afterWeek.id, { device_id: d })).outcome).toBe('entered');
  });

  it('a batch send is cut with its notification and stores no audience; one the fan-out must cut stores one', async () => {
    clock.set(T0);
    const sending = (name: string, payload: Record<string, unknown>) =>
      create({ name, trigger: { api: true }, steps: [{ id: 'hi', type: 'send', notification: { payload } }] });
    const plain = await sending('Plain', { alert: 'hi' });
    // a collapse_key may replace a notification already sending: only the fan-out handles that
    const collapsing = await sending('Collapsing', { alert: 'hi', collapse_key: 'news' });
    const [d1, d2] = [await device(), await device()];
    for (const j of [plain, collapsing]) for (const d of [d1, d2]) expect((await enter(j.id, { device_id: d })).outcome).toBe('entered');
    const audiences = async () =>
      (
        await h.db.db
          .selectFrom('audiences')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('app_id', '=', app.app.id)
          .executeTakeFirstOrThrow()
      ).n;
    const before = Number(await audiences());
    await engine().runDue();
    const sent = async (journeyId: string) => {
      const [only, ...more] = await sends(journeyId);
      expect(more).toEqual([]);
      return h.db.db
        .selectFrom('notifications')
        .select(['audience_id', 'fanout_done'])
        .where('id', '=', only!.id)
        .executeTakeFirstOrThrow();
    };
    expect(await sent(plain.id)).toEqual({ audience_id: null, fanout_done: true });
    expect((await sent(collapsing.id)).audience_id).toEqual(expect.any(String));
    expect(Number(await audiences())).toBe(before + 1);
  });
});
