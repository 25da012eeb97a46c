/**
 * The journeys benchmark's waiting phase: entrants waiting 30 days on a delay. The worker's CPU when nothing is due,
 * the poll's own cost, their state's bytes, the WAL of a step transition, and archiving their journey.
 */
import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from '../../src/db/schema.js';
import { JourneyEntrantsRepository } from '../../src/db/repositories/journey-entrants.js';
import { untilExited } from './journeys-events.js';
import { ENTERED_HISTORY, SENT_ENTRY, type JourneysRun } from './journeys-run.js';
import { cpuMs, median } from './setup.js';

/** A history as an entrant that went through 20 steps has it: what each of its steps writes again. */
const LONG_HISTORY = 20;
/** Polls of the due query timed alone. */
const POLLS = 500;
/** Entrants of one step transition whose WAL is counted. */
const BATCH = 1000;

/** `waiting` entrants of a new journey, waiting on its 30-day delay: the worker's idle CPU before and after, their bytes. */
export async function parkEntrants(run: JourneysRun, waiting: number, quietSeconds: number) {
  const { stack, ids } = run;
  const db = stack.db.db;
  const idleBefore = await idleCpu(run, quietSeconds);
  const parked = await run.call('POST', '/v6/journeys', {
    journey: { name: 'parked', trigger: { api: true }, steps: [{ id: 'wait', type: 'delay', duration: '30d' }] },
  });
  const bytesBefore = await entrantBytes(db);
  const parkedStart = randomUUID();
  await sql`
    with entered as (
      insert into journey_entrants (journey_id, version, app_id, entrant_key, device_id, step_id, phase, due_at, entered_at, start_id)
      select ${parked.journey.id}::uuid, 1, ${stack.app.id}::uuid, 'd:' || (${ids}::uuid[])[1 + i % ${ids.length}], (${ids}::uuid[])[1 + i % ${ids.length}],
             'wait', 'waiting', now() + interval '30 days', now(), ${parkedStart}::uuid
      from generate_series(1, ${waiting}) as i
      returning 1)
    insert into journey_entrant_history (entrant_id, entered_at, seq, entries)
    select ${parkedStart}::uuid, now(), 0, ${JSON.stringify(ENTERED_HISTORY)}::jsonb where exists (select from entered)`.execute(db);
  await sql`vacuum analyze journey_entrants, journey_entrant_history`.execute(db);
  const bytesPerEntrant = ((await entrantBytes(db)) - bytesBefore) / waiting;
  const idleAfter = await idleCpu(run, quietSeconds);
  return { journeyId: parked.journey.id, idleBefore, idleAfter, bytesPerEntrant };
}

/** The worker's CPU over a quiet window, in % of a core. */
async function idleCpu(run: JourneysRun, quietSeconds: number): Promise<number> {
  const c0 = cpuMs(run.worker.pid!);
  await new Promise((r) => setTimeout(r, quietSeconds * 1000));
  return ((cpuMs(run.worker.pid!) - c0) / (quietSeconds * 1000)) * 100;
}

async function entrantBytes(db: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{ bytes: string }>`
    select coalesce(sum(pg_total_relation_size(inhrelid)), 0) as bytes from pg_inherits
    where inhparent in ('journey_entrants'::regclass, 'journey_entrant_history'::regclass)`.execute(db);
  return Number(rows[0]!.bytes);
}

/**
 * The poll alone, as the worker runs it when nothing is due, over one connection: its median time, and its CPU here
 * (the client) and in that connection's PostgreSQL backend, per poll.
 */
export async function pollAlone(db: Kysely<Database>) {
  const entrantsRepo = new JourneyEntrantsRepository();
  const queryMs: number[] = [];
  const cpu = await db.connection().execute(async (conn) => {
    const backend = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(conn)).rows[0]!.pid;
    for (let i = 0; i < 20; i++) await entrantsRepo.dueGroups(conn, { now: new Date(), aheadMs: 200, limit: 50 }); // warm
    const client0 = process.cpuUsage();
    const backend0 = cpuMs(backend);
    for (let i = 0; i < POLLS; i++) {
      const t = performance.now();
      await entrantsRepo.dueGroups(conn, { now: new Date(), aheadMs: 200, limit: 50 });
      queryMs.push(performance.now() - t);
    }
    const client = process.cpuUsage(client0);
    return { clientMs: (client.user + client.system) / 1000 / POLLS, backendMs: (cpuMs(backend) - backend0) / POLLS };
  });
  return { polls: POLLS, medianMs: median(queryMs), ...cpu };
}

/** EXPLAIN (ANALYZE, WAL)'s plan: the WAL its statement wrote, full-page images included, and their count. */
type WalPlan = { 'QUERY PLAN': [{ Plan: { 'WAL Bytes': number; 'WAL FPI': number } }] };

/**
 * WAL bytes an entrant of a batch; the full-page images among them named, since a checkpoint between the fills and the
 * statement makes each first write of a page after it carry the whole page (a figure many times the usual).
 */
function walOf(plan: WalPlan['QUERY PLAN'][0]['Plan']): string {
  const bytes = `${(plan['WAL Bytes'] / BATCH).toFixed(0)} bytes`;
  return plan['WAL FPI'] > 0 ? `${bytes} (${plan['WAL FPI']} full-page images after a checkpoint)` : bytes;
}

/**
 * One step transition over a batch of the parked entrants, as JourneyEntrantsRepository.advance writes it (EXPLAIN
 * counts its WAL alone: the server's WAL position moves with every other database on it): bare, with the history row a
 * send appends, and once the history is LONG_HISTORY entries.
 */
export async function transitionWal(db: Kysely<Database>, parkedId: string) {
  const plan = async (statement: RawBuilder<WalPlan>) => walOf((await statement.execute(db)).rows[0]!['QUERY PLAN'][0].Plan);
  const bare = await plan(sql<WalPlan>`
    explain (analyze, wal, format json)
    update journey_entrants e set phase = 'arrived', due_at = now(), seq = e.seq + 1
    from (select id, entered_at, seq from journey_entrants where journey_id = ${parkedId}::uuid limit ${BATCH}) t
    where e.id = t.id and e.entered_at = t.entered_at and e.seq = t.seq`);
  // a row of journey_entrant_history by the same statement (read by the outer select, so the plan's top node counts its WAL)
  const withHistoryRow = (entrantsMoved: ReturnType<typeof sql>) => sql<WalPlan>`
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
  const withHistory = await plan(
    withHistoryRow(sql`(select id, entered_at, seq from journey_entrants where journey_id = ${parkedId}::uuid limit ${BATCH})`),
  );
  const someParked = sql`(select id, entered_at from journey_entrants where journey_id = ${parkedId}::uuid order by id limit ${BATCH})`;
  await writeLongHistory(db, someParked);
  const longHistory = await plan(withHistoryRow(someParked));
  return { bare, withHistory, longHistory, longEntries: LONG_HISTORY };
}

/** LONG_HISTORY rows of history for each of `entrants`, each its own move's, as the engine writes them. */
async function writeLongHistory(db: Kysely<Database>, entrants: ReturnType<typeof sql>): Promise<void> {
  // each entry its own time, step and notification, as a real one has (entries alike would compress to nothing)
  const longHistory = Array.from({ length: LONG_HISTORY }, (_, i) => ({
    ...SENT_ENTRY,
    t: SENT_ENTRY.t + i * 3_600_917,
    s: `step ${i}`,
    n: randomUUID(),
  }));
  // the entrants' seq moved past them
  await sql`
    with bumped as (
      update journey_entrants e set seq = e.seq + ${LONG_HISTORY}
      from ${entrants} t where e.id = t.id and e.entered_at = t.entered_at
      returning e.id, e.entered_at, e.seq)
    insert into journey_entrant_history (entrant_id, entered_at, seq, entries)
    select b.id, b.entered_at, b.seq - ${LONG_HISTORY} + h.i, jsonb_build_array(h.entry)
    from bumped b, jsonb_array_elements(${JSON.stringify(longHistory)}::jsonb) with ordinality as h(entry, i)`.execute(db);
}

/** The history a journey's entrants wrote going through the engine: their own rows, and their start's row shared among them. */
export async function historyBytes(db: Kysely<Database>, journeyId: string): Promise<number> {
  const { rows } = await sql<{ bytes: number }>`
    with mine as (select id, entered_at, start_id from journey_entrants where journey_id = ${journeyId}::uuid)
    select ((select coalesce(sum(pg_column_size(h.entries)), 0)
             from journey_entrant_history h join mine m on h.entrant_id = m.id and h.entered_at = m.entered_at)
            + (select coalesce(sum(pg_column_size(h.entries)), 0)
               from journey_entrant_history h where h.entrant_id in (select start_id from mine))
           )::float8 / greatest((select count(*) from mine), 1) as bytes`.execute(db);
  return Number(rows[0]!.bytes ?? 0);
}

/**
 * Archiving a journey: its answer, then until the workers have exited the entrants it left inside; beside the one
 * statement that exited them all within the answer before (its update and history rows), in a transaction rolled back.
 */
export async function archiveTimes(db: Kysely<Database>, archive: () => Promise<unknown>, journeyId: string) {
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
