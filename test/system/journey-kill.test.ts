import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { duplicateBound } from '../../bench/lib/fault-settings.js';
import type { Database } from '../../src/db/schema.js';
import { redisUrl } from '../helpers/harness.js';
import { waitFor } from '../helpers/gateways.js';
import { broadcastWorld } from './broadcast-world.js';
import { Proc } from './proc.js';

const DEVICES = 3000;
const BUNDLE = 'com.example.journeykill';
/** The worker's connections, told apart in pg_stat_activity by this name. */
const WORKER_APP = 'journey-kill-worker';
/**
 * Small bounds: a journey batch of 250 entrants is one notification, cut into 2 delivery batches of 125 (over the
 * 100 of an audience cut at creation, so "large": one sends at once). Recovery timers shortened as the faults
 * benchmark has them, so a killed worker's jobs are taken over in seconds.
 */
const SETTINGS = {
  JOURNEY_BATCH_SIZE: 250,
  DELIVERY_BATCH_SIZE: 125,
  DELIVERY_CONCURRENCY: 1,
  GATEWAY_MAX_IN_FLIGHT: 200,
  JOB_LOCK_MS: 3000,
  SWEEP_AFTER_SECONDS: 3,
};
const STEPS = [
  { id: 'pause', type: 'delay', duration: '1s' },
  { id: 'first', type: 'send', notification: { payload: { alert: 'journey-kill: first' } } },
  { id: 'opened', type: 'wait_for', event: 'never_recorded', timeout: '2s', on_event: 'end', on_timeout: 'second' },
  { id: 'second', type: 'send', notification: { payload: { alert: 'journey-kill: second' } } },
] as const;
const SENDS = ['first', 'second'] as const;

/**
 * When the worker is killed: inside a journey transaction (`locked`: it just locked its batch; a step's id: held
 * before the commit of a batch at that step, past its moves and, at a send, its notification's insert; `any`: the
 * same at whatever step), or once this many more pushes reached the mocks (its delivery mid-way).
 */
type Moment = 'locked' | 'any' | (typeof STEPS)[number]['id'] | number;
const MOMENTS: Moment[] = [
  'any',
  300,
  'first',
  'locked',
  'first',
  400,
  'opened',
  'first',
  300,
  'opened',
  'second',
  500,
  'second',
  'locked',
  'second',
  300,
];

/** What the test reads of a notification record. */
interface Send {
  journey?: { id: string; step: string };
  state: string;
  notification: { to: { criteria: string[] }[] };
  pushes_succeeded: number;
}

/** The journey's entrants as PostgreSQL sees them from outside the worker. */
function entrantsOf(db: Kysely<Database>, journeyId: string) {
  const count = async (query: ReturnType<typeof sql>) =>
    Number((await sql<{ n: string }>`select count(*) as n from (${query}) s`.execute(db)).rows[0]!.n);
  return {
    /** Entrants not finished. */
    inside: () => count(sql`select 1 from journey_entrants where journey_id = ${journeyId} and outcome is null`),
    /** Whether the worker has just locked a batch (its transaction's first statement). */
    justLocked: async () =>
      (await count(sql`
        select 1 from pg_stat_activity
        where application_name = ${WORKER_APP} and xact_start is not null and query like '%skip locked%'
      `)) > 0,
    /**
     * The worker waiting for the counters' table, its transaction's last statement: then the step of the batch it
     * holds (where the entrants locked by someone are), or null while it is not waiting.
     */
    blockedAtCounts: async () => {
      const waiting = await count(sql`
        select 1 from pg_stat_activity
        where application_name = ${WORKER_APP} and wait_event_type = 'Lock' and query like '%journey_step_counts%'
      `);
      if (waiting === 0) return null;
      const { rows } = await sql<{ step_id: string }>`
        with inside as (
          select step_id from journey_entrants where journey_id = ${journeyId} and outcome is null
        ), free as (
          select step_id from journey_entrants where journey_id = ${journeyId} and outcome is null for share skip locked
        )
        select step_id from inside group by step_id
        having count(*) > (select count(*) from free where free.step_id = inside.step_id)
      `.execute(db);
      return rows[0] ? { step: rows[0].step_id } : null;
    },
    /** Entrants at this step or before it. */
    notPast: (step: string) => {
      const upTo = STEPS.slice(0, STEPS.findIndex((s) => s.id === step) + 1).map((s) => s.id);
      return count(
        sql`select 1 from journey_entrants where journey_id = ${journeyId} and outcome is null and step_id = any(${upTo}::text[])`,
      );
    },
  };
}

/** Holds the counters' table until the answer is called: their writes wait meanwhile, their reads go on. */
async function holdCounters(url: string): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query('begin');
  await client.query('lock table journey_step_counts in exclusive mode');
  return async () => {
    await client.query('rollback');
    await client.end();
  };
}

/**
 * Exactly once under a killed worker, on the compiled processes: an API process and a worker process (Redis queue,
 * real PostgreSQL, the mock gateways), a journey whose 3,000 entrants all come due at once (delay, send, wait_for
 * that times out, send), and the worker SIGKILLed at a dozen moments while it runs them, restarted each time. Every
 * entrant finishes, each send step goes to each device in exactly one notification (the step ran once), every
 * device gets each push, the pushes sent twice stay within what the kills may resend (the delivery batches in
 * flight), and the journey's counters and the notifications' agree with what the gateways got.
 */
describe.skipIf(!redisUrl())('journeys: a worker SIGKILLed while entrants are due', () => {
  const procs: Proc[] = [];
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const p of procs) await p.stop('SIGKILL');
    for (const c of cleanups.reverse()) await c();
  });

  it('runs each step once per entrant, leaves none stuck, resends no more than the batches in flight', { timeout: 170_000 }, async () => {
    const { apns, fcm, handle, keys, port, env: world } = await broadcastWorld(BUNDLE, DEVICES, cleanups, { record: true });
    const env = { ...world, ...Object.fromEntries(Object.entries(SETTINGS).map(([k, v]) => [k, String(v)])), JOURNEY_POLL_MS: '100' };
    procs.push(Proc.server({ ...env, ROLE: 'api', PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' }));
    const base = `http://127.0.0.1:${port}`;
    const call = async <T>(method: string, url: string, key: string, body?: unknown) => {
      const res = await fetch(`${base}${url}`, {
        method,
        headers: { authorization: `Basic ${Buffer.from(`:${key}`).toString('base64')}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as T };
    };
    await waitFor('the API to answer', async () => (await fetch(`${base}/ready`).catch(() => null))?.status === 200, 60_000, 100);

    const journey = { name: 'Killed worker', trigger: { api: true }, steps: STEPS };
    const created = await call<{ journey: { id: string } }>('POST', '/v6/journeys', keys.write, { journey });
    expect(created.status, JSON.stringify(created.json)).toBe(201);
    const journeyId = created.json.journey.id;
    const entrants = entrantsOf(handle.db, journeyId);
    const journeySends = async () =>
      (await call<{ notifications: Send[] }>('GET', '/v6/notifications?per=1000', keys.read)).json.notifications.filter(
        (n) => n.journey?.id === journeyId,
      );
    const pushes = () => apns.pushes.length + fcm.pushes.length;

    // every entrant enters while no worker runs: their delays have all ended when the first worker starts
    const devices = await handle.db.selectFrom('devices').select(['id', 'token']).orderBy('id').execute();
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < devices.length) {
          const res = await call('POST', `/v6/journeys/${journeyId}/entries`, keys.write, { device_id: devices[next++]!.id });
          expect(res.json).toEqual({ entered: true, outcome: 'entered' });
        }
      }),
    );
    await new Promise((r) => setTimeout(r, 1000));

    const workerUrl = new URL(env.DATABASE_URL);
    workerUrl.searchParams.set('application_name', WORKER_APP);
    const startWorker = async () => {
      const w = Proc.server({ ...env, DATABASE_URL: workerUrl.toString(), ROLE: 'worker' });
      procs.push(w);
      await w.waitForLog('worker running', 60_000);
      return w;
    };
    let worker = await startWorker();
    const kills: string[] = [];
    const kill = async (moment: string) => {
      worker.child.kill('SIGKILL');
      expect((await worker.exited).signal).toBe('SIGKILL');
      kills.push(`${moment} (${pushes()} pushes, ${await entrants.inside()} inside)`);
    };
    for (const moment of MOMENTS) {
      // a moment that does not come within 10 s is skipped, and one the journey is past at once
      const deadline = Date.now() + 10_000;
      const past = async () =>
        (await (typeof moment === 'number' || moment === 'locked' || moment === 'any' ? entrants.inside() : entrants.notPast(moment))) ===
        0;
      if (await past()) continue;
      if (typeof moment === 'number' || moment === 'locked') {
        const from = pushes();
        const come = async () => (typeof moment === 'number' ? pushes() >= from + moment : entrants.justLocked());
        let hit = false;
        while (!(hit = await come()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 1));
        if (hit) await kill(String(moment));
      } else
        while (Date.now() < deadline) {
          // the worker held before its commit, and killed there if its batch is at the step (else let go on to the next)
          const release = await holdCounters(env.DATABASE_URL);
          const held = await waitFor('the worker to wait for the counters', entrants.blockedAtCounts, 3000, 1).catch(() => null);
          const wanted = held && (moment === 'any' || held.step === moment);
          if (wanted) await kill(`held at ${held.step}`);
          await release();
          if (wanted || (await past())) break;
        }
      if (!worker.running) worker = await startWorker();
    }
    console.log(`worker SIGKILLed ${kills.length} times: ${kills.join('; ')}`);
    expect(kills.length).toBeGreaterThanOrEqual(6);

    // every entrant finishes: none is left at a step, due or not
    await waitFor('every entrant to finish', async () => (await entrants.inside()) === 0, 60_000, 200);
    const outcomes = await handle.db
      .selectFrom('journey_entrants')
      .select(['outcome', (eb) => eb.fn.countAll<string>().as('n')])
      .where('journey_id', '=', journeyId)
      .groupBy('outcome')
      .execute();
    expect(outcomes.map((r) => [r.outcome, Number(r.n)])).toEqual([['completed', DEVICES]]);

    // each send step went to each device in exactly one notification: the step ran once per entrant
    const sends = await journeySends();
    for (const step of SENDS) {
      const targeted = sends.filter((n) => n.journey!.step === step).flatMap((n) => n.notification.to[0]!.criteria);
      expect(targeted.length, `${step}: devices targeted, counting repeats`).toBe(DEVICES);
      expect(new Set(targeted).size).toBe(DEVICES);
    }
    // and each was delivered, its record counting each device once
    await waitFor('the journey notifications to be sent', async () => (await journeySends()).every((n) => n.state === 'sent'), 60_000, 200);
    await new Promise((r) => setTimeout(r, 1000)); // a push sent twice would arrive now
    await worker.stop('SIGKILL');
    const recorded = await journeySends();
    const succeeded = (step: string) => recorded.filter((n) => n.journey!.step === step).reduce((sum, n) => sum + n.pushes_succeeded, 0);
    expect(SENDS.map(succeeded)).toEqual([DEVICES, DEVICES]);

    // every device got each push; those sent twice are within the delivery batches the kills interrupted
    const got = new Map<string, number>();
    const count = (token: string, body: unknown) => {
      const step = SENDS.find((s) => JSON.stringify(body).includes(`journey-kill: ${s}`)) ?? 'other';
      got.set(`${step} ${token}`, (got.get(`${step} ${token}`) ?? 0) + 1);
    };
    for (const p of apns.pushes) count(p.token, p.payload);
    for (const p of fcm.pushes) count(p.token, p.message);
    const missed = devices.flatMap((d) => SENDS.filter((s) => !got.has(`${s} ${d.token}`)).map((s) => `${s} ${d.id}`));
    expect(missed.length, `pushes missed, e.g. ${missed.slice(0, 3).join(', ')}`).toBe(0);
    expect(got.size).toBe(2 * DEVICES);
    const twice = pushes() - got.size;
    const bound = duplicateBound(SETTINGS, kills.length);
    console.log(`${pushes()} pushes for ${2 * DEVICES}: ${twice} sent twice, bound ${bound} (${kills.length} kills)`);
    expect(twice).toBeLessThanOrEqual(bound);

    // the journey's counters agree
    const { counts } = (await call<{ journey: { counts: Record<string, unknown> } }>('GET', `/v6/journeys/${journeyId}`, keys.read)).json
      .journey;
    expect(counts.trigger).toEqual({ entered: DEVICES, skipped: 0, filtered: 0, converted: 0 });
    const all = { entered: DEVICES, waiting: 0, failed: 0, converted: 0, exited: 0 };
    expect(counts.steps).toEqual([
      { id: 'pause', type: 'delay', ...all, passed: DEVICES, sent: 0 },
      { id: 'first', type: 'send', ...all, passed: 0, sent: DEVICES },
      { id: 'opened', type: 'wait_for', ...all, passed: DEVICES, sent: 0 },
      { id: 'second', type: 'send', ...all, passed: 0, sent: DEVICES },
    ]);
  });
});
