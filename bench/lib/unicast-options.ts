/**
 * The unicast benchmark's options (see bench/unicast.ts's header for each), and the measuring setup they choose.
 */
import { tmpdir } from 'node:os';
import path from 'node:path';
import { arg } from './setup.js';

export type Target = 'device_id' | 'user_id' | 'transactional';

/** The measuring setup: each part as an outside client meets it, or as the lab had it (--lab). */
export interface View {
  clientsIn: 'process' | 'thread';
  httpClient: 'http' | 'undici';
  devices: 'api' | 'sql';
  config: 'production' | 'lab';
  mocksIn: 'process' | 'bench';
}

/** production's defaults where the benchmarks' service processes are started otherwise (startService: LOG_LEVEL warn) */
export const PRODUCTION_ENV = { LOG_LEVEL: 'info' };
/** backlog samples taken during a run at a fixed rate */
export const SAMPLES = 6;

export interface UnicastOptions {
  /** the counted notifications */
  notifications: number;
  clients: number;
  targets: Target[];
  modes: ('single' | 'split')[];
  queues: string[];
  timeoutMs: number;
  redisUrl: string;
  /** --rate-of-pgbench F: posted at F times the same run's `pgbench -N` (the README's "POST ≥ 0.5 × pgbench -N at p99 ≤ 50 ms") */
  rateOfPgbench: number;
  /** posts a second (0: as fast as answered); with --rate-of-pgbench, set once pgbench has run */
  rate: number;
  latencyMs: number;
  /**
   * Notifications posted first, by all the clients at once, and not counted: gateway connections, JWT and OAuth
   * tokens, prepared plans, and the JIT compiling the hot paths (a server that has run a while has done all that).
   */
  warmup: number;
  /**
   * --returning: the counted notifications go to the devices the warm-up notified, as a user's next notification
   * does (its audience is stored already); by default each goes to a device not notified before.
   */
  returning: boolean;
  view: View;
  /** "outside", "lab", or the view nearest to this setup with the parts that differ from it */
  viewName: string;
  analyze: boolean;
  notificationDays: number;
  latenciesTo: string;
  /** --wal-detail: the counted window's WAL split by relation and record type (pg_walinspect, PostgreSQL 15+) */
  walDetail: boolean;
  flushDelayMs: number;
  /** where the service's log lines go with production's settings (appended, left for reading) */
  logFile: string;
  registered: number;
}

const OUTSIDE = { clientsIn: 'process', httpClient: 'http', devices: 'api', config: 'production', mocksIn: 'process' } as const;
const LAB = { clientsIn: 'thread', httpClient: 'undici', devices: 'sql', config: 'lab', mocksIn: 'bench' } as const;

/** The options on the command line; throws on a rate, a flush delay or a --returning it cannot take. */
export function unicastOptions(): UnicastOptions {
  const K = Number(arg('notifications', '10000'));
  const rateOfPgbench = Number(arg('rate-of-pgbench', '0'));
  const rate = Number(arg('rate', '0'));
  if (!Number.isFinite(rate) || !Number.isFinite(rateOfPgbench) || rate < 0 || rateOfPgbench < 0)
    throw new Error('--rate and --rate-of-pgbench take a number of 0 or more');
  if (rate > 0 && rateOfPgbench > 0) throw new Error('--rate and --rate-of-pgbench: one or the other');
  const WARMUP = Number(arg('warmup', '10000'));
  const returning = process.argv.includes('--returning');
  if (returning && WARMUP < K) throw new Error('--returning needs --warmup >= --notifications');
  const lab = process.argv.includes('--lab');
  const view: View = {
    clientsIn: arg('clients-in', lab ? 'thread' : 'process') as 'process' | 'thread',
    httpClient: arg('http-client', lab ? 'undici' : 'http') as 'http' | 'undici',
    devices: arg('devices', lab ? 'sql' : 'api') as 'api' | 'sql',
    config: arg('config', lab ? 'lab' : 'production') as 'production' | 'lab',
    mocksIn: arg('mocks-in', lab ? 'bench' : 'process') as 'process' | 'bench',
  };
  const flushDelayMs = Number(arg('flush-delay-ms', '0'));
  if (!Number.isFinite(flushDelayMs) || flushDelayMs < 0) throw new Error('--flush-delay-ms takes a number of 0 or more');
  return {
    notifications: K,
    clients: Number(arg('clients', '50')),
    targets: arg('target', 'device_id,user_id,transactional').split(',') as Target[],
    modes: arg('mode', 'single,split').split(',') as ('single' | 'split')[],
    queues: arg('queue', process.env.REDIS_URL ? 'redis,postgres' : 'postgres').split(','),
    timeoutMs: Number(arg('timeout-s', '300')) * 1000,
    redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    rateOfPgbench,
    rate,
    latencyMs: Number(arg('gateway-latency-ms', '0')),
    warmup: WARMUP,
    returning,
    view,
    viewName: viewNameOf(view),
    analyze: arg('analyze', 'yes') !== 'no',
    notificationDays: Number(arg('notification-days', '0')),
    latenciesTo: arg('latencies-to', ''),
    walDetail: process.argv.includes('--wal-detail'),
    flushDelayMs,
    logFile: path.join(tmpdir(), `pushd-bench-unicast-${process.pid}.log`),
    registered: Math.max(Number(arg('registered', '0')), K + WARMUP),
  };
}

/** "outside", "lab", or the view nearest to `view` with the parts that differ from it */
function viewNameOf(view: View): string {
  const differs = (from: Record<string, string>) => Object.entries(view).filter(([k, v]) => from[k] !== v);
  const [name, base] = differs(LAB).length < differs(OUTSIDE).length ? ['lab', LAB] : ['outside', OUTSIDE];
  const parts = differs(base);
  return parts.length ? `${name} but ${parts.map(([k, v]) => `${k} ${v}`).join(', ')}` : name;
}
