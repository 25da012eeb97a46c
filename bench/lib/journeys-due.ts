/**
 * The journeys benchmark's due phase: `entrants` entrants whose send step comes due at one moment, from that moment to
 * the last push at the mocks, against the bare node:http2 client sending as many pushes; the CPU a push of each part.
 */
import { cpus } from 'node:os';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { parseFcmServiceAccount } from '../../src/domain/credentials.js';
import { ServiceAccountTokenCredential } from '../../src/gateways/google-oauth.js';
import { backendsCpuSince, databaseBackendsCpu } from './database-wal.js';
import { ENTERED_HISTORY, PAYLOAD, ratio, type JourneysRun } from './journeys-run.js';
import { machineCpu } from './proc-cpu.js';
import { cpuMs } from './setup.js';
import { bareBroadcast, gatewaysOf } from './stack.js';

/** How long before their due moment the due entrants are written (the fill, analyze and vacuum fit in it). */
const DUE_LEAD_MS = 4000;

export interface DuePhase {
  entrants: number;
  /** the journeys the entrants are spread over, in turn (their send steps alike) */
  journeyIds: string[];
  pipelineRate: number;
  /** ms from the due moment to the first push at the mocks */
  firstPushMs: number;
  /** CPU ms a due entrant from the due moment: the worker's, this database's backends', this process's (the mocks'); the cores' busy share */
  cpu: { worker: number; db: number; mocks: number; busy: number };
  missed: number;
  twice: number;
}

/**
 * The entrants, written DUE_LEAD_MS before their due moment, until every device has its push; spread over `journeys`
 * journeys in turn (a group of due entrants each, as many journeys' sends coming due together are).
 */
export async function dueAtOnce(run: JourneysRun, entrants: number, journeys = 1): Promise<DuePhase> {
  const { stack, worker } = run;
  const { db, apns, fcm } = stack;
  const journeyIds: string[] = [];
  for (let i = 0; i < journeys; i++) {
    const steps = [{ id: 'push', type: 'send', notification: { payload: PAYLOAD } }];
    journeyIds.push((await run.call('POST', '/v6/journeys', { journey: { name: `due ${i}`, trigger: { api: true }, steps } })).journey.id);
  }
  const received = new Map<string, number>();
  let firstPush = 0;
  const all = new Promise<number>((resolve) => {
    apns.onAccept = fcm.onAccept = (token: string) => {
      firstPush ||= performance.now();
      received.set(token, (received.get(token) ?? 0) + 1);
      if (received.size === entrants) resolve(performance.now());
    };
  });
  // the due moment is the bench's, on the machine's one clock the worker's polls read too: the rows cannot be due before it
  const dueWall = new Date(Date.now() + DUE_LEAD_MS);
  const dueAt = performance.now() + (dueWall.getTime() - Date.now());
  await fillDue(run, { journeyIds, entrants, dueWall });
  if (performance.now() >= dueAt) throw new Error(`the fill took longer than the ${DUE_LEAD_MS} ms before the due moment`);
  await new Promise((r) => setTimeout(r, dueAt - performance.now()));
  const cpu0 = { worker: cpuMs(worker.pid!), db: await databaseBackendsCpu(db), mocks: cpuMs(process.pid), machine: machineCpu() };
  const timeout = new Promise<number>((resolve) => setTimeout(() => resolve(-1), 600_000));
  const doneAt = await Promise.race([all, timeout]);
  // what is not busy is time the pipeline left the cores idle
  const machine = machineCpu();
  const cpu = {
    worker: (cpuMs(worker.pid!) - cpu0.worker) / entrants,
    db: (await backendsCpuSince(db, cpu0.db)) / entrants,
    mocks: (cpuMs(process.pid) - cpu0.mocks) / entrants,
    busy: (machine.busy - cpu0.machine.busy) / (machine.total - cpu0.machine.total),
  };
  apns.onAccept = fcm.onAccept = undefined;
  return {
    entrants,
    journeyIds,
    pipelineRate: doneAt > 0 ? entrants / ((doneAt - dueAt) / 1000) : 0,
    firstPushMs: firstPush - dueAt,
    cpu,
    missed: entrants - received.size,
    twice: [...received.values()].filter((n) => n > 1).length,
  };
}

/** The entrants as the engine enters them, due at `dueWall`: one first history row for the start they share (start_id). */
async function fillDue(run: JourneysRun, fill: { journeyIds: string[]; entrants: number; dueWall: Date }): Promise<void> {
  const { db, app } = run.stack;
  const dueStart = randomUUID();
  const ids = fill.journeyIds;
  await sql`
    with entered as (
      insert into journey_entrants (journey_id, version, app_id, entrant_key, device_id, step_id, phase, due_at, entered_at, start_id)
      select (${ids}::uuid[])[1 + d.n % ${ids.length}], 1, ${app.id}::uuid, 'd:' || d.id, d.id, 'push', 'arrived',
             ${fill.dueWall}::timestamptz, now(), ${dueStart}::uuid
      from (select id, row_number() over (order by id) as n from devices where app_id = ${app.id}::uuid order by id limit ${fill.entrants}) d
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
}

export interface BareRun {
  rate: number;
  /** CPU ms a push: the bare client's own, and this process's (the mocks') */
  clientMs: number;
  mocksMs: number;
}

/**
 * The bare node:http2 client sending `devices` pushes (bench/lib/bare-client.ts), every device once; run before the due
 * phase and again after it, so that the machine's drift between the two does not move the ratio one way.
 */
export async function bareRun(run: JourneysRun, devices: number): Promise<BareRun> {
  const { fcm, serviceAccount: sa } = run.stack;
  const oauth = await new ServiceAccountTokenCredential(parseFcmServiceAccount(sa.json), { tokenUrl: fcm.tokenUrl }).getAccessToken();
  const mocks0 = cpuMs(process.pid);
  const bare = await bareBroadcast(gatewaysOf(run.stack), oauth.access_token, { devices, payload: PAYLOAD, notificationId: randomUUID() });
  return {
    rate: bare.ok / (bare.ms / 1000),
    clientMs: bare.cpuMs / devices,
    mocksMs: (cpuMs(process.pid) - mocks0) / devices,
  };
}

/** The bare runs before and after the due phase as one reference: their mean rate and CPU a push. */
export function bareAround(before: BareRun, after: BareRun): BareRun & { before: number; after: number } {
  const mean = (f: (b: BareRun) => number) => (f(before) + f(after)) / 2;
  return {
    rate: mean((b) => b.rate),
    clientMs: mean((b) => b.clientMs),
    mocksMs: mean((b) => b.mocksMs),
    before: before.rate,
    after: after.rate,
  };
}

/** The due phase's rows of the table. */
export function dueRows(phase: DuePhase, bare: ReturnType<typeof bareAround>, notifications: number): [string, string][] {
  const { cpu } = phase;
  return [
    [`${phase.entrants} due at once: pushes/s (due -> last push)`, phase.pipelineRate.toFixed(0)],
    [
      'bare node:http2 pushes/s: the mean of before and after',
      `${bare.rate.toFixed(0)} (${bare.before.toFixed(0)} / ${bare.after.toFixed(0)})`,
    ],
    ['  ratio (issue: >= 0.8)', ratio(phase.pipelineRate, bare.rate)],
    ['  CPU a due entrant: worker / PostgreSQL (this database)', `${cpu.worker.toFixed(3)} / ${cpu.db.toFixed(3)} ms`],
    [
      '  from the due moment: the first push after; the cores busy until the last',
      `${phase.firstPushMs.toFixed(0)} ms; ${(cpu.busy * 100).toFixed(0)} %`,
    ],
    // what sending alone costs a Node process: the worker's CPU above it is the engine's and the delivery's
    ['  CPU a push of the bare client', `${bare.clientMs.toFixed(3)} ms`],
    ['  CPU a push of this process (the mock gateways): due / bare', `${cpu.mocks.toFixed(3)} / ${bare.mocksMs.toFixed(3)} ms`],
    // the bare client's rate is the mocks' (one thread each), while the due phase's three share the machine's cores
    [
      `  ratio the CPU allows on ${cpus().length} cores: cores x mocks(bare) / (worker + PostgreSQL + mocks(due))`,
      ratio((cpus().length * bare.mocksMs) / (cpu.worker + cpu.db + cpu.mocks), 1),
    ],
    ['  notifications made (batches of JOURNEY_BATCH_SIZE)', String(notifications)],
    ['  devices missed / pushed twice', `${phase.missed} / ${phase.twice}`],
  ];
}
