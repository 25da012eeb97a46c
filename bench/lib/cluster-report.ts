/**
 * What the cluster benchmark measured (bench/cluster.ts) and its tables: each phase's pushes/s and costs per push by
 * tier, the idle processes' work, the fairness probes' times and where they went.
 */
import { IDLE_S, type ClusterOptions, type Variant } from './cluster-options.js';
import { TIERS, type IdleRates, type PushCosts } from './cluster-meters.js';
import type { ProbeTimes, QueueTimes } from './cluster-probes.js';
import type { LoopDelay } from './mock-gateways.js';
import { percentile, printRows } from './setup.js';

export interface Phase extends PushCosts {
  workers: number;
  variant: Variant;
  traffic: string;
  pushes: number;
  seconds: number;
  bare: number;
  lag: { seconds: number; bytes: number };
  missed: number;
  twice: number;
}

/** What the processes of a run spend a second with nothing to send. */
export interface Idle extends IdleRates {
  workers: number;
  variant: Variant;
}

/** A run's fairness probes, with nothing else running and while the broadcast ran. */
export interface Fairness {
  workers: number;
  idle: ProbeTimes;
  busy: ProbeTimes;
  /** the probes posted with an Idempotency-Key, created alone */
  idleQ: ProbeTimes;
  busyQ: ProbeTimes;
  queuedParts: QueueTimes | null;
  broadcastS: number;
  /** during the broadcast: the event-loop delays of the API processes (the larger) and of the two mock processes */
  apiLoop: LoopDelay;
  workerMockLoop: LoopDelay;
  apiMockLoop: LoopDelay | null;
  /** the API processes' gateway sends during it: how many, their mean time to answer (ms) */
  apiSends: number;
  apiSendMs: number;
  /** the share of the machine's CPU time busy during it */
  machineBusy: number;
}

/** Everything the runs measured, in the order they ran. */
export interface ClusterResults {
  phases: Phase[];
  idles: Idle[];
  fair: Fairness[];
}

/** Prints the tables; 1 when a phase missed a device or pushed one twice (each said on stderr), else 0. */
export function printReport(options: ClusterOptions, { phases, idles, fair }: ClusterResults): number {
  printPhases(options, phases);
  printIdles(idles);
  printFairness(options, fair);
  printProbeTimes(fair);
  printQueuedProbes(fair);
  const bad = phases.filter((p) => p.missed > 0 || p.twice > 0);
  for (const p of bad) console.error(`FAIL ${p.workers} worker(s), ${p.traffic}: ${p.missed} missed, ${p.twice} pushed twice`);
  return bad.length ? 1 : 0;
}

/** `p`th percentile of sorted `xs`, in whole ms; a dash when there are none. */
const ms = (xs: number[], p: number) => (xs.length ? `${percentile(xs, p).toFixed(0)} ms` : '–');

function printPhases({ partitions, variants, probeGateway, devices, clients }: ClusterOptions, phases: Phase[]): void {
  console.log(
    `\ncluster benchmark: 3 Redis masters + 3 replicas, PostgreSQL 15 primary + streaming replica (fsync off), PgBouncer 1.18 ` +
      `(transaction mode, 20 server connections), 2 API processes, N workers, ${partitions} queue partitions (variants: ${variants.join(', ')}); ` +
      `mock gateways in a process of their own on loopback TLS HTTP/2 (${probeGateway === 'apart' ? "the API processes' in a second one" : 'one for all'}); bare client: 1 connection x 1,000 streams per gateway, ` +
      `${devices} pushes, once per worker count. CPU per push: all the tier's processes (PostgreSQL: the primary's processes, PG replica: the replica's; ` +
      `Redis: all 6 nodes); Redis commands: INFO commandstats summed over the masters; per push: gross (net of the idle work); unicast by device_id ` +
      `filter from ${clients} clients (half to each API process), sent by the API processes themselves\n`,
  );
  /** gross (net of the idle work) */
  const both = (gross: number, net: number, digits: number) => `${gross.toFixed(digits)} (${net.toFixed(digits)})`;
  printRows(
    [
      'workers',
      'variant',
      'traffic',
      'pushes/s',
      'ratio to bare',
      'CPU µs/push: API',
      'worker',
      'PostgreSQL',
      'PG replica',
      'PgBouncer',
      'Redis',
      'Redis commands/push',
      'WAL bytes/push',
      'replica lag max',
      'missed / twice',
    ],
    phases.map((p) => [
      String(p.workers),
      p.variant,
      p.traffic,
      (p.pushes / p.seconds).toFixed(0),
      Number.isNaN(p.bare) ? '–' : (p.pushes / p.seconds / p.bare).toFixed(2),
      ...TIERS.map((tier) => both(p.cpuUs[tier], p.netCpuUs[tier], 1)),
      both(p.commands, p.netCommands, 3),
      p.walBytes.toFixed(0),
      `${p.lag.seconds.toFixed(2)} s / ${p.lag.bytes} B`,
      `${p.missed} / ${p.twice}`,
    ]),
  );
}

function printIdles(idles: Idle[]): void {
  console.log(
    `\nidle: what the processes spend a second with nothing to send (measured over ${IDLE_S} s), subtracted for the figures in brackets above\n`,
  );
  printRows(
    ['workers', 'variant', 'CPU ms/s: API', 'worker', 'PostgreSQL', 'PG replica', 'PgBouncer', 'Redis', 'Redis commands/s', 'WAL bytes/s'],
    idles.map((i) => [
      String(i.workers),
      i.variant,
      ...TIERS.map((tier) => i.cpu[tier].toFixed(1)),
      i.commands.toFixed(0),
      i.wal.toFixed(0),
    ]),
  );
}

function printFairness({ probeGateway }: ClusterOptions, fair: Fairness[]): void {
  console.log(
    `\nfairness: time to push (POST to the push at the mock gateway) of one-device notifications of another app, posted 100 ms ` +
      `apart; the API processes' sends to ${probeGateway === 'apart' ? 'mock gateways of their own' : "the broadcast's mock gateways"}\n`,
  );
  printRows(
    [
      'workers',
      'probes',
      'broadcast took',
      'while it runs: p50',
      'p95',
      'max',
      'probes',
      'sent by the API',
      "in the broadcast's partition: n",
      'max',
      'nothing else running: p50',
      'p95',
    ],
    fair.flatMap((f) =>
      (
        [
          ['sent by the API', f.busy, f.idle],
          ['with an Idempotency-Key', f.busyQ, f.idleQ],
        ] as const
      ).map(([kind, busy, idle]) => [
        String(f.workers),
        kind,
        `${f.broadcastS.toFixed(1)} s`,
        ms(busy.total, 50),
        ms(busy.total, 95),
        ms(busy.total, 100),
        String(busy.total.length),
        busy.byApi === null ? '–' : String(busy.byApi),
        String(busy.inBroadcastPartition.length),
        ms(busy.inBroadcastPartition, 100),
        ms(idle.total, 50),
        ms(idle.total, 95),
      ]),
    ),
  );
}

function printProbeTimes(fair: Fairness[]): void {
  console.log(
    "\nwhere the probes' time went while the broadcast ran: POST answered (created and committed), then to the push at the " +
      "mock; the API processes' gateway sends (mean time to answer), event-loop delays (p50 / p99 / max) and the machine's CPU\n",
  );
  const loop = (d: LoopDelay | null) => (d ? `${d.p50.toFixed(0)} / ${d.p99.toFixed(0)} / ${d.max.toFixed(0)} ms` : '–');
  printRows(
    [
      'workers',
      'POST p50',
      'p95',
      'after it p50',
      'p95',
      'API sends',
      'mean',
      'API loop',
      'worker mocks loop',
      'API mocks loop',
      'CPU busy',
    ],
    fair.map((f) => [
      String(f.workers),
      ms(f.busy.answer, 50),
      ms(f.busy.answer, 95),
      ms(f.busy.afterAnswer, 50),
      ms(f.busy.afterAnswer, 95),
      String(f.apiSends),
      `${f.apiSendMs.toFixed(1)} ms`,
      loop(f.apiLoop),
      loop(f.workerMockLoop),
      loop(f.apiMockLoop),
      `${(100 * f.machineBusy).toFixed(0)} %`,
    ]),
  );
}

function printQueuedProbes(fair: Fairness[]): void {
  console.log(
    "\nthe Idempotency-Key probes that went through the queue (n), from their delivery jobs' events: POST to the job added, " +
      'then taken by a worker, then pushed, then recorded (p50 / p95)\n',
  );
  const p50p95 = (xs: number[]) => `${ms(xs, 50)} / ${ms(xs, 95)}`;
  printRows(
    ['workers', 'n', 'POST to added', 'to taken', 'to pushed', 'to recorded'],
    fair
      .filter((f) => f.queuedParts)
      .map((f) => [
        String(f.workers),
        String(f.queuedParts!.posted.length),
        p50p95(f.queuedParts!.posted),
        p50p95(f.queuedParts!.waiting),
        p50p95(f.queuedParts!.worker),
        p50p95(f.queuedParts!.record),
      ]),
  );
}
