/**
 * What the cluster benchmark's tiers use (bench/cluster.ts): CPU per tier read from /proc, Redis commands the masters
 * ran, the primary's WAL, the replica's replay lag, and the API processes' own gauges (event loops, gateway sends).
 */
import type { Redis } from 'ioredis';
import { sql } from 'kysely';
import type { DatabaseHandle } from '../../src/db/database.js';
import { withNode, type RedisCluster } from '../../test/engines/redis-cluster.js';
import type { ClusterBench } from './cluster-topology.js';
import { serverDetail, sumCpu, threadDetail } from './proc-cpu.js';
import { cpuMs, serverCpuMs } from './setup.js';
import { LAB_ENV, type Services } from './stack.js';

/** The tiers whose CPU is told apart, in the tables' order. */
export const TIERS = ['api', 'worker', 'postgres', 'replica', 'pgbouncer', 'redis'] as const;
export type Tier = (typeof TIERS)[number];

/** What each tier has used so far: CPU ms per tier, Redis commands run by the masters, the primary's WAL position. */
export interface Snapshot {
  cpu: Record<Tier, number>;
  /** CPU ms so far of the primary's processes by kind, the replica's (`replica …`) and the API processes' threads */
  detail: Record<string, number>;
  commands: number;
  wal: string;
}

/** What was spent between two snapshots: CPU ms per tier (and by process kind or thread), Redis commands, WAL bytes. */
export interface Spent {
  cpu: Record<Tier, number>;
  detail: Record<string, number>;
  commands: number;
  wal: number;
}

/** What the processes spend a second with nothing to send. */
export type IdleRates = Omit<Spent, 'detail'>;

/** Per push, gross and net of what the processes do when idle over the phase's time. */
export interface PushCosts {
  cpuUs: Record<Tier, number>;
  netCpuUs: Record<Tier, number>;
  commands: number;
  netCommands: number;
  walBytes: number;
}

/** What every tier has used so far, `services` the service's processes. */
export async function snapshot(bench: ClusterBench, services: Services): Promise<Snapshot> {
  const { pids } = bench;
  const { cluster, single, bouncer } = bench.engines;
  return {
    cpu: {
      api: sumCpu(services.apis.map((c) => c.pid!)),
      worker: sumCpu(services.workers.map((c) => c.pid!)),
      postgres: serverCpuMs(pids.primary),
      replica: serverCpuMs(pids.replica),
      pgbouncer: cpuMs(bouncer.pid),
      redis: sumCpu([...cluster.pids, ...(single ? [single.pid] : [])]),
    },
    detail: {
      ...serverDetail(pids.primary, ''),
      ...serverDetail(pids.replica, 'replica '),
      ...threadDetail(
        services.apis.map((c) => c.pid!),
        'API ',
      ),
    },
    commands: (await masterCommands(cluster)) + (single ? await withNode(single.port, commandsRun) : 0),
    wal: (await sql<{ lsn: string }>`select pg_current_wal_lsn()::text as lsn`.execute(bench.db.db)).rows[0]!.lsn,
  };
}

/** What was spent between two snapshots: CPU ms per tier, Redis commands, WAL bytes. */
export async function spent(db: DatabaseHandle, before: Snapshot, after: Snapshot): Promise<Spent> {
  const { rows } = await sql<{ bytes: string }>`
      select pg_wal_lsn_diff(${after.wal}::pg_lsn, ${before.wal}::pg_lsn)::text as bytes`.execute(db.db);
  const cpu = Object.fromEntries(Object.entries(after.cpu).map(([tier, ms]) => [tier, ms - before.cpu[tier as Tier]])) as Record<
    Tier,
    number
  >;
  const detail = Object.fromEntries(Object.entries(after.detail).map(([k, ms]) => [k, ms - (before.detail[k] ?? 0)]));
  return { cpu, detail, commands: after.commands - before.commands, wal: Number(rows[0]!.bytes) };
}

/** A figure for each tier, `f`'s. */
export const perTier = (f: (tier: Tier) => number) => Object.fromEntries(TIERS.map((tier) => [tier, f(tier)])) as Record<Tier, number>;

/** Per push, gross and net of `idle` (spent per second with nothing to send) over the phase's `seconds`. */
export async function measured(
  db: DatabaseHandle,
  before: Snapshot,
  after: Snapshot,
  pushes: number,
  idle: IdleRates,
  seconds: number,
): Promise<PushCosts> {
  const used = await spent(db, before, after);
  return {
    cpuUs: perTier((tier) => (used.cpu[tier] * 1000) / pushes),
    netCpuUs: perTier((tier) => ((used.cpu[tier] - idle.cpu[tier] * seconds) * 1000) / pushes),
    commands: used.commands / pushes,
    netCommands: (used.commands - idle.commands * seconds) / pushes,
    walBytes: used.wal / pushes,
  };
}

/** Commands the masters have run so far (INFO commandstats), the INFO calls that read them left out. */
async function masterCommands(cluster: RedisCluster): Promise<number> {
  let total = 0;
  for (const port of cluster.ports) total += await withNode(port, commandsRun);
  return total;
}

/** Commands a master has run so far, the INFO calls that read them left out; 0 from a replica. */
async function commandsRun(r: Redis): Promise<number> {
  if (!(await r.info('replication')).includes('role:master')) return 0;
  const stats = await r.info('commandstats');
  return [...stats.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)].reduce(
    (sum, [, name, calls]) => sum + (name === 'info' ? 0 : Number(calls)),
    0,
  );
}

/** What the API processes report of their event loops and gateway sends since last asked (their lag resets when read). */
export async function apiGauges(services: Services) {
  const texts = await Promise.all(
    services.bases.map((base) =>
      fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${LAB_ENV.METRICS_TOKEN}` } }).then((r) => r.text()),
    ),
  );
  const gauge = (text: string, name: string) => Number(new RegExp(`^pushd_${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  const sum = (name: string) =>
    texts.reduce(
      (n, text) => n + [...text.matchAll(new RegExp(`^pushd_${name}\\{[^}]*\\} (\\S+)$`, 'gm'))].reduce((m, x) => m + Number(x[1]), 0),
      0,
    );
  return {
    lagP50: Math.max(...texts.map((t) => gauge(t, 'nodejs_eventloop_lag_p50_seconds'))) * 1000,
    lagP99: Math.max(...texts.map((t) => gauge(t, 'nodejs_eventloop_lag_p99_seconds'))) * 1000,
    lagMax: Math.max(...texts.map((t) => gauge(t, 'nodejs_eventloop_lag_max_seconds'))) * 1000,
    sendSeconds: sum('gateway_send_seconds_sum'),
    sends: sum('gateway_send_seconds_count'),
  };
}

/** The replica's largest replay lag, in time and in bytes, sampled on the primary every 250 ms. */
export class LagSampler {
  private timer: NodeJS.Timeout | undefined;
  private max = { seconds: 0, bytes: 0 };
  constructor(private readonly db: DatabaseHandle['db']) {}

  start() {
    this.max = { seconds: 0, bytes: 0 };
    // a sample the primary does not answer is skipped
    this.timer = setInterval(() => void this.sample().catch(() => undefined), 250);
  }

  stop() {
    clearInterval(this.timer);
    return this.max;
  }

  private async sample() {
    const { rows } = await sql<{ seconds: number | null; bytes: string | null }>`
      select extract(epoch from max(replay_lag))::float8 as seconds,
             max(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn))::text as bytes
      from pg_stat_replication`.execute(this.db);
    this.max.seconds = Math.max(this.max.seconds, rows[0]?.seconds ?? 0);
    this.max.bytes = Math.max(this.max.bytes, Number(rows[0]?.bytes ?? 0));
  }
}
