/**
 * The cluster benchmark's options (see bench/cluster.ts's header for each), and the constants its runs share.
 */
import { tmpdir } from 'node:os';
import path from 'node:path';
import { arg } from './setup.js';

/**
 * What each variant changes from the cluster topology, one part each: `direct-pg` DATABASE_URL on the primary
 * itself (no PgBouncer, still no prepared statements), `direct-pg-prepared` the same with prepared statements (the
 * default threshold), `no-replica` no DATABASE_READ_URL, `one-api` one API process taking every client,
 * `single-redis` one Redis server of its own instead of the cluster, `partitions-1` QUEUE_PARTITIONS=1,
 * `rate-limits` production's rate limits (in Redis) instead of none.
 */
export const VARIANTS = [
  'cluster',
  'direct-pg',
  'direct-pg-prepared',
  'no-replica',
  'one-api',
  'single-redis',
  'partitions-1',
  'rate-limits',
] as const;
export type Variant = (typeof VARIANTS)[number];

/** what every notification of the benchmark pushes */
export const PAYLOAD = { alert: 'bench', badge: 1 };
/** the other app's, whose one-device notifications run beside the broadcast */
export const OTHER_BUNDLE = 'com.example.bench-other';
/** how far apart the fairness probes are posted, ms */
export const PROBE_EVERY_MS = 100;
/** how long the processes are watched with nothing to send, s: their background work (polls, lag checks, leases) */
export const IDLE_S = 5;

export interface ClusterOptions {
  devices: number;
  unicast: number;
  workerCounts: number[];
  clients: number;
  fairness: number;
  partitions: number;
  faults: boolean;
  unicastOnly: boolean;
  /**
   * Where the API processes' own sends (the one-device notifications, the fairness probes among them) go: `apart`, a
   * mock gateways' process of their own; `shared`, the one taking the broadcast's 10,000 pushes a second, whose
   * event loop then delays them as APNs and FCM would not.
   */
  probeGateway: 'apart' | 'shared';
  /** unicast phases one after the other in each run, each to devices of its own (a later one: the processes warmer) */
  unicastRounds: number;
  variants: Variant[];
  /**
   * one-device notifications, per API process, that warm the API processes (their gateway connections, the JIT) and the
   * workers, not counted: 2,000 a process, as bench/unicast's --warmup; with 500 a process (the 1,000 this took before
   * over 2 processes) three rounds of 3,000 in a row cost 1.20, 0.87 and 0.70 ms of API CPU a notification
   */
  warmAProcess: number;
  /** where the service processes' log lines go */
  logFile: string;
}

/** The options on the command line; throws on a --probe-gateway or a --variants it does not know. */
export function clusterOptions(): ClusterOptions {
  const probeGateway = arg('probe-gateway', 'apart');
  if (probeGateway !== 'apart' && probeGateway !== 'shared') throw new Error('--probe-gateway: apart or shared');
  const variants = arg('variants', 'cluster').split(',') as Variant[];
  for (const v of variants) if (!VARIANTS.includes(v)) throw new Error(`--variants: ${v} is none of ${VARIANTS.join(', ')}`);
  return {
    devices: Number(arg('devices', '100000')),
    unicast: Number(arg('unicast', '2000')),
    workerCounts: arg('workers', '1,2').split(',').map(Number),
    clients: Number(arg('clients', '50')),
    fairness: Number(arg('fairness', '20')),
    partitions: Number(arg('partitions', '6')),
    faults: process.argv.includes('--faults'),
    unicastOnly: process.argv.includes('--unicast-only'),
    probeGateway,
    unicastRounds: Number(arg('unicast-rounds', '1')),
    variants,
    warmAProcess: Number(arg('warm', '2000')),
    logFile: path.join(tmpdir(), `pushd-bench-cluster-${process.pid}.log`),
  };
}
