/**
 * The journeys benchmark's events phase: POST /v6/devices/:id/events in alternating rounds without and with
 * `JOURNEYS` active journeys the event enters, each round ending once the worker has applied its events.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { backendsCpuSince, databaseBackendsCpu, databaseWalSince, serverWalSince, walMark, type WalMark } from './database-wal.js';
import { ratio, type JourneysRun } from './journeys-run.js';
import { cpuMs, median, percentile, serverCpuMs } from './setup.js';

export const JOURNEYS = 10;

export interface EventRound {
  perSecond: number;
  /** the events applied too: what the service keeps up with */
  appliedPerSecond: number;
  p99: number;
  /** CPU an event of the API process, the worker (it applies them after their requests) and PostgreSQL (all of it) */
  apiMs: number;
  workerMs: number;
  pgMs: number;
  /** this database's backends alone */
  pgDbMs: number;
  /** this database's WAL (pg_waldump), or the whole server's where pg_waldump cannot read it (`walOfServer`) */
  walBytes: number;
  walOfServer: boolean;
}

export interface EventRounds {
  without: EventRound[];
  withJourneys: EventRound[];
}

/** `rounds` pairs of rounds of `events` events from `concurrency` clients, after one round to warm up. */
export async function eventRounds(run: JourneysRun, opts: { events: number; rounds: number; concurrency: number }): Promise<EventRounds> {
  const counter = { next: 0 };
  const result: EventRounds = { without: [], withJourneys: [] };
  // warm-up, not counted: connections, JIT and plans, of the way without journeys and of the way with them alike
  await eventRound(run, opts, counter);
  await withJourneys(run, () => eventRound(run, opts, counter));
  for (let round = 0; round < opts.rounds; round++) {
    result.without.push(await eventRound(run, opts, counter));
    result.withJourneys.push(await withJourneys(run, () => eventRound(run, opts, counter)));
    const last = (rounds: EventRound[]) => rounds.at(-1)!.perSecond.toFixed(0);
    console.log(`events round ${round + 1}: without ${last(result.without)}/s, with ${last(result.withJourneys)}/s`);
  }
  return result;
}

/**
 * A round with `JOURNEYS` journeys made before it and archived after it; the archived journeys' entrants leave by the
 * worker's polls, waited for, so that the next round without journeys does not pay for it.
 */
async function withJourneys(run: JourneysRun, round: () => Promise<EventRound>): Promise<EventRound> {
  const made = [];
  for (let k = 0; k < JOURNEYS; k++) made.push((await run.call('POST', '/v6/journeys', { journey: browse(k) })).journey.id);
  const result = await round();
  for (const id of made) await run.call('POST', `/v6/journeys/${id}/archive`);
  await untilExited(run.stack.db.db, made);
  return result;
}

/** A journey the event enters (each device once), where its entrants wait. */
function browse(k: number) {
  return {
    name: `browse ${k}`,
    trigger: { event: 'browse' },
    exit_on: ['purchase'],
    steps: [{ id: 'later', type: 'delay', duration: '90d' }],
  };
}

async function eventRound(run: JourneysRun, opts: { events: number; concurrency: number }, counter: { next: number }): Promise<EventRound> {
  const { services, worker, stack, postmaster, ids } = run;
  const db = stack.db;
  const latencies: number[] = [];
  const end = counter.next + opts.events;
  const before = {
    api: cpuMs(services.api.pid!),
    worker: cpuMs(worker.pid!),
    pg: serverCpuMs(postmaster),
    db: await databaseBackendsCpu(db),
    wal: await walMark(db),
  };
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: opts.concurrency }, async () => {
      for (;;) {
        const k = counter.next++;
        if (k >= end) return;
        const t = performance.now();
        await run.call('POST', `/v6/devices/${ids[k % ids.length]}/events`, { events: [{ name: 'browse' }] });
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
    appliedPerSecond: latencies.length / ((performance.now() - t0) / 1000),
    p99: percentile(latencies, 99),
    apiMs: (cpuMs(services.api.pid!) - before.api) / opts.events,
    workerMs: (cpuMs(worker.pid!) - before.worker) / opts.events,
    pgMs: (serverCpuMs(postmaster) - before.pg) / opts.events,
    pgDbMs: (await backendsCpuSince(db, before.db)) / opts.events,
    ...(await walOfRound(db, before.wal, opts.events)),
  };
}

/** A round's WAL an event: this database's, or the whole server's where pg_waldump cannot read its WAL. */
async function walOfRound(db: DatabaseHandle, from: WalMark, events: number): Promise<{ walBytes: number; walOfServer: boolean }> {
  const ofDatabase = await databaseWalSince(db, from);
  if (ofDatabase !== null) return { walBytes: ofDatabase / events, walOfServer: false };
  return { walBytes: (await serverWalSince(db, from)) / events, walOfServer: true };
}

/** The events phase's rows of the table: medians of the rounds, without / with journeys. */
export function eventRows({ without, withJourneys }: EventRounds): [string, string][] {
  const mid = (rounds: EventRound[], f: (r: EventRound) => number) => median(rounds.map(f));
  const pair = (f: (r: EventRound) => number, digits: number, unit: string) =>
    `${mid(without, f).toFixed(digits)} / ${mid(withJourneys, f).toFixed(digits)} ${unit}`;
  const rate = (r: EventRound) => r.perSecond;
  const applied = (r: EventRound) => r.appliedPerSecond;
  return [
    ['events/s without journeys (median)', mid(without, rate).toFixed(0)],
    [`events/s with ${JOURNEYS} journeys (median)`, mid(withJourneys, rate).toFixed(0)],
    ['  ratio (issue: >= 0.9)', ratio(mid(withJourneys, rate), mid(without, rate))],
    [
      `  with the journey workers' backlog applied: events/s, ratio`,
      `${mid(withJourneys, applied).toFixed(0)}, ${ratio(mid(withJourneys, applied), mid(without, rate))}`,
    ],
    ['events p99 without / with', pair((r) => r.p99, 1, 'ms')],
    [
      '  ratio (issue: <= 1.2)',
      ratio(
        mid(withJourneys, (r) => r.p99),
        mid(without, (r) => r.p99),
      ),
    ],
    ['CPU an event, API process without / with', pair((r) => r.apiMs, 2, 'ms')],
    ['CPU an event, the worker without / with', pair((r) => r.workerMs, 2, 'ms')],
    ['CPU an event, PostgreSQL without / with', pair((r) => r.pgMs, 2, 'ms')],
    ["  this database's backends alone (a shared server's other work left out)", pair((r) => r.pgDbMs, 2, 'ms')],
    [
      `WAL an event without / with (${[...without, ...withJourneys].some((r) => r.walOfServer) ? "the whole server's: pg_waldump cannot read it" : 'this database'})`,
      pair((r) => r.walBytes, 0, 'bytes'),
    ],
  ];
}

/** Until the worker's polls have exited every entrant the archived journeys left inside. */
export async function untilExited(db: Kysely<Database>, journeyIds: string[]): Promise<void> {
  for (;;) {
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from journeys where id = any(${journeyIds}::uuid[]) and exiting`.execute(db);
    if (rows[0]!.n === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}
