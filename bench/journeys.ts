/**
 * Journeys benchmark (issue 58), against the compiled service (one API and one worker process) on mock gateways:
 *   1. POST /v6/devices/:id/events throughput and p99 without journeys and with 10 active journeys triggered by the
 *      event, in alternating rounds of the same run (the machine drifts);
 *   2. `entrants` entrants whose delay ends at one moment: from that moment to the last push at the mocks, against
 *      the bare node:http2 client sending as many pushes (bench/lib/bare-client.ts), every device once; the CPU a push
 *      of this process (the mock gateways) in both, and the ratio those CPU costs allow on the machine's cores;
 *   3. with `waiting` entrants waiting (nothing due): the worker's CPU over a quiet window before and after they are
 *      there, and the poller's due query's time; the bytes of entrant state per entrant (with a history of two
 *      entries, its row of journey_entrant_history counted); the WAL of one step transition (EXPLAIN's WAL bytes of
 *      the engine's statement over a batch), without and with a history entry appended, and once the history is 20
 *      entries long; the history's bytes per entrant of (2);
 *   4. archiving the journey of (3): its answer, and the time until the worker's polls have exited the rest, beside the
 *      one statement that exited them all before, rolled back.
 *
 *   npm run bench -- journeys [--devices 100000] [--entrants 100000] [--waiting 1000000] [--events 4000] [--rounds 2]
 *                             [--concurrency 16] [--quiet-seconds 10] [--only events]
 * `--only events` runs (1) alone.
 */
import { cpus } from 'node:os';
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../src/db/schema.js';
import { parseFcmServiceAccount } from '../src/domain/credentials.js';
import { ServiceAccountTokenCredential } from '../src/gateways/google-oauth.js';
import { JourneyEntrantsRepository } from '../src/db/repositories/journey-entrants.js';
import { backendsCpuSince, databaseBackendsCpu, databaseWalSince, walMark } from './lib/database-wal.js';
import { machineCpu } from './lib/proc-cpu.js';
import { arg, cpuMs, median, parentPid, percentile, printTable, serverCpuMs } from './lib/setup.js';
import { BENCH_BUNDLE, bareBroadcast, benchStack, startServices } from './lib/stack.js';

const devices = Number(arg('devices', '100000'));
const entrants = Math.min(devices, Number(arg('entrants', '100000')));
const waiting = Number(arg('waiting', '1000000'));
const events = Number(arg('events', '4000'));
const rounds = Number(arg('rounds', '2'));
const concurrency = Number(arg('concurrency', '16'));
const quietSeconds = Number(arg('quiet-seconds', '10'));
const onlyEvents = arg('only', '') === 'events';
const queue = arg('queue', process.env.REDIS_URL ? 'redis' : 'postgres');
const PAYLOAD = { alert: 'bench', badge: 1 };
const JOURNEYS = 10;
/** A history as entering a delay writes it, and the entry a send appends (src/domain/journey-history.ts). */
const ENTERED_HISTORY = [
  { t: Date.now(), s: 'wait', k: 'entered' },
  { t: Date.now(), s: 'wait', k: 'waiting', u: Date.now() + 30 * 86_400_000 },
];
const SENT_ENTRY = { t: Date.now(), s: 'wait', k: 'sent', n: '0195f1a2-7c4e-7d3b-9a61-2f0c8e4b5d17' };
/** A history as an entrant that went through 20 steps has it: what each of its steps writes again. */
const LONG_HISTORY = 20;
/** How long before their due moment the due entrants are written (the fill, analyze and vacuum fit in it). */
const DUE_LEAD_MS = 4000;

async function main() {
  const stack = await benchStack(arg('database', 'bench_journeys'), { queue, redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
  const { db, apns, fcm, keys, app } = stack;
  await sql`
    insert into devices (app_id, platform, token)
    select ${app.id}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex')
    from generate_series(1, ${devices}) as i`.execute(db.db);
  await sql`analyze devices`.execute(db.db);
  const ids = (await db.db.selectFrom('devices').select('id').orderBy('id').execute()).map((d) => d.id);
  const services = await startServices({ ...stack.env, JOURNEY_POLL_MS: '200' }, { mode: 'split', workers: 1 });
  const { base } = services;
  const worker = services.workers[0]!;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Basic ${Buffer.from(`:${keys.write}`).toString('base64')}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<{ journey: { id: string } }>;
  };

  // (1) events, alternating rounds without and with 10 journeys the event enters (each device enters each once)
  let next = 0;
  const postmaster = parentPid((await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db.db)).rows[0]!.pid);
  const eventRound = async () => {
    const latencies: number[] = [];
    const end = next + events;
    const api0 = cpuMs(services.api.pid!);
    const worker0 = cpuMs(worker.pid!);
    const pg0 = serverCpuMs(postmaster);
    const db0 = await databaseBackendsCpu(db);
    const wal0 = await walMark(db);
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (;;) {
          const k = next++;
          if (k >= end) return;
          const t = performance.now();
          await call('POST', `/v6/devices/${ids[k % devices]}/events`, { events: [{ name: 'browse' }] });
          latencies.push(performance.now() - t);
        }
      }),
    );
    latencies.sort((a, b) => a - b);
    const answered = performance.now();
    // the journey workers apply the events after the requests (journey_events): a round ends when they have
    for (;;) {
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from journey_events`.execute(db.db);
      if (rows[0]!.n === 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    return {
      perSecond: latencies.length / ((answered - t0) / 1000),
      // the events applied too: what the service keeps up with
      appliedPerSecond: latencies.length / ((performance.now() - t0) / 1000),
      p99: percentile(latencies, 99),
      // CPU an event costs the API process and PostgreSQL (all its processes: other work on the server counts too)
      apiMs: (cpuMs(services.api.pid!) - api0) / events,
      // the worker applies the events after their requests (the round waits for it)
      workerMs: (cpuMs(worker.pid!) - worker0) / events,
      pgMs: (serverCpuMs(postmaster) - pg0) / events,
      pgDbMs: (await backendsCpuSince(db, db0)) / events,
      // this database's WAL (pg_waldump; null where it cannot read the server's WAL)
      walBytes: ((await databaseWalSince(db, wal0)) ?? NaN) / events,
    };
  };
  const browse = (k: number) => ({
    name: `browse ${k}`,
    trigger: { event: 'browse' },
    exit_on: ['purchase'],
    steps: [{ id: 'later', type: 'delay', duration: '90d' }],
  });
  type Round = Awaited<ReturnType<typeof eventRound>>;
  const without: Round[] = [];
  const withJourneys: Round[] = [];
  await eventRound(); // warm-up: connections, JIT
  for (let round = 0; round < rounds; round++) {
    without.push(await eventRound());
    const made = [];
    for (let k = 0; k < JOURNEYS; k++) made.push((await call('POST', '/v6/journeys', { journey: browse(k) })).journey.id);
    withJourneys.push(await eventRound());
    for (const id of made) await call('POST', `/v6/journeys/${id}/archive`);
    // the archived journeys' entrants leave by the worker's polls: the next round without journeys must not pay for it
    await untilExited(db.db, made);
    console.log(
      `events round ${round + 1}: without ${without.at(-1)!.perSecond.toFixed(0)}/s, with ${withJourneys.at(-1)!.perSecond.toFixed(0)}/s`,
    );
  }

  const ratio = (a: number, b: number) => (b > 0 ? (a / b).toFixed(2) : '-');
  const eventRows = (): [string, string][] => [
    ['events/s without journeys (median)', median(without.map((r) => r.perSecond)).toFixed(0)],
    [`events/s with ${JOURNEYS} journeys (median)`, median(withJourneys.map((r) => r.perSecond)).toFixed(0)],
    ['  ratio (issue: >= 0.9)', ratio(median(withJourneys.map((r) => r.perSecond)), median(without.map((r) => r.perSecond)))],
    [
      `  with the journey workers' backlog applied: events/s, ratio`,
      `${median(withJourneys.map((r) => r.appliedPerSecond)).toFixed(0)}, ${ratio(
        median(withJourneys.map((r) => r.appliedPerSecond)),
        median(without.map((r) => r.perSecond)),
      )}`,
    ],
    [
      'events p99 without / with',
      `${median(without.map((r) => r.p99)).toFixed(1)} / ${median(withJourneys.map((r) => r.p99)).toFixed(1)} ms`,
    ],
    ['  ratio (issue: <= 1.2)', ratio(median(withJourneys.map((r) => r.p99)), median(without.map((r) => r.p99)))],
    [
      'CPU an event, API process without / with',
      `${median(without.map((r) => r.apiMs)).toFixed(2)} / ${median(withJourneys.map((r) => r.apiMs)).toFixed(2)} ms`,
    ],
    [
      'CPU an event, the worker without / with',
      `${median(without.map((r) => r.workerMs)).toFixed(2)} / ${median(withJourneys.map((r) => r.workerMs)).toFixed(2)} ms`,
    ],
    [
      'CPU an event, PostgreSQL without / with',
      `${median(without.map((r) => r.pgMs)).toFixed(2)} / ${median(withJourneys.map((r) => r.pgMs)).toFixed(2)} ms`,
    ],
    [
      "  this database's backends alone (a shared server's other work left out)",
      `${median(without.map((r) => r.pgDbMs)).toFixed(2)} / ${median(withJourneys.map((r) => r.pgDbMs)).toFixed(2)} ms`,
    ],
    [
      'WAL an event without / with (this database)',
      `${median(without.map((r) => r.walBytes)).toFixed(0)} / ${median(withJourneys.map((r) => r.walBytes)).toFixed(0)} bytes`,
    ],
  ];
  if (onlyEvents) {
    console.log(
      `\njourneys benchmark, events alone: ${devices} devices, ${events} a round x ${rounds} rounds at concurrency ${concurrency}\n`,
    );
    printTable(eventRows());
    await services.stop();
    await stack.close();
    process.exit(0);
  }

  // (2) `entrants` entrants due at one moment, DUE_LEAD_MS ahead: their pushes against the bare client's
  const due = await call('POST', '/v6/journeys', {
    journey: { name: 'due', trigger: { api: true }, steps: [{ id: 'push', type: 'send', notification: { payload: PAYLOAD } }] },
  });
  const received = new Map<string, number>();
  let firstPush = 0;
  const all = new Promise<number>((resolve) => {
    apns.onAccept = fcm.onAccept = (token: string) => {
      firstPush ||= performance.now();
      received.set(token, (received.get(token) ?? 0) + 1);
      if (received.size === entrants) resolve(performance.now());
    };
  });
  // the due moment is the bench's, on the one clock PostgreSQL and this process read: the rows cannot be due before it
  const dueWall = new Date(Date.now() + DUE_LEAD_MS);
  const dueAt = performance.now() + (dueWall.getTime() - Date.now());
  // as the engine enters them: one first history row for the start they share (start_id)
  const dueStart = randomUUID();
  await sql`
    with entered as (
      insert into journey_entrants (journey_id, version, app_id, entrant_key, device_id, step_id, phase, due_at, entered_at, start_id)
      select ${due.journey.id}::uuid, 1, ${app.id}::uuid, 'd:' || d.id, d.id, 'push', 'arrived', ${dueWall}::timestamptz, now(),
             ${dueStart}::uuid
      from (select id from devices where app_id = ${app.id}::uuid order by id limit ${entrants}) d
      returning 1)
    insert into journey_entrant_history (entrant_id, entered_at, seq, entries)
    select ${dueStart}::uuid, now(), 0, ${JSON.stringify(ENTERED_HISTORY.slice(0, 1))}::jsonb where exists (select from entered)`.execute(
    db.db,
  );
  // what autovacuum would do after such a fill (it is off on the machine these ran on), before the due moment
  await sql`analyze journey_entrants`.execute(db.db);
  // and after the events rounds' deleted journey_events rows (a queue's churn, which autovacuum takes at 50 dead
  // rows; left, every due batch's look for its entrants' events reads them all: 0.39 of bare instead of 0.72)
  await sql`vacuum analyze journey_events`.execute(db.db);
  if (performance.now() >= dueAt) throw new Error(`the fill took longer than the ${DUE_LEAD_MS} ms before the due moment`);
  await new Promise((r) => setTimeout(r, dueAt - performance.now()));
  const dueCpu0 = { worker: cpuMs(worker.pid!), db: await databaseBackendsCpu(db), mocks: cpuMs(process.pid), machine: machineCpu() };
  const timeout = new Promise<number>((resolve) => setTimeout(() => resolve(-1), 600_000));
  const doneAt = await Promise.race([all, timeout]);
  // CPU a due entrant from the due moment: the worker's, this database's backends', this process's (the mocks'); and
  // the share of the machine's cores busy (what is not is time the pipeline left the cores idle)
  const machine = machineCpu();
  const dueCpu = {
    worker: (cpuMs(worker.pid!) - dueCpu0.worker) / entrants,
    db: (await backendsCpuSince(db, dueCpu0.db)) / entrants,
    mocks: (cpuMs(process.pid) - dueCpu0.mocks) / entrants,
    busy: (machine.busy - dueCpu0.machine.busy) / (machine.total - dueCpu0.machine.total),
  };
  apns.onAccept = fcm.onAccept = undefined;
  const pipelineRate = doneAt > 0 ? entrants / ((doneAt - dueAt) / 1000) : 0;
  const missed = entrants - received.size;
  const twice = [...received.values()].filter((n) => n > 1).length;
  const sa = stack.serviceAccount;
  const oauth = await new ServiceAccountTokenCredential(parseFcmServiceAccount(sa.json), { tokenUrl: fcm.tokenUrl }).getAccessToken();
  const bareMocks0 = cpuMs(process.pid);
  const bare = await bareBroadcast(
    {
      apnsOrigin: apns.origin,
      fcmOrigin: fcm.origin,
      fcmTokenUrl: fcm.tokenUrl,
      apnsCredentials: stack.apnsKey.credentials,
      serviceAccount: sa.json,
    },
    oauth.access_token,
    { devices: entrants, payload: PAYLOAD, notificationId: due.journey.id },
  );
  const bareRate = bare.ok / (bare.ms / 1000);
  const bareMocksMs = (cpuMs(process.pid) - bareMocks0) / entrants;
  const notifications = await sql<{ n: number }>`
    select count(*)::int as n from notifications where request->'journey'->>'id' = ${due.journey.id}`.execute(db.db);

  // (3) `waiting` entrants waiting 30 days on a journey's delay: the poller when nothing is due, and their size
  const idle = async () => {
    const c0 = cpuMs(worker.pid!);
    await new Promise((r) => setTimeout(r, quietSeconds * 1000));
    return ((cpuMs(worker.pid!) - c0) / (quietSeconds * 1000)) * 100;
  };
  const idleBefore = await idle();
  const parked = await call('POST', '/v6/journeys', {
    journey: { name: 'parked', trigger: { api: true }, steps: [{ id: 'wait', type: 'delay', duration: '30d' }] },
  });
  const bytesBefore = await entrantBytes();
  const parkedStart = randomUUID();
  await sql`
    with entered as (
      insert into journey_entrants (journey_id, version, app_id, entrant_key, device_id, step_id, phase, due_at, entered_at, start_id)
      select ${parked.journey.id}::uuid, 1, ${app.id}::uuid, 'd:' || (${ids}::uuid[])[1 + i % ${ids.length}], (${ids}::uuid[])[1 + i % ${ids.length}],
             'wait', 'waiting', now() + interval '30 days', now(), ${parkedStart}::uuid
      from generate_series(1, ${waiting}) as i
      returning 1)
    insert into journey_entrant_history (entrant_id, entered_at, seq, entries)
    select ${parkedStart}::uuid, now(), 0, ${JSON.stringify(ENTERED_HISTORY)}::jsonb where exists (select from entered)`.execute(db.db);
  await sql`vacuum analyze journey_entrants, journey_entrant_history`.execute(db.db);
  const bytesPerEntrant = ((await entrantBytes()) - bytesBefore) / waiting;
  const idleAfter = await idle();
  // the poll alone, as the worker runs it when nothing is due, over one connection: its time, and its CPU here (the
  // client) and in that connection's PostgreSQL backend, per poll
  const entrantsRepo = new JourneyEntrantsRepository();
  const queryMs: number[] = [];
  const polls = 500;
  const poll = await db.db.connection().execute(async (conn) => {
    const backend = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(conn)).rows[0]!.pid;
    for (let i = 0; i < 20; i++) await entrantsRepo.dueGroups(conn, new Date(), 50); // warm
    const client0 = process.cpuUsage();
    const backend0 = cpuMs(backend);
    for (let i = 0; i < polls; i++) {
      const t = performance.now();
      await entrantsRepo.dueGroups(conn, new Date(), 50);
      queryMs.push(performance.now() - t);
    }
    const client = process.cpuUsage(client0);
    return { clientMs: (client.user + client.system) / 1000 / polls, backendMs: (cpuMs(backend) - backend0) / polls };
  });
  const pollPercent = (intervalMs: number) => (((poll.clientMs + poll.backendMs) / intervalMs) * 100).toFixed(2);
  // one step transition over a batch, as JourneyEntrantsRepository.advance writes it (EXPLAIN counts its WAL alone:
  // the server's WAL position moves with every other database on it)
  const batch = 1000;
  const [plan] = (
    await sql<{ 'QUERY PLAN': [{ Plan: { 'WAL Bytes': number } }] }>`
      explain (analyze, wal, format json)
      update journey_entrants e set phase = 'arrived', due_at = now(), seq = e.seq + 1
      from (select id, entered_at, seq from journey_entrants where journey_id = ${parked.journey.id}::uuid limit ${batch}) t
      where e.id = t.id and e.entered_at = t.entered_at and e.seq = t.seq`.execute(db.db)
  ).rows[0]!['QUERY PLAN'];
  const walPerTransition = plan.Plan['WAL Bytes'] / batch;
  // the same with the history entry a send appends, as JourneyEntrantsRepository.advance writes it: a row of
  // journey_entrant_history by the same statement (read by the outer select, so the plan's top node counts its WAL)
  const withHistoryRow = (entrantsMoved: ReturnType<typeof sql>) => sql<{ 'QUERY PLAN': [{ Plan: { 'WAL Bytes': number } }] }>`
    explain (analyze, wal, format json)
    with moved as (
      update journey_entrants e set phase = 'arrived', due_at = now(), seq = e.seq + 1
      from ${entrantsMoved} t
      where e.id = t.id and e.entered_at = t.entered_at
      returning e.id, e.entered_at, e.seq),
    written as (
      insert into journey_entrant_history (entrant_id, entered_at, seq, entries)
      select id, entered_at, seq, ${JSON.stringify([SENT_ENTRY])}::jsonb from moved
      returning 1)
    select count(*) from written`;
  const [planWithHistory] = (
    await withHistoryRow(
      sql`(select id, entered_at, seq from journey_entrants where journey_id = ${parked.journey.id}::uuid limit ${batch})`,
    ).execute(db.db)
  ).rows[0]!['QUERY PLAN'];
  const walPerTransitionWithHistory = planWithHistory.Plan['WAL Bytes'] / batch;
  // the same once the history is LONG_HISTORY entries: what the step writes does not hold them
  const someParked = sql`(select id, entered_at from journey_entrants where journey_id = ${parked.journey.id}::uuid order by id limit ${batch})`;
  // each entry its own time, step and notification, as a real one has (entries alike would compress to nothing)
  const longHistory = Array.from({ length: LONG_HISTORY }, (_, i) => ({
    ...SENT_ENTRY,
    t: SENT_ENTRY.t + i * 3_600_917,
    s: `step ${i}`,
    n: randomUUID(),
  }));
  // each its own move's row, as the engine writes them (the entrants' seq moved past them)
  await sql`
    with bumped as (
      update journey_entrants e set seq = e.seq + ${LONG_HISTORY}
      from ${someParked} t where e.id = t.id and e.entered_at = t.entered_at
      returning e.id, e.entered_at, e.seq)
    insert into journey_entrant_history (entrant_id, entered_at, seq, entries)
    select b.id, b.entered_at, b.seq - ${LONG_HISTORY} + h.i, jsonb_build_array(h.entry)
    from bumped b, jsonb_array_elements(${JSON.stringify(longHistory)}::jsonb) with ordinality as h(entry, i)`.execute(db.db);
  const [planLongHistory] = (await withHistoryRow(someParked).execute(db.db)).rows[0]!['QUERY PLAN'];
  const walPerTransitionLongHistory = planLongHistory.Plan['WAL Bytes'] / batch;
  // the history the entrants of (2) wrote going through the engine (entered, sent): their own rows, and their start's
  // row shared among them
  const historyBytes = await sql<{ bytes: number }>`
    with mine as (select id, entered_at, start_id from journey_entrants where journey_id = ${due.journey.id}::uuid)
    select ((select coalesce(sum(pg_column_size(h.entries)), 0)
             from journey_entrant_history h join mine m on h.entrant_id = m.id and h.entered_at = m.entered_at)
            + (select coalesce(sum(pg_column_size(h.entries)), 0)
               from journey_entrant_history h where h.entrant_id in (select start_id from mine))
           )::float8 / greatest((select count(*) from mine), 1) as bytes`.execute(db.db);

  // (4) archiving the parked journey: its answer and the workers' exits of the rest, beside one statement
  const archiving = await archiveTimes(db.db, () => call('POST', `/v6/journeys/${parked.journey.id}/archive`), parked.journey.id);

  console.log(
    `\njourneys benchmark: ${devices} devices, events ${events} a round x ${rounds} rounds at concurrency ${concurrency}, ${entrants} entrants due at once, ${waiting} waiting; queue ${queue}; bundle ${BENCH_BUNDLE}\n`,
  );
  printTable([
    ...eventRows(),
    [`${entrants} due at once: pushes/s (due -> last push)`, pipelineRate.toFixed(0)],
    ['bare node:http2 pushes/s', bareRate.toFixed(0)],
    ['  ratio (issue: >= 0.8)', ratio(pipelineRate, bareRate)],
    ['  CPU a due entrant: worker / PostgreSQL (this database)', `${dueCpu.worker.toFixed(3)} / ${dueCpu.db.toFixed(3)} ms`],
    // what sending alone costs a Node process: the worker's CPU above it is the engine's and the delivery's
    [
      '  from the due moment: the first push after; the cores busy until the last',
      `${(firstPush - dueAt).toFixed(0)} ms; ${(dueCpu.busy * 100).toFixed(0)} %`,
    ],
    ['  CPU a push of the bare client', `${(bare.cpuMs / entrants).toFixed(3)} ms`],
    ['  CPU a push of this process (the mock gateways): due / bare', `${dueCpu.mocks.toFixed(3)} / ${bareMocksMs.toFixed(3)} ms`],
    // the bare client's rate is the mocks' (one thread each), while the due phase's three share the machine's cores
    [
      `  ratio the CPU allows on ${cpus().length} cores: cores x mocks(bare) / (worker + PostgreSQL + mocks(due))`,
      ratio((cpus().length * bareMocksMs) / (dueCpu.worker + dueCpu.db + dueCpu.mocks), 1),
    ],
    ['  notifications made (batches of JOURNEY_BATCH_SIZE)', String(notifications.rows[0]!.n)],
    ['  devices missed / pushed twice', `${missed} / ${twice}`],
    ['worker CPU idle, no entrants / with them waiting', `${idleBefore.toFixed(2)} % / ${idleAfter.toFixed(2)} % of a core`],
    [`due poll with them waiting (median of ${polls})`, `${median(queryMs).toFixed(2)} ms`],
    ['  its CPU a poll: client + PostgreSQL backend', `${poll.clientMs.toFixed(3)} + ${poll.backendMs.toFixed(3)} ms`],
    ['  poller cost, nothing due, at 1000 / 200 ms polls (issue: < 1 %)', `${pollPercent(1000)} % / ${pollPercent(200)} % of a core`],
    ['entrant state per entrant (heap + indexes, its history rows too)', `${bytesPerEntrant.toFixed(0)} bytes`],
    ['WAL per step transition (batch of 1000)', `${walPerTransition.toFixed(0)} bytes`],
    ['  with history on: a send entry appended (its row of journey_entrant_history)', `${walPerTransitionWithHistory.toFixed(0)} bytes`],
    [`  the same with a history of ${LONG_HISTORY} entries`, `${walPerTransitionLongHistory.toFixed(0)} bytes`],
    [
      `history per entrant, (2)'s after its send (its rows' jsonb, its start's row shared)`,
      `${Number(historyBytes.rows[0]!.bytes ?? 0).toFixed(0)} bytes`,
    ],
    [
      `archiving ${waiting} waiting: the answer / the rest, by the worker's polls`,
      `${(archiving.answerMs / 1000).toFixed(2)} / ${(archiving.restMs / 1000).toFixed(1)} s`,
    ],
    ['  one statement exiting them all (rolled back)', `${(archiving.oneStatementMs / 1000).toFixed(1)} s`],
  ]);

  await services.stop();
  await stack.close();
  process.exit(missed > 0 || twice > 0 ? 1 : 0);

  async function entrantBytes(): Promise<number> {
    const { rows } = await sql<{ bytes: string }>`
      select coalesce(sum(pg_total_relation_size(inhrelid)), 0) as bytes from pg_inherits
      where inhparent in ('journey_entrants'::regclass, 'journey_entrant_history'::regclass)`.execute(db.db);
    return Number(rows[0]!.bytes);
  }
}

/** Until the worker's polls have exited every entrant the archived journeys left inside. */
async function untilExited(db: Kysely<Database>, journeyIds: string[]): Promise<void> {
  for (;;) {
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from journeys where id = any(${journeyIds}::uuid[]) and exiting`.execute(db);
    if (rows[0]!.n === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Archiving a journey: its answer, then until the workers have exited the entrants it left inside; beside the one
 * statement that exited them all within the answer before (its update and history rows), in a transaction rolled back.
 */
async function archiveTimes(db: Kysely<Database>, archive: () => Promise<unknown>, journeyId: string) {
  const oneStatementMs = await db.connection().execute(async (conn) => {
    await sql`begin`.execute(conn);
    const t = performance.now();
    await sql`
      with left_now as (
        update journey_entrants
        set phase = 'done', outcome = 'exited', due_at = null, wait_event = null, on_event = null, left_at = now(), seq = seq + 1
        where journey_id = ${journeyId}::uuid and outcome is null
        returning id, entered_at, seq, step_id)
      insert into journey_entrant_history (entrant_id, entered_at, seq, entries)
      select id, entered_at, seq, jsonb_build_array(jsonb_build_object('t', 0, 's', step_id, 'k', 'exited')) from left_now`.execute(conn);
    const ms = performance.now() - t;
    await sql`rollback`.execute(conn);
    return ms;
  });
  // the rolled-back versions gone, as autovacuum would take them
  await sql`vacuum journey_entrants, journey_entrant_history`.execute(db);
  const t0 = performance.now();
  await archive();
  const answerMs = performance.now() - t0;
  await untilExited(db, [journeyId]);
  return { oneStatementMs, answerMs, restMs: performance.now() - t0 - answerMs };
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
