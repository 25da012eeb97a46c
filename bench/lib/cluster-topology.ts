/**
 * The cluster benchmark's topology (bench/cluster.ts): its engines — a Redis Cluster of 3 masters each with a replica,
 * PostgreSQL with a streaming replica, PgBouncer in front of the primary, the mock gateways, and for the
 * `single-redis` variant one Redis server of its own — the two apps on them, and the service's settings there.
 */
import { spawn } from 'node:child_process';
import type { DatabaseHandle } from '../../src/db/database.js';
import { partitionPrefix } from '../../src/delivery/queues.js';
import { untilPortAnswers } from '../../test/engines/engines.js';
import { startPrimaryWithReplica, type PrimaryWithReplica } from '../../test/engines/pg-replica.js';
import { startPgBouncer, type PgBouncer } from '../../test/engines/pgbouncer.js';
import { startRedisCluster, type RedisCluster } from '../../test/engines/redis-cluster.js';
import { OTHER_BUNDLE, type ClusterOptions, type Variant } from './cluster-options.js';
import { faultSettings } from './fault-settings.js';
import { combinedMocks, mocksInProcess, type MockGateways } from './mock-gateways.js';
import { freePort } from './setup.js';
import { addApp, BENCH_BUNDLE, benchApp, LAB_ENV } from './stack.js';

export interface Engines {
  cluster: RedisCluster;
  /** one Redis server of its own, for the `single-redis` variant */
  single: SingleRedis | null;
  pg: PrimaryWithReplica;
  bouncer: PgBouncer;
  /** every push, those of both mock processes */
  mocks: MockGateways;
  /** the mocks the workers send to, and those the API processes send to (the same with --probe-gateway shared) */
  workerMocks: MockGateways;
  apiMocks: MockGateways;
}

export interface SingleRedis {
  port: number;
  pid: number;
  stop(): void;
}

/** The apps on the engines and the service's settings there: what every run starts its processes with. */
export interface ClusterApps {
  options: ClusterOptions;
  engines: Engines;
  /** the broadcast's app, in a database of its own on the primary */
  stack: Awaited<ReturnType<typeof benchApp>>;
  db: DatabaseHandle;
  /** the other app, in the same database: its one-device notifications run beside the broadcast */
  other: Awaited<ReturnType<typeof addApp>>;
  /** the queue prefix, its partitions spread over the masters */
  prefix: string;
  /** the service's settings on the cluster topology */
  env: Record<string, string>;
  /** the API processes' gateways, when apart from the workers' */
  apiEnv: Record<string, string>;
}

/** What the runs share: the apps, the postmasters of the primary and its replica, both apps' Authorization headers. */
export interface ClusterBench extends ClusterApps {
  pids: { primary: number; replica: number };
  /** the Authorization headers of the broadcast's app and of the other app */
  broadcaster: string;
  sender: string;
}

/** Starts the engines, runs `use` with them and stops them all, however it ends; `use`'s answer is the exit status. */
export async function withEngines(options: ClusterOptions, use: (engines: Engines) => Promise<number>): Promise<number> {
  const cluster = await startRedisCluster(3, 1);
  const pg = await startPrimaryWithReplica().catch(async (err) => {
    await cluster.stop();
    throw err;
  });
  let bouncer: PgBouncer | undefined;
  let mocks: MockGateways | undefined;
  let workerMocks: MockGateways | undefined;
  let apiMocks: MockGateways | undefined;
  let single: SingleRedis | null = null;
  try {
    if (options.variants.includes('single-redis')) single = await startSingleRedis();
    // the pool behind PgBouncer: fewer server connections than the processes' pools hold, as in production
    bouncer = await startPgBouncer({ serverUrl: pg.primaryUrl, poolSize: 20, maxClients: 1000 });
    workerMocks = await mocksInProcess([BENCH_BUNDLE, OTHER_BUNDLE]);
    apiMocks = options.probeGateway === 'apart' ? await mocksInProcess([BENCH_BUNDLE, OTHER_BUNDLE], workerMocks) : workerMocks;
    mocks = apiMocks === workerMocks ? workerMocks : combinedMocks(workerMocks, apiMocks);
    process.env.DATABASE_URL = pg.primaryUrl; // benchApp makes its database on this server
    return await use({ cluster, single, pg, bouncer, mocks, workerMocks, apiMocks });
  } finally {
    await mocks?.close();
    single?.stop();
    await bouncer?.stop();
    await pg.stop();
    await cluster.stop();
  }
}

/** One redis-server of its own on a free port, nothing on disk: the `single-redis` variant's. */
async function startSingleRedis(): Promise<SingleRedis> {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  process.on('exit', () => child.kill('SIGKILL'));
  await untilPortAnswers(port, 'redis-server');
  return { port, pid: child.pid!, stop: () => child.kill('SIGKILL') };
}

/** The two apps in a fresh database on the primary, and the settings the service runs with on the engines. */
export async function clusterApps(options: ClusterOptions, engines: Engines): Promise<ClusterApps> {
  const { cluster, pg, bouncer, mocks, workerMocks, apiMocks } = engines;
  // the API processes' gateways, when apart from the workers'
  const apiEnv: Record<string, string> =
    apiMocks === workerMocks
      ? {}
      : {
          APNS_ORIGIN_PRODUCTION: apiMocks.apnsOrigin,
          APNS_ORIGIN_SANDBOX: apiMocks.apnsOrigin,
          FCM_ORIGIN: apiMocks.fcmOrigin,
          GOOGLE_TOKEN_URL: apiMocks.fcmTokenUrl,
        };
  const stack = await benchApp('bench_cluster', { queue: 'redis', redisUrl: '', gateways: mocks });
  const other = await addApp(stack.db, mocks, OTHER_BUNDLE);
  // a prefix whose partitions land on every master, as an operator checks with CLUSTER KEYSLOT
  const prefix = await spreadPrefix(cluster, options.partitions);
  const env: Record<string, string> = {
    ...stack.env,
    ...LAB_ENV,
    DATABASE_URL: bouncer.through(stack.database.url),
    DATABASE_LISTEN_URL: stack.database.url,
    DATABASE_READ_URL: pg.onReplica(stack.database.url),
    // PgBouncer 1.18 keeps no prepared statement from one transaction to the next
    DATABASE_PREPARE_THRESHOLD: '0',
    REDIS_URL: `redis://127.0.0.1:${cluster.ports[0]}`,
    REDIS_CLUSTER: 'true',
    QUEUE_PREFIX: prefix,
    QUEUE_PARTITIONS: String(options.partitions),
    ...(options.faults ? Object.fromEntries(Object.entries(faultSettings(options.devices)).map(([k, v]) => [k, String(v)])) : {}),
  };
  return { options, engines, stack, db: stack.db, other, prefix, env, apiEnv };
}

/** The settings of a variant: the cluster topology's with one part changed. */
export function envOf(apps: ClusterApps, variant: Variant): Record<string, string> {
  const changed = { ...apps.env };
  if (variant === 'direct-pg' || variant === 'direct-pg-prepared') changed.DATABASE_URL = apps.stack.database.url;
  if (variant === 'direct-pg-prepared') delete changed.DATABASE_PREPARE_THRESHOLD;
  if (variant === 'no-replica') delete changed.DATABASE_READ_URL;
  if (variant === 'single-redis') {
    changed.REDIS_URL = `redis://127.0.0.1:${apps.engines.single!.port}`;
    delete changed.REDIS_CLUSTER;
  }
  if (variant === 'partitions-1') changed.QUEUE_PARTITIONS = '1';
  if (variant === 'rate-limits') {
    delete changed.RATE_LIMIT_PER_SECOND;
    delete changed.RATE_LIMIT_SDK_PER_SECOND;
  }
  return changed;
}

/** A queue prefix whose partitions' hash tags land on every master of the cluster, as evenly as the count allows. */
async function spreadPrefix(cluster: RedisCluster, partitions: number): Promise<string> {
  for (;;) {
    const prefix = `{bench${Math.floor(Math.random() * 1e6)}}`;
    const owners = new Map<number, number>();
    for (let p = 0; p < partitions; p++) {
      const owner = await cluster.ownerOf(partitionPrefix(prefix, p, partitions));
      owners.set(owner, (owners.get(owner) ?? 0) + 1);
    }
    const counts = [...owners.values()];
    if (owners.size === Math.min(3, partitions) && Math.max(...counts) - Math.min(...counts) <= 1) return prefix;
  }
}
