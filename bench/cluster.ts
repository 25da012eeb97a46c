/**
 * Cluster benchmark: pushd in the topology of a large deployment, every part a real engine on this machine — a
 * Redis Cluster of 3 masters (each with a replica), PostgreSQL with a streaming replica, PgBouncer in transaction
 * mode in front of the primary, 2 API processes (the clients spread over both) and N worker processes — running
 * a broadcast to `--devices` devices of one app and `--unicast` one-device notifications of another, against a
 * bare HTTP/2 client sending the same pushes to the same mock gateways in the same run.
 *
 *   npm run -s bench -- cluster [--devices 100000] [--unicast 2000] [--workers 1,2] [--clients 50] [--fairness 20]
 *                               [--partitions 6] [--faults] [--variants cluster,direct-pg,...] [--unicast-only]
 *                               [--warm 2000] [--unicast-rounds 1] [--probe-gateway apart|shared]
 *
 * For each worker count it prints pushes/s and the ratio to the bare client, CPU µs a push per tier (read from
 * /proc/<pid>/stat of every process of the tier), Redis commands a push (INFO commandstats, summed over the
 * masters), PostgreSQL WAL bytes a push (pg_current_wal_lsn), the replica's largest replay lag, and fairness: the
 * time to push of `--fairness` one-device notifications of the other app posted while the broadcast runs, beside
 * the same posted while nothing else runs, both those the API sends itself and as many posted with an
 * Idempotency-Key (created alone), with where the time went (the POST, the event loops, the CPU). The
 * API processes send to mock gateways of their own (`--probe-gateway shared`: to the broadcast's). The mocks count
 * pushes per token: a device missed or pushed twice makes it exit 1.
 *
 * --variants: the runs of each worker count, each changing ONE part of the topology (see VARIANTS): to find what a
 * figure costs, compare a variant's row with the `cluster` row of the same run. --unicast-only: only the warm-up,
 * the idle watch and the one-device notifications of each run (no broadcast, fairness probes or bare client).
 * After each unicast phase a line says where PostgreSQL's CPU went (its processes by kind, exited backends
 * included) and the API processes' (by thread).
 *
 * --faults: one broadcast with the last worker count, killing a worker at 25 % of the devices reached, the Redis
 * master of the broadcast's queue partition at 50 % (its replica takes over) and the PostgreSQL replica at 75 %,
 * with the recovery timers of bench/faults.ts: no device may be missed, and pushes sent twice stay within the
 * batches in flight when the faults hit.
 */
import { sql } from 'kysely';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseFcmServiceAccount } from '../src/domain/credentials.js';
import { ServiceAccountTokenCredential } from '../src/gateways/google-oauth.js';
import { partitionOf } from '../src/delivery/jobs.js';
import { partitionPrefix } from '../src/delivery/queues.js';
import { startPrimaryWithReplica, type PrimaryWithReplica } from '../test/engines/pg-replica.js';
import { startPgBouncer, type PgBouncer } from '../test/engines/pgbouncer.js';
import type { Redis } from 'ioredis';
import { startRedisCluster, withNode, type RedisCluster } from '../test/engines/redis-cluster.js';
import { untilPortAnswers } from '../test/engines/engines.js';
import { duplicateBound, faultSettings } from './lib/fault-settings.js';
import { LoadClients, type Post } from './lib/load-clients.js';
import { combinedMocks, mocksInProcess, waitReceived, type LoopDelay, type MockGateways } from './lib/mock-gateways.js';
import { arg, cpuMs, freePort, percentile, printRows, serverCpuMs } from './lib/setup.js';
import { addApp, BENCH_BUNDLE, bareBroadcast, benchApp, LAB_ENV, startServices, waitFinished, type Services } from './lib/stack.js';

const devices = Number(arg('devices', '100000'));
const unicast = Number(arg('unicast', '2000'));
const workerCounts = arg('workers', '1,2').split(',').map(Number);
const clients = Number(arg('clients', '50'));
const fairness = Number(arg('fairness', '20'));
const partitions = Number(arg('partitions', '6'));
const faults = process.argv.includes('--faults');
const unicastOnly = process.argv.includes('--unicast-only');
/**
 * Where the API processes' own sends (the one-device notifications, the fairness probes among them) go: `apart`, a
 * mock gateways' process of their own; `shared`, the one taking the broadcast's 10,000 pushes a second, whose
 * event loop then delays them as APNs and FCM would not.
 */
const probeGateway = arg('probe-gateway', 'apart');
if (probeGateway !== 'apart' && probeGateway !== 'shared') throw new Error('--probe-gateway: apart or shared');
/** unicast phases one after the other in each run, each to devices of its own (a later one: the processes warmer) */
const unicastRounds = Number(arg('unicast-rounds', '1'));
/**
 * What each variant changes from the cluster topology, one part each: `direct-pg` DATABASE_URL on the primary
 * itself (no PgBouncer, still no prepared statements), `direct-pg-prepared` the same with prepared statements (the
 * default threshold), `no-replica` no DATABASE_READ_URL, `one-api` one API process taking every client,
 * `single-redis` one Redis server of its own instead of the cluster, `partitions-1` QUEUE_PARTITIONS=1,
 * `rate-limits` production's rate limits (in Redis) instead of none.
 */
const VARIANTS = [
  'cluster',
  'direct-pg',
  'direct-pg-prepared',
  'no-replica',
  'one-api',
  'single-redis',
  'partitions-1',
  'rate-limits',
] as const;
type Variant = (typeof VARIANTS)[number];
const variants = arg('variants', 'cluster').split(',') as Variant[];
for (const v of variants) if (!VARIANTS.includes(v)) throw new Error(`--variants: ${v} is none of ${VARIANTS.join(', ')}`);
const PAYLOAD = { alert: 'bench', badge: 1 };
/** the other app's, whose one-device notifications run beside the broadcast */
const OTHER_BUNDLE = 'com.example.bench-other';
const FAULTS = faultSettings(devices);
const LOG_FILE = path.join(tmpdir(), `pushd-bench-cluster-${process.pid}.log`);
/**
 * one-device notifications, per API process, that warm the API processes (their gateway connections, the JIT) and the
 * workers, not counted: 2,000 a process, as bench/unicast's --warmup; with 500 a process (the 1,000 this took before
 * over 2 processes) three rounds of 3,000 in a row cost 1.20, 0.87 and 0.70 ms of API CPU a notification
 */
const WARM_A_PROCESS = Number(arg('warm', '2000'));
/** how far apart the fairness probes are posted, ms */
const PROBE_EVERY_MS = 100;

interface Engines {
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

/** What each tier has used so far: CPU ms per tier, Redis commands run by the masters, the primary's WAL position. */
interface Snapshot {
  cpu: Record<Tier, number>;
  /** CPU ms so far of the primary's processes by kind, the replica's (`replica …`) and the API processes' threads */
  detail: Record<string, number>;
  commands: number;
  wal: string;
}
const TIERS = ['api', 'worker', 'postgres', 'replica', 'pgbouncer', 'redis'] as const;
type Tier = (typeof TIERS)[number];
/** how long the processes are watched with nothing to send, s: their background work (polls, lag checks, leases) */
const IDLE_S = 5;

interface Phase {
  workers: number;
  variant: Variant;
  traffic: string;
  pushes: number;
  seconds: number;
  bare: number;
  /** per push, and per push net of what the processes do when idle over the phase's time */
  cpuUs: Record<Tier, number>;
  netCpuUs: Record<Tier, number>;
  commands: number;
  netCommands: number;
  walBytes: number;
  lag: { seconds: number; bytes: number };
  missed: number;
  twice: number;
}

async function main() {
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
    if (variants.includes('single-redis')) single = await startSingleRedis();
    // the pool behind PgBouncer: fewer server connections than the processes' pools hold, as in production
    bouncer = await startPgBouncer({ serverUrl: pg.primaryUrl, poolSize: 20, maxClients: 1000 });
    workerMocks = await mocksInProcess([BENCH_BUNDLE, OTHER_BUNDLE]);
    apiMocks = probeGateway === 'apart' ? await mocksInProcess([BENCH_BUNDLE, OTHER_BUNDLE], workerMocks) : workerMocks;
    mocks = apiMocks === workerMocks ? workerMocks : combinedMocks(workerMocks, apiMocks);
    process.env.DATABASE_URL = pg.primaryUrl; // benchApp makes its database on this server
    const status = await run({ cluster, single, pg, bouncer, mocks, workerMocks, apiMocks });
    process.exitCode = status;
  } finally {
    await mocks?.close();
    single?.stop();
    await bouncer?.stop();
    await pg.stop();
    await cluster.stop();
  }
}

async function run(engines: Engines): Promise<number> {
  const { cluster, single, pg, bouncer, mocks, workerMocks, apiMocks } = engines;
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
  const { db } = stack;
  // a prefix whose partitions land on every master, as an operator checks with CLUSTER KEYSLOT
  const prefix = await spreadPrefix(cluster);
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
    QUEUE_PARTITIONS: String(partitions),
    ...(faults ? Object.fromEntries(Object.entries(FAULTS).map(([k, v]) => [k, String(v)])) : {}),
  };
  /** The settings of a variant: the cluster topology's with one part changed. */
  const envOf = (variant: Variant): Record<string, string> => {
    const changed = { ...env };
    if (variant === 'direct-pg' || variant === 'direct-pg-prepared') changed.DATABASE_URL = stack.database.url;
    if (variant === 'direct-pg-prepared') delete changed.DATABASE_PREPARE_THRESHOLD;
    if (variant === 'no-replica') delete changed.DATABASE_READ_URL;
    if (variant === 'single-redis') {
      changed.REDIS_URL = `redis://127.0.0.1:${single!.port}`;
      delete changed.REDIS_CLUSTER;
    }
    if (variant === 'partitions-1') changed.QUEUE_PARTITIONS = '1';
    if (variant === 'rate-limits') {
      delete changed.RATE_LIMIT_PER_SECOND;
      delete changed.RATE_LIMIT_SDK_PER_SECOND;
    }
    return changed;
  };
  const runs = workerCounts.flatMap((workers) => variants.map((variant) => ({ workers, variant })));

  const t = Date.now();
  // the broadcast's devices, then the other app's, for each run: the unicast ones, the idle probes, the probes during
  // the broadcast (each run its own, so every run's one-device notifications create their audiences alike)
  const seed = (appId: string, from: number, to: number) =>
    sql`
    insert into devices (app_id, platform, token, locale)
    select ${appId}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex'), 'en_US'
    from generate_series(${from}::int, ${to}::int) as i`.execute(db.db);
  await seed(stack.app.id, 1, devices);
  const warmDevices = WARM_A_PROCESS * 2;
  const perRun = warmDevices + unicast * unicastRounds + 4 * fairness;
  await seed(other.app.id, devices + 1, devices + perRun * runs.length);
  await sql`analyze devices`.execute(db.db);
  const theirs = await db.db.selectFrom('devices').select(['id', 'token']).where('app_id', '=', other.app.id).orderBy('token').execute();
  const devicesOf = (r: number) => {
    const all = theirs.slice(r * perRun, (r + 1) * perRun);
    const mine = all.slice(warmDevices);
    const rounds = Array.from({ length: unicastRounds }, (_, k) => mine.slice(k * unicast, (k + 1) * unicast));
    return {
      warmDevices: all.slice(0, warmDevices),
      rounds,
      idleProbes: mine.slice(unicast * unicastRounds, unicast * unicastRounds + fairness),
      busyProbes: mine.slice(unicast * unicastRounds + fairness, unicast * unicastRounds + 2 * fairness),
      idleQueued: mine.slice(unicast * unicastRounds + 2 * fairness, unicast * unicastRounds + 3 * fairness),
      busyQueued: mine.slice(unicast * unicastRounds + 3 * fairness),
    };
  };
  console.log(
    `cluster benchmark: seeded ${devices} + ${theirs.length} devices in ${Date.now() - t} ms; 3 Redis masters (ports ${cluster.ports.join(', ')}), ` +
      `prefix ${prefix} x ${partitions} partitions, PostgreSQL primary + streaming replica, PgBouncer ${bouncer.port} (transaction mode); ` +
      `service log lines in ${LOG_FILE}`,
  );
  const pids = await pg.pids();
  step('engines up, devices seeded');
  const auth = (key: string) => `Basic ${Buffer.from(`:${key}`).toString('base64')}`;
  const broadcaster = auth(stack.keys.write);
  const sender = auth(other.keys.write);
  const post = (base: string, authorization: string, to: unknown, headers: Record<string, string> = {}) =>
    fetch(`${base}/v6/notifications`, {
      method: 'POST',
      headers: { authorization, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ notification: { to, payload: PAYLOAD } }),
    }).then(async (res) => {
      if (res.status !== 201) throw new Error(`POST failed: ${res.status} ${await res.text()}`);
      return ((await res.json()) as { id: string }).id;
    });
  const oneDevice = (id: string) => [{ name: 'device_id', criteria: [id] }];

  const snapshot = async (services: Services): Promise<Snapshot> => ({
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
    wal: (await sql<{ lsn: string }>`select pg_current_wal_lsn()::text as lsn`.execute(db.db)).rows[0]!.lsn,
  });
  /** What was spent between two snapshots: CPU ms per tier, Redis commands, WAL bytes. */
  const spent = async (before: Snapshot, after: Snapshot) => {
    const { rows } = await sql<{ bytes: string }>`
      select pg_wal_lsn_diff(${after.wal}::pg_lsn, ${before.wal}::pg_lsn)::text as bytes`.execute(db.db);
    const cpu = Object.fromEntries(Object.entries(after.cpu).map(([tier, ms]) => [tier, ms - before.cpu[tier as Tier]])) as Record<
      Tier,
      number
    >;
    const detail = Object.fromEntries(Object.entries(after.detail).map(([k, ms]) => [k, ms - (before.detail[k] ?? 0)]));
    return { cpu, detail, commands: after.commands - before.commands, wal: Number(rows[0]!.bytes) };
  };
  type Spent = Awaited<ReturnType<typeof spent>>;
  const perTier = (f: (tier: Tier) => number) => Object.fromEntries(TIERS.map((tier) => [tier, f(tier)])) as Record<Tier, number>;
  /** Per push, gross and net of `idle` (spent per second with nothing to send) over the phase's `seconds`. */
  const measured = async (before: Snapshot, after: Snapshot, pushes: number, idle: Omit<Spent, 'detail'>, seconds: number) => {
    const used = await spent(before, after);
    return {
      cpuUs: perTier((tier) => (used.cpu[tier] * 1000) / pushes),
      netCpuUs: perTier((tier) => ((used.cpu[tier] - idle.cpu[tier] * seconds) * 1000) / pushes),
      commands: used.commands / pushes,
      netCommands: (used.commands - idle.commands * seconds) / pushes,
      walBytes: used.wal / pushes,
    };
  };

  /**
   * Posts the probes PROBE_EVERY_MS apart while `going` holds, each to one device of the other app; `keyed` with an
   * Idempotency-Key, which creates each alone (the API sends it itself too, unless it has no room: then a delivery job).
   */
  const probe = async (
    services: Services,
    probes: readonly { id: string; token: string | null }[],
    going: () => boolean,
    keyed = false,
  ) => {
    await mocks.watch(probes.map((d) => d.token!));
    const posted: Posted[] = [];
    if (keyed) await sleep(PROBE_EVERY_MS / 2); // between the direct ones
    for (const [i, d] of probes.entries()) {
      if (!going()) break;
      const at = performance.timeOrigin + performance.now();
      const headers: Record<string, string> = keyed ? { 'idempotency-key': `probe-${d.token}` } : {};
      const id = await post(services.bases[i % services.bases.length]!, sender, oneDevice(d.id), headers);
      posted.push({ id, token: d.token!, at, answeredAt: performance.timeOrigin + performance.now() });
      await sleep(PROBE_EVERY_MS);
    }
    return posted;
  };
  /**
   * The probes' times to push, split into the POST's answer and what came after it; how many the API processes
   * sent; those of the probes in the queue partition of `broadcast`.
   */
  const timesToPush = async (posted: Posted[], broadcast?: string): Promise<ProbeTimes> => {
    const tokens = posted.map((p) => p.token);
    const arrivals = await mocks.arrivals(tokens);
    const byApi = apiMocks === workerMocks ? null : (await apiMocks.counts(tokens)).filter((n) => n > 0).length;
    const times = posted.map((p, i) => (arrivals[i] == null ? Infinity : arrivals[i]! - p.at));
    const sorted = (f: (p: Posted, arrival: number | null) => number) => posted.map((p, i) => f(p, arrivals[i]!)).sort((a, b) => a - b);
    const shared = broadcast === undefined ? -1 : partitionOf(broadcast, partitions);
    return {
      total: [...times].sort((a, b) => a - b),
      answer: sorted((p) => p.answeredAt - p.at),
      afterAnswer: sorted((p, a) => (a === null ? Infinity : a - p.answeredAt)),
      byApi,
      inBroadcastPartition: times.filter((_, i) => partitionOf(posted[i]!.id, partitions) === shared).sort((a, b) => a - b),
    };
  };
  /**
   * Where the time went of the probes that were queued, from their delivery jobs' events in the partitions' event streams (whose ids
   * are Redis's clock, ms): POST to the job added, added to taken by a worker, taken to the push, push to done;
   * each list sorted. Only on the Redis Cluster (not the `single-redis` variant).
   */
  const queueTimes = async (posted: Posted[], arrivals: (number | null)[]) => {
    const streams = new Map<number, [string, string[]][]>();
    for (const p of new Set(posted.map((q) => partitionOf(q.id, partitions)))) {
      const tag = partitionPrefix(prefix, p, partitions);
      streams.set(p, await withNode(await cluster.ownerOf(tag), (r) => r.xrange(`${tag}:delivery:events`, '-', '+')));
    }
    const parts = { posted: [] as number[], waiting: [] as number[], worker: [] as number[], record: [] as number[] };
    for (const [i, q] of posted.entries()) {
      const job = `${q.id}-g1-b0`;
      const at = (event: string) => {
        const entry = streams.get(partitionOf(q.id, partitions))!.find(([, f]) => f[f.indexOf('jobId') + 1] === job && f[1] === event);
        return entry ? Number(entry[0].split('-')[0]) : NaN;
      };
      const [added, active, completed, arrived] = [at('added'), at('active'), at('completed'), arrivals[i] ?? NaN];
      if (Number.isNaN(added)) continue; // sent by the API process, no job
      parts.posted.push(added - q.at);
      parts.waiting.push(active - added);
      parts.worker.push(arrived - active);
      parts.record.push(completed - arrived);
    }
    for (const list of Object.values(parts)) list.sort((a, b) => a - b);
    return parts;
  };
  /** What the API processes report of their event loops and gateway sends since last asked (their lag resets when read). */
  const apiGauges = async (services: Services) => {
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
  };

  if (faults) return runFaults(engines, env, broadcaster);

  const phases: Phase[] = [];
  const fair: {
    workers: number;
    idle: ProbeTimes;
    busy: ProbeTimes;
    /** the probes posted with an Idempotency-Key, created alone */
    idleQ: ProbeTimes;
    busyQ: ProbeTimes;
    queuedParts: Awaited<ReturnType<typeof queueTimes>> | null;
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
  }[] = [];
  const idles: ({ workers: number; variant: Variant } & Omit<Spent, 'detail'>)[] = [];
  const oauth = await new ServiceAccountTokenCredential(parseFcmServiceAccount(mocks.serviceAccount), {
    tokenUrl: mocks.fcmTokenUrl,
  }).getAccessToken();
  for (const [r, { workers, variant }] of runs.entries()) {
    const { warmDevices: warmOnes, rounds, idleProbes, busyProbes, idleQueued, busyQueued } = devicesOf(r);
    const apis = variant === 'one-api' ? 1 : 2;
    const services = await startServices(envOf(variant), { mode: 'split', apis, workers, logFile: LOG_FILE, apiEnv });
    step(`${workers} worker(s), ${variant}: ${apis} API process(es) and ${workers} worker(s) ready`);
    const lag = new LagSampler(db.db);
    try {
      // unicast clients, spread over the API processes
      const loads = services.bases.map(
        (base) => new LoadClients({ base, authorization: sender, clients: Math.ceil(clients / apis), agent: 'undici', where: 'thread' }),
      );
      const unicastPosts = (list: typeof theirs) => {
        const lists: Post[][] = loads.map(() => []);
        for (const [i, d] of list.entries())
          lists[i % loads.length]!.push({ path: '/v6/notifications', body: { notification: { to: oneDevice(d.id), payload: PAYLOAD } } });
        return Promise.all(loads.map((load, i) => load.post(lists[i]!)));
      };
      // warm, not counted: the API processes' one-device sends (their gateway connections, the JIT), grouped and
      // created alone (with an Idempotency-Key)
      const warm = warmOnes.slice(0, WARM_A_PROCESS * apis);
      await unicastPosts(warm);
      await Promise.all(
        warm.slice(0, 40).map((d, i) => post(services.bases[i % apis]!, sender, oneDevice(d.id), { 'idempotency-key': `warm-${r}-${i}` })),
      );
      await waitReceived(mocks, warm.length + Math.min(40, warm.length), 60_000);
      await mocks.reset();
      step('warmed');
      const idleBefore = await snapshot(services);
      await sleep(IDLE_S * 1000);
      const idleUsed = await spent(idleBefore, await snapshot(services));
      const idlePerS = {
        cpu: perTier((tier) => idleUsed.cpu[tier] / IDLE_S),
        commands: idleUsed.commands / IDLE_S,
        wal: idleUsed.wal / IDLE_S,
      };
      idles.push({ workers, variant, ...idlePerS });

      if (!unicastOnly) {
        // fairness, nothing else running
        const idlePosted = await Promise.all([probe(services, idleProbes, () => true), probe(services, idleQueued, () => true, true)]);
        await sleep(1000);
        const idle = await timesToPush(idlePosted[0]);
        const idleQ = await timesToPush(idlePosted[1]);
        await mocks.reset();

        // the broadcast, the other app's probes posted while it runs; the event loops' delays and the machine's
        // CPU read before (which resets the delays) and after
        const apiBefore = await apiGauges(services);
        await Promise.all([workerMocks.loopDelay(), apiMocks.loopDelay()]);
        const machineBefore = machineCpu();
        const before = await snapshot(services);
        lag.start();
        const t0 = performance.timeOrigin + performance.now();
        const id = await post(services.bases[0]!, broadcaster, '*');
        let broadcasting = true;
        const probes = Promise.all([
          probe(services, busyProbes, () => broadcasting),
          probe(services, busyQueued, () => broadcasting, true),
        ]);
        // its failure is thrown where it is awaited, and the engines stopped; unhandled meanwhile, it would end the
        // process with the engines left running
        probes.catch(() => undefined);
        const finished = waitFinished(services.bases[1]!, broadcaster, id);
        await Promise.race([waitReceived(mocks, devices, 600_000), finished]);
        broadcasting = false;
        const [posted, postedQ] = await probes;
        await waitReceived(mocks, devices + posted.length + postedQ.length, 30_000);
        const { lastAtEpochMs } = await mocks.received();
        const after = await snapshot(services);
        const machineAfter = machineCpu();
        const apiAfter = await apiGauges(services);
        const workerMockLoop = await workerMocks.loopDelay();
        const apiMockLoop = apiMocks === workerMocks ? null : await apiMocks.loopDelay();
        const lagMax = lag.stop();
        await finished;
        await sleep(1000); // a push sent twice would arrive now
        const busy = await timesToPush(posted, id);
        const busyQ = await timesToPush(postedQ, id);
        const queuedParts =
          variant === 'single-redis' ? null : await queueTimes(postedQ, await mocks.arrivals(postedQ.map((q) => q.token)));
        step('broadcast done');
        const counted = await mocks.summary();
        await mocks.reset();

        // the ceiling: the same pushes from a bare client to the same mocks
        const bare = await bareBroadcast(mocks, oauth.access_token, { devices, payload: PAYLOAD, notificationId: id });
        await mocks.reset();
        const bareRate = bare.ok / (bare.ms / 1000);
        step('bare client done');
        const broadcastS = (lastAtEpochMs - t0) / 1000;
        phases.push({
          workers,
          variant,
          traffic: `broadcast, ${devices} devices`,
          pushes: devices,
          seconds: broadcastS,
          bare: bareRate,
          ...(await measured(before, after, devices + posted.length + postedQ.length, idlePerS, broadcastS)),
          lag: lagMax,
          missed: devices + posted.length + postedQ.length - counted.distinct,
          twice: counted.twice,
        });
        fair.push({
          workers,
          idle,
          busy,
          idleQ,
          busyQ,
          queuedParts,
          broadcastS,
          apiLoop: { p50: apiAfter.lagP50, p99: apiAfter.lagP99, max: apiAfter.lagMax },
          workerMockLoop,
          apiMockLoop,
          apiSends: apiAfter.sends - apiBefore.sends,
          apiSendMs: ((apiAfter.sendSeconds - apiBefore.sendSeconds) * 1000) / Math.max(1, apiAfter.sends - apiBefore.sends),
          machineBusy: (machineAfter.busy - machineBefore.busy) / (machineAfter.total - machineBefore.total),
        });
        console.log(`${workers} worker(s), ${variant}: broadcast ${(devices / broadcastS).toFixed(0)}/s, bare ${bareRate.toFixed(0)}/s`);
      }

      // unicast: one-device notifications of the other app
      for (const [k, roundDevices] of rounds.entries()) {
        const uBefore = await snapshot(services);
        lag.start();
        const u0 = performance.timeOrigin + performance.now();
        const answers = await unicastPosts(roundDevices);
        await waitReceived(mocks, unicast, 120_000);
        const uLast = (await mocks.received()).lastAtEpochMs;
        const uAfter = await snapshot(services);
        const uLag = lag.stop();
        await sleep(1000);
        const tally = await mocks.tally(roundDevices.map((d) => d.token!));
        const refused = answers.reduce((n, a) => n + a.statuses.filter((s) => s !== 201).length, 0);
        if (refused) throw new Error(`${refused} unicast posts were not answered 201`);
        await mocks.reset();
        const bareRate = phases.find((p) => p.workers === workers && p.variant === variant)?.bare ?? NaN;
        phases.push({
          workers,
          variant,
          traffic: `unicast, ${unicast} notifications${unicastRounds > 1 ? `, round ${k + 1}` : ''}`,
          pushes: unicast,
          seconds: (uLast - u0) / 1000,
          bare: bareRate,
          ...(await measured(uBefore, uAfter, unicast, idlePerS, (uLast - u0) / 1000)),
          lag: uLag,
          ...tally,
        });
        // where the CPU went: PostgreSQL's processes by kind (exited ones: their time moves to `exited` when they end),
        // the API processes' threads; µs a notification, the larger ones
        const { detail } = await spent(uBefore, uAfter);
        const total = Object.values(detail).reduce((a, b) => a + Math.abs(b), 0);
        const parts = Object.entries(detail)
          .filter(([, ms]) => Math.abs(ms) >= total / 200)
          .sort((a, b) => b[1] - a[1])
          .map(([k, ms]) => `${k} ${((ms * 1000) / unicast).toFixed(0)}`);
        console.log(`${workers} worker(s), ${variant}, round ${k + 1}: unicast CPU µs a notification by process: ${parts.join(', ')}`);
        const latencies = answers.flatMap((a) => Array.from(a.latencies)).sort((a, b) => a - b);
        const postSeconds = (Math.max(...answers.map((a) => a.endedAt)) - Math.min(...answers.map((a) => a.startedAt))) / 1000;
        console.log(
          `${workers} worker(s), ${variant}, round ${k + 1}: unicast POST ${(unicast / postSeconds).toFixed(0)} req/s, p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms; ` +
            `end to end ${(unicast / ((uLast - u0) / 1000)).toFixed(0)}/s`,
        );
      }
      await Promise.all(loads.map((load) => load.close()));
    } finally {
      lag.stop();
      await services.stop();
    }
  }
  await stack.close();

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
  console.log(
    `\nfairness: time to push (POST to the push at the mock gateway) of one-device notifications of another app, posted 100 ms ` +
      `apart; the API processes' sends to ${probeGateway === 'apart' ? 'mock gateways of their own' : "the broadcast's mock gateways"}\n`,
  );
  const ms = (xs: number[], p: number) => (xs.length ? `${percentile(xs, p).toFixed(0)} ms` : '–');
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
  const bad = phases.filter((p) => p.missed > 0 || p.twice > 0);
  for (const p of bad) console.error(`FAIL ${p.workers} worker(s), ${p.traffic}: ${p.missed} missed, ${p.twice} pushed twice`);
  return bad.length ? 1 : 0;
}

/**
 * --faults: a broadcast while a worker, the Redis master of its partition and the PostgreSQL replica are killed.
 */
async function runFaults(engines: Engines, env: Record<string, string>, broadcaster: string): Promise<number> {
  const { cluster, pg, mocks } = engines;
  const workers = workerCounts.at(-1)!;
  const services = await startServices(env, { mode: 'split', apis: 2, workers, logFile: LOG_FILE });
  const injected: string[] = [];
  try {
    const res = await fetch(`${services.bases[0]}/v6/notifications`, {
      method: 'POST',
      headers: { authorization: broadcaster, 'content-type': 'application/json' },
      body: JSON.stringify({ notification: { to: '*', payload: PAYLOAD } }),
    });
    if (res.status !== 201) throw new Error(`POST failed: ${res.status} ${await res.text()}`);
    const { id } = (await res.json()) as { id: string };
    const t0 = performance.now();
    const master = await cluster.ownerOf(partitionPrefix(env.QUEUE_PREFIX!, partitionOf(id, partitions), partitions));
    const reached = async () => (await mocks.summary()).distinct;
    const at = async (share: number) => {
      while ((await reached()) < devices * share) await sleep(20);
      return `${Math.round((100 * (await reached())) / devices)}%`;
    };
    injected.push(`worker SIGKILLed at ${await at(0.25)}`);
    services.killWorker(0);
    injected.push(`Redis master ${master} (the broadcast's partition) SIGKILLed at ${await at(0.5)}`);
    await cluster.kill(master);
    injected.push(`PostgreSQL replica stopped (immediate) at ${await at(0.75)}`);
    await pg.killReplica();
    // ended by the notification's state, read from the primary by the other API process
    const finished = await Promise.race([
      waitFinished(services.bases[1]!, broadcaster, id).then(() => true),
      sleep(600_000).then(() => false),
    ]);
    const seconds = (performance.now() - t0) / 1000;
    await sleep(1000);
    const { distinct, twice } = await mocks.summary();
    const missed = devices - distinct;
    const bound = duplicateBound(FAULTS, 2);
    console.log(`\ncluster faults: ${devices} devices, ${workers} worker(s); ${injected.join('; ')}\n`);
    printRows(
      ['devices missed', 'pushed twice (bound)', 'time to finish'],
      [[String(missed), `${twice} (${bound})`, finished ? `${seconds.toFixed(1)} s` : 'did not finish']],
    );
    const failed = missed > 0 || twice > bound || !finished;
    if (failed) console.error('FAIL: a device missed, more sent twice than the batches in flight, or unfinished');
    return failed ? 1 : 0;
  } finally {
    await services.stop();
  }
}

/** A queue prefix whose partitions' hash tags land on every master of the cluster, as evenly as the count allows. */
async function spreadPrefix(cluster: RedisCluster): Promise<string> {
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

/** A fairness probe: its notification, when it was posted and answered (epoch ms). */
interface Posted {
  id: string;
  token: string;
  at: number;
  answeredAt: number;
}

/** Probes' times, each list sorted (ms): to the push, to the POST's answer, from the answer to the push. */
interface ProbeTimes {
  total: number[];
  answer: number[];
  afterAnswer: number[];
  /** how many reached the API processes' mocks (null: they share the workers') */
  byApi: number | null;
  /** the times to push of those whose jobs share the broadcast's queue partition, sorted */
  inBroadcastPartition: number[];
}

interface SingleRedis {
  port: number;
  pid: number;
  stop(): void;
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

/** /proc/<pid>/stat's fields after the command name: [1] the parent, [11] utime, [12] stime, [13]-[14] children's. */
function procFields(pid: number | string): number[] {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ').map(Number);
}
const MS_A_TICK = 10; // sysconf(_SC_CLK_TCK) is 100 on Linux
const SERVER_PROCESS_KINDS = [
  'checkpointer',
  'background writer',
  'walwriter',
  'autovacuum launcher',
  'autovacuum worker',
  'walsender',
  'walreceiver',
  'startup',
  'logical replication launcher',
  'archiver',
];

/**
 * CPU ms so far of a PostgreSQL server's processes by kind (their process titles; `backend` for the connections,
 * `exited` for the children that have ended), each kind's name after `label`.
 */
function serverDetail(postmaster: number, label: string): Record<string, number> {
  const out: Record<string, number> = {};
  const add = (kind: string, ticks: number) => (out[label + kind] = (out[label + kind] ?? 0) + ticks * MS_A_TICK);
  const main = procFields(postmaster);
  add('postmaster', main[11]! + main[12]!);
  add('exited', main[13]! + main[14]!);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = procFields(entry);
      if (fields[1] !== postmaster) continue;
      const title = readFileSync(`/proc/${entry}/cmdline`, 'utf8')
        .replace(/\0/g, ' ')
        .replace(/^postgres: /, '');
      add(SERVER_PROCESS_KINDS.find((k) => title.startsWith(k)) ?? 'backend', fields[11]! + fields[12]!);
    } catch {
      // exited meanwhile: its time is in the postmaster's
    }
  }
  return out;
}

/** CPU ms so far of the processes' threads, summed by thread name (the main one's: `node`), after `label`. */
function threadDetail(pids: number[], label: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const pid of pids)
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
        const fields = procFields(`${pid}/task/${tid}`);
        out[label + name] = (out[label + name] ?? 0) + (fields[11]! + fields[12]!) * MS_A_TICK;
      } catch {
        // ended meanwhile
      }
    }
  return out;
}

/** The machine's CPU time so far (/proc/stat, all cores, ticks): busy, and in all. */
function machineCpu(): { busy: number; total: number } {
  const ticks = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = ticks.reduce((a, b) => a + b, 0);
  // idle and iowait
  return { busy: total - ticks[3]! - ticks[4]!, total };
}

function sumCpu(pids: number[]): number {
  return pids.reduce((sum, pid) => sum + cpuMs(pid), 0);
}

/** The replica's largest replay lag, in time and in bytes, sampled on the primary every 250 ms. */
class LagSampler {
  private timer: NodeJS.Timeout | undefined;
  private max = { seconds: 0, bytes: 0 };
  constructor(private readonly db: Awaited<ReturnType<typeof benchApp>>['db']['db']) {}

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

const began = performance.now();
/** A line on the way, so a long run shows where it is. */
const step = (what: string) => console.log(`[${((performance.now() - began) / 1000).toFixed(1)} s] ${what}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

main().then(
  () => process.exit(),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
