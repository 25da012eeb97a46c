/**
 * Journeys benchmark (issue 58), against the compiled service (one API and one worker process) on mock gateways:
 *   1. POST /v6/devices/:id/events throughput and p99 without journeys and with 10 active journeys triggered by the
 *      event, in alternating rounds of the same run (the machine drifts);
 *   2. after 2,000 due at once not counted, `entrants` entrants whose send step comes due at one moment (written 4 s
 *      before it): from that moment to the last push at the mocks, against the bare node:http2 client sending as
 *      many pushes (bench/lib/bare-client.ts), every device once, just before the phase and again after it (the mean
 *      of their rates); the CPU a push of the
 *      worker, PostgreSQL and this process (the mock gateways), the bare client's, the share of the cores busy, and the
 *      ratio those CPU costs allow on the machine's cores;
 *   3. with `waiting` entrants waiting (nothing due): the worker's CPU over a quiet window before and after they are
 *      there, and the poller's due query's time; the bytes of entrant state per entrant (with a history of two
 *      entries, its row of journey_entrant_history counted); the WAL of one step transition (EXPLAIN's WAL bytes of
 *      the engine's statement over a batch; full-page images named), without and with a history entry appended, and
 *      once the history is 20 entries long; the history's bytes per entrant of (2);
 *   4. archiving the journey of (3): its answer, and the time until the worker's polls have exited the rest, beside the
 *      one statement that exited them all before, rolled back.
 *
 *   npm run bench -- journeys [--devices 100000] [--entrants 100000] [--waiting 1000000] [--events 4000] [--rounds 2]
 *                             [--concurrency 16] [--quiet-seconds 10] [--only events|due] [--due-journeys 1]
 * `--only events` runs (1) alone, `--only due` (2) alone; `--due-journeys N` spreads (2)'s entrants over N journeys.
 */
import { sql } from 'kysely';
import { bareAround, bareRun, dueAtOnce, dueRows } from './lib/journeys-due.js';
import { eventRounds, eventRows } from './lib/journeys-events.js';
import { startJourneysRun } from './lib/journeys-run.js';
import { archiveTimes, historyBytes, parkEntrants, pollAlone, transitionWal } from './lib/journeys-waiting.js';
import { arg, printTable } from './lib/setup.js';
import { BENCH_BUNDLE } from './lib/stack.js';

const devices = Number(arg('devices', '100000'));
const entrants = Math.min(devices, Number(arg('entrants', '100000')));
const waiting = Number(arg('waiting', '1000000'));
const events = Number(arg('events', '4000'));
const rounds = Number(arg('rounds', '2'));
const concurrency = Number(arg('concurrency', '16'));
const quietSeconds = Number(arg('quiet-seconds', '10'));
const only = arg('only', '');
const dueJourneys = Number(arg('due-journeys', '1'));
const queue = arg('queue', process.env.REDIS_URL ? 'redis' : 'postgres');
const DUE_WARM_UP = 2000;

async function main() {
  const run = await startJourneysRun({ database: arg('database', 'bench_journeys'), queue, devices });
  const { stack, services } = run;
  const db = stack.db.db;
  // (1) events, alternating rounds without and with 10 journeys the event enters (each device enters each once)
  const eventsPhase = only === 'due' ? null : await eventRounds(run, { events, rounds, concurrency });
  if (eventsPhase && only === 'events') {
    console.log(
      `\njourneys benchmark, events alone: ${devices} devices, ${events} a round x ${rounds} rounds at concurrency ${concurrency}\n`,
    );
    printTable(eventRows(eventsPhase));
    await services.stop();
    await stack.close();
    process.exit(0);
  }
  // (2) `entrants` entrants due at one moment: their pushes against the bare client's, after a few due at once not
  // counted (the worker's connections to the gateways, its due path's JIT and plans, as a running worker has them)
  await dueAtOnce(run, Math.min(DUE_WARM_UP, entrants), dueJourneys);
  const bareBefore = await bareRun(run, entrants);
  const due = await dueAtOnce(run, entrants, dueJourneys);
  const bare = bareAround(bareBefore, await bareRun(run, entrants));
  const notifications = await sql<{ n: number }>`
    select count(*)::int as n from notifications where request->'journey'->>'id' = any(${due.journeyIds}::text[])`.execute(db);
  if (!eventsPhase) {
    console.log(`\njourneys benchmark, due alone: ${devices} devices, ${entrants} entrants due at once over ${dueJourneys} journeys\n`);
    printTable(dueRows(due, bare, notifications.rows[0]!.n));
    await services.stop();
    await stack.close();
    process.exit(due.missed > 0 || due.twice > 0 ? 1 : 0);
  }
  // (3) `waiting` entrants waiting 30 days on a journey's delay: the poller when nothing is due, and their size
  const parked = await parkEntrants(run, waiting, quietSeconds);
  const poll = await pollAlone(db);
  const pollPercent = (intervalMs: number) => (((poll.clientMs + poll.backendMs) / intervalMs) * 100).toFixed(2);
  const wal = await transitionWal(db, parked.journeyId);
  const history = await historyBytes(db, due.journeyIds[0]!);
  // (4) archiving the parked journey: its answer and the workers' exits of the rest, beside one statement
  const archiving = await archiveTimes(db, () => run.call('POST', `/v6/journeys/${parked.journeyId}/archive`), parked.journeyId);

  console.log(
    `\njourneys benchmark: ${devices} devices, events ${events} a round x ${rounds} rounds at concurrency ${concurrency}, ${entrants} entrants due at once over ${dueJourneys} journeys, ${waiting} waiting; queue ${queue}; bundle ${BENCH_BUNDLE}\n`,
  );
  printTable([
    ...eventRows(eventsPhase),
    ...dueRows(due, bare, notifications.rows[0]!.n),
    ['worker CPU idle, no entrants / with them waiting', `${parked.idleBefore.toFixed(2)} % / ${parked.idleAfter.toFixed(2)} % of a core`],
    [`due poll with them waiting (median of ${poll.polls})`, `${poll.medianMs.toFixed(2)} ms`],
    ['  its CPU a poll: client + PostgreSQL backend', `${poll.clientMs.toFixed(3)} + ${poll.backendMs.toFixed(3)} ms`],
    ['  poller cost, nothing due, at 1000 / 200 ms polls (issue: < 1 %)', `${pollPercent(1000)} % / ${pollPercent(200)} % of a core`],
    ['entrant state per entrant (heap + indexes, its history rows too)', `${parked.bytesPerEntrant.toFixed(0)} bytes`],
    ['WAL per step transition (batch of 1000)', wal.bare],
    ['  with history on: a send entry appended (its row of journey_entrant_history)', wal.withHistory],
    [`  the same with a history of ${wal.longEntries} entries`, wal.longHistory],
    [`history per entrant, (2)'s after its send (its rows' jsonb, its start's row shared)`, `${history.toFixed(0)} bytes`],
    [
      `archiving ${waiting} waiting: the answer / the rest, by the worker's polls`,
      `${(archiving.answerMs / 1000).toFixed(2)} / ${(archiving.restMs / 1000).toFixed(1)} s`,
    ],
    ['  one statement exiting them all (rolled back)', `${(archiving.oneStatementMs / 1000).toFixed(1)} s`],
  ]);

  await services.stop();
  await stack.close();
  process.exit(due.missed > 0 || due.twice > 0 ? 1 : 0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
