/**
 * Unicast benchmark: the traffic most apps send — many small notifications, each to one device. C concurrent
 * clients post K notifications, each targeting one seeded device (by a `device_id` filter, a `user_id` filter,
 * or through `POST /v6/transactional/notifications`, which answers once the gateway has), against the mock gateways. Each configuration runs on a fresh database: the API and the workers in
 * one process (`npm start`) or apart, on either queue backend. Beside the figures, PostgreSQL's own commit
 * ceiling on the same server (`pgbench -N`, 50 clients), so they can be read on a faster or slower machine, and the
 * floor (bench/lib/floor-server.ts, posted to by the same clients): what a durable 201 costs on this stack alone.
 *
 *   npm run bench -- unicast [--notifications 10000] [--clients 50] [--target device_id,user_id,transactional]
 *                            [--mode single,split] [--queue redis,postgres] [--timeout-s 300]
 *                            [--rate 0 | --rate-of-pgbench 0.5] [--gateway-latency-ms 0] [--warmup 10000] [--returning]
 *
 * By default the clients post as fast as they are answered (what the service absorbs). With --rate R they post R
 * notifications a second on a schedule, as live traffic comes, and the backlog (answered, not yet pushed) is
 * sampled as they go: whether delivery keeps up with that rate (`--rate 1000 --notifications 60000`: 60 s). A paced
 * post's latency counts from when it was due, so a post held back because all the clients were waiting counts that
 * wait (no coordinated omission). --rate-of-pgbench F sets R to F times the same run's `pgbench -N`.
 * --gateway-latency-ms N: the mocks answer every push N ms late, as a far data centre does.
 *
 * By default it measures what an outside client sees (the "outside" view): the clients in a process of their own
 * posting with node:http over a keep-alive http.Agent (HTTP/1.1, one connection each); the devices registered
 * through `POST /v6/devices` with the sdk key and what a phone sends (bench/lib/device-fill.ts); the service with
 * production's settings (rate limits on, their buckets in Redis when REDIS_URL is set, LOG_LEVEL info, its log
 * lines to a file, the node flags of `npm start`); the mock gateways in a process of their own. --lab measures as
 * the lab did: the clients (undici) on a thread of this process, bare device rows inserted by SQL, rate limits off
 * and LOG_LEVEL warn, the mocks on this process's main thread. Each part can be switched alone, to tell which one
 * makes a difference:
 *   --clients-in process|thread  --http-client http|undici  --devices api|sql  --config production|lab
 *   --mocks-in process|bench     --registered N (devices registered, at least --notifications + --warmup)
 *   --analyze yes|no (no: the devices' table left without statistics after the fill, as on a server without autovacuum)
 *   --notification-days N (the day partitions of the last N days made before the run, as a server holds them after
 *   N days: the notifications' are kept RETENTION_NOTIFICATIONS_DAYS, 90 by default; a new database has today's)
 *   --latencies-to PREFIX (each counted post's latency in ms, a line each in the order posted, to PREFIX-<target>-<mode>-<queue>.txt:
 *   when the slow ones came)
 *   --wal-detail (the counted window's WAL by relation and record kind, a notification's share of each, with
 *   pg_walinspect, PostgreSQL 15 or later: which writes a notification costs; read it on a server nothing else writes to)
 *   --flush-delay-ms N (everything, pgbench included, on a PostgreSQL of the benchmark's own whose WAL flush takes N ms
 *   longer, bench/lib/slow-flush.ts: a disk slow to flush, as on the machine the targets were set on, or a synchronous
 *   standby; its WAL segments made and recycled before, as a server that has run a while has them)
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../src/db/schema.js';
import pg from 'pg';
import { arg, benchDatabase, cpuMs, freePort, parentPid, percentile, PRODUCTION_NODE_ARGS, serverCpuMs, waitReady } from './lib/setup.js';
import { LoadClients, type Answers } from './lib/load-clients.js';
import { fillShape, insertBareDevices, registerThroughApi, walBytesDuring } from './lib/device-fill.js';
import { mocksHere, mocksInProcess } from './lib/mock-gateways.js';
import { startSlowFlushPostgres } from './lib/slow-flush.js';
import { pgbenchTps } from './lib/pgbench.js';
import { BENCH_BUNDLE, benchApp, LAB_ENV, startServices } from './lib/stack.js';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { PartitionsRepository } from '../src/db/repositories/partitions.js';
import { loadConfig } from '../src/platform/config.js';
import { createLogger } from '../src/platform/logger.js';
import { maintainPartitions, retentionOf } from '../src/delivery/retention.js';
import path from 'node:path';
import { createRepositories } from '../src/services/deps.js';

const K = Number(arg('notifications', '10000'));
const clients = Number(arg('clients', '50'));
type Target = 'device_id' | 'user_id' | 'transactional';
const targets = arg('target', 'device_id,user_id,transactional').split(',') as Target[];
const modes = arg('mode', 'single,split').split(',') as ('single' | 'split')[];
const queues = arg('queue', process.env.REDIS_URL ? 'redis,postgres' : 'postgres').split(',');
const timeoutMs = Number(arg('timeout-s', '300')) * 1000;
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
/** --rate-of-pgbench F: posted at F times the same run's `pgbench -N` (the README's "POST ≥ 0.5 × pgbench -N at p99 ≤ 50 ms") */
const rateOfPgbench = Number(arg('rate-of-pgbench', '0'));
let rate = Number(arg('rate', '0'));
if (!Number.isFinite(rate) || !Number.isFinite(rateOfPgbench) || rate < 0 || rateOfPgbench < 0)
  throw new Error('--rate and --rate-of-pgbench take a number of 0 or more');
if (rate > 0 && rateOfPgbench > 0) throw new Error('--rate and --rate-of-pgbench: one or the other');
const latencyMs = Number(arg('gateway-latency-ms', '0'));
/**
 * Notifications posted first, by all the clients at once, and not counted: gateway connections, JWT and OAuth
 * tokens, prepared plans, and the JIT compiling the hot paths (a server that has run a while has done all that).
 */
const WARMUP = Number(arg('warmup', '10000'));
/**
 * --returning: the counted notifications go to the devices the warm-up notified, as a user's next notification
 * does (its audience is stored already); by default each goes to a device not notified before.
 */
const returning = process.argv.includes('--returning');
if (returning && WARMUP < K) throw new Error('--returning needs --warmup >= --notifications');
/** The measuring setup: each part as an outside client meets it, or as the lab had it (--lab). */
const lab = process.argv.includes('--lab');
const view = {
  clientsIn: arg('clients-in', lab ? 'thread' : 'process') as 'process' | 'thread',
  httpClient: arg('http-client', lab ? 'undici' : 'http') as 'http' | 'undici',
  devices: arg('devices', lab ? 'sql' : 'api') as 'api' | 'sql',
  config: arg('config', lab ? 'lab' : 'production') as 'production' | 'lab',
  mocksIn: arg('mocks-in', lab ? 'bench' : 'process') as 'process' | 'bench',
};
const OUTSIDE = { clientsIn: 'process', httpClient: 'http', devices: 'api', config: 'production', mocksIn: 'process' } as const;
const LAB = { clientsIn: 'thread', httpClient: 'undici', devices: 'sql', config: 'lab', mocksIn: 'bench' } as const;
/** "outside", "lab", or the view nearest to this setup with the parts that differ from it */
const viewName = (() => {
  const differs = (from: Record<string, string>) => Object.entries(view).filter(([k, v]) => from[k] !== v);
  const [name, base] = differs(LAB).length < differs(OUTSIDE).length ? ['lab', LAB] : ['outside', OUTSIDE];
  const parts = differs(base);
  return parts.length ? `${name} but ${parts.map(([k, v]) => `${k} ${v}`).join(', ')}` : name;
})();
const analyze = arg('analyze', 'yes') !== 'no';
const notificationDays = Number(arg('notification-days', '0'));
const latenciesTo = arg('latencies-to', '');
/** --wal-detail: the counted window's WAL split by relation and record type (pg_walinspect, PostgreSQL 15+) */
const walDetail = process.argv.includes('--wal-detail');
const flushDelayMs = Number(arg('flush-delay-ms', '0'));
if (!Number.isFinite(flushDelayMs) || flushDelayMs < 0) throw new Error('--flush-delay-ms takes a number of 0 or more');
/** where the service's log lines go with production's settings (appended, left for reading) */
/** production's defaults where the benchmarks' service processes are started otherwise (startService: LOG_LEVEL warn) */
const PRODUCTION_ENV = { LOG_LEVEL: 'info' };
const LOG_FILE = path.join(tmpdir(), `pushd-bench-unicast-${process.pid}.log`);
const registered = Math.max(Number(arg('registered', '0')), K + WARMUP);
/** backlog samples taken during a run at a fixed rate */
const SAMPLES = 6;

interface Result {
  target: string;
  mode: string;
  queue: string;
  postPerSec: number;
  p50: number;
  p99: number;
  refused: number;
  endToEnd: number;
  backlog: number;
  /** at --rate: the backlog at each sixth of the posting */
  backlogSamples: number[];
  /** at --rate: how late the last notification was posted, s (the service absorbing less than the rate) */
  behindS: number;
  missed: number;
  twice: number;
  unfinished: boolean;
  /** CPU time per notification, ms: the service's processes (the API's, the workers'), and the PostgreSQL server's (all its processes) */
  serviceCpu: number;
  apiCpu: number;
  databaseCpu: number;
  /** PostgreSQL's write-ahead log per notification, bytes: its writes, counted exactly whatever the machine's speed */
  walBytes: number;
  /** PostgreSQL WAL bytes per device registration through the API: a new device, then the same one again */
  registrationWal: { first: number; again: number } | null;
  /** the Redis server's, on the Redis queue */
  redisCpu: number | null;
  /** the clients' process, the mocks' process (null: they ran in this one), and this process */
  clientsCpu: number | null;
  mocksCpu: number | null;
  benchCpu: number;
  /** the devices' tables and indexes after the fill */
  shape: string;
  /** PostgreSQL backends opened while the clients posted (a new one reads the catalogs and plans afresh) */
  backendsOpened: number;
  /** s from starting the service to the first counted post */
  serviceAgeS: number;
  /** when the counted posts began and ended, UTC (to be read beside PostgreSQL's log: its checkpoints) */
  postedFrom: string;
  postedTo: string;
}

async function runOne(target: Target, mode: 'single' | 'split', queue: string): Promise<Result> {
  const gateways = view.mocksIn === 'process' ? await mocksInProcess(BENCH_BUNDLE) : await mocksHere(BENCH_BUNDLE);
  const stack = await benchApp('bench_unicast', { queue, redisUrl, gateways });
  const { db, keys, app } = stack;
  // the maintenance of each of the last N days, as it ran then: each makes its day's partitions
  const partitions = new PartitionsRepository();
  const log = createLogger('silent');
  for (let d = notificationDays; d > 0; d--)
    await maintainPartitions(
      { db: db.db, repos: { ...createRepositories(), partitions }, log },
      retentionOf(loadConfig({})),
      new Date(Date.now() - d * 86_400_000),
    );
  let registrationWal: { first: number; again: number } | null = null;
  if (view.devices === 'api') {
    const fill = () =>
      registerThroughApi({ env: stack.env, sdkKey: keys.sdk, identitySecret: stack.identitySecret, count: registered, clients });
    const first = await walBytesDuring(db, fill);
    // each phone registering again with what it sent before, as an app does at its next launch
    const again = await walBytesDuring(db, fill);
    registrationWal = { first: first / registered, again: again / registered };
  } else await insertBareDevices(db, app.id, registered);
  // as autovacuum would have by now; --analyze no: as on a server without autovacuum (the CI's), where a table
  // filled since its creation has no statistics and the device lookups plan as if it were nearly empty
  if (analyze) await sql`analyze devices`.execute(db.db);
  const shape = await fillShape(db);
  // the devices in the order they were registered (user ids u<i> either way; their ids are random)
  const rows = (await db.db.selectFrom('devices').select(['id', 'token', 'user_id']).execute()).sort(
    (a, b) => Number(a.user_id!.slice(1)) - Number(b.user_id!.slice(1)),
  );
  if (latencyMs > 0) await gateways.delay(latencyMs);
  const logFile = view.config === 'production' ? LOG_FILE : undefined;
  const servicesStartedAt = performance.now();
  const services = await startServices(view.config === 'lab' ? { ...stack.env, ...LAB_ENV } : { ...stack.env, ...PRODUCTION_ENV }, {
    mode,
    logFile,
  });

  const auth = `Basic ${Buffer.from(`:${keys.write}`).toString('base64')}`;
  const payload = { alert: 'Your order has shipped', badge: 1 };
  const request = (row: (typeof rows)[number]) =>
    target === 'transactional'
      ? {
          path: '/v6/transactional/notifications',
          body: { to: { field: 'device_id', value: row.id }, group: 'order-shipped', notification: { payload } },
        }
      : {
          path: '/v6/notifications',
          body: {
            notification: {
              to: [target === 'device_id' ? { name: 'device_id', criteria: [row.id] } : { name: 'user_id', criteria: [row.user_id] }],
              payload,
            },
          },
        };
  const load = new LoadClients({ base: services.base, authorization: auth, clients, agent: view.httpClient, where: view.clientsIn });
  const expected = target === 'transactional' ? 200 : 201;
  const waitReceived = async (n: number, deadline: number) => {
    let received = (await gateways.received()).count;
    while (received < n && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      received = (await gateways.received()).count;
    }
    return received;
  };

  await load.post(rows.slice(K).map(request));
  await waitReceived(WARMUP, performance.now() + timeoutMs);
  await gateways.reset();

  // CPU spent per notification, which a busy machine slows down but does not change much
  const servicePids = [...new Set([services.api, ...services.workers].map((c) => c.pid!))];
  // PostgreSQL's: the whole server's, exited backends included (nothing else uses it during a run)
  const postmaster = parentPid((await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db.db)).rows[0]!.pid);
  const cpuOf = (pids: number[]) =>
    new Map(
      pids.flatMap((pid) => {
        try {
          return [[pid, cpuMs(pid)] as const];
        } catch {
          return [];
        }
      }),
    );
  // Redis's CPU: the whole server's (nothing else uses it during a run)
  const redis = queue === 'redis' ? new Redis(redisUrl) : null;
  const redisCpuMs = async () => {
    const info = redis ? await redis.info('cpu') : '';
    return ['used_cpu_user', 'used_cpu_sys'].reduce((sum, k) => sum + Number(new RegExp(`${k}:([\\d.]+)`).exec(info)?.[1] ?? 0) * 1000, 0);
  };
  const cpuBefore = {
    service: cpuOf(servicePids),
    database: serverCpuMs(postmaster),
    bench: process.cpuUsage(),
    redis: await redisCpuMs(),
    others: cpuOf([load.pid, gateways.pid].filter((pid) => pid !== null)),
  };
  const spent = (before: Map<number, number>, after: Map<number, number>) =>
    [...after].reduce((sum, [pid, ms]) => sum + ms - (before.get(pid) ?? 0), 0);

  const walAt = async () => (await sql<{ lsn: string }>`select pg_current_wal_lsn()::text as lsn`.execute(db.db)).rows[0]!.lsn;
  const walBefore = await walAt();
  const measured = returning ? rows.slice(K, 2 * K) : rows.slice(0, K);
  const backlogSamples: number[] = [];
  const sampler =
    rate > 0
      ? setInterval(
          () => {
            const answered = load.answered();
            void gateways.received().then(({ count }) => backlogSamples.push(Math.max(0, answered - count)));
          },
          (K / rate / SAMPLES) * 1000,
        )
      : null;
  const answers = await load.post(measured.map(request), rate);
  // from the first post to the last answer, as the clients saw them (not the hand-over of the list to their thread)
  const { startedAt: t0, endedAt: postedAt } = answers;
  if (sampler) clearInterval(sampler);
  const openedWhilePosting = await sql<{ n: number }>`
    select count(*)::int as n
    from pg_stat_activity
    where datname = current_database()
      and backend_start between to_timestamp(${(performance.timeOrigin + t0) / 1000})
                            and to_timestamp(${(performance.timeOrigin + postedAt) / 1000})`.execute(db.db);
  const behindS = rate > 0 ? Math.max(0, (postedAt - t0) / 1000 - (K - 1) / rate) : 0;
  const backlog = K - (await gateways.received()).count;
  const received = await waitReceived(K, postedAt + timeoutMs);
  const lastAt = (await gateways.received()).lastAtEpochMs - performance.timeOrigin;
  const unfinished = received < K;
  const serviceCpu = spent(cpuBefore.service, cpuOf(servicePids)) / K;
  const apiCpu = spent(cpuBefore.service, cpuOf([services.api.pid!])) / K;
  const databaseCpu = (serverCpuMs(postmaster) - cpuBefore.database) / K;
  const walBytes = (
    await sql<{ bytes: string }>`select pg_wal_lsn_diff(${await walAt()}::pg_lsn, ${walBefore}::pg_lsn)::text as bytes`.execute(db.db)
  ).rows[0]!.bytes;
  // pg_walinspect reads up to what is flushed, not what is written
  if (walDetail)
    await printWalDetail(
      db.db,
      walBefore,
      (await sql<{ lsn: string }>`select pg_current_wal_flush_lsn()::text as lsn`.execute(db.db)).rows[0]!.lsn,
    );
  const redisCpu = redis ? ((await redisCpuMs()) - cpuBefore.redis) / K : null;
  redis?.disconnect();
  const benchUsage = process.cpuUsage(cpuBefore.bench);
  const benchCpu = (benchUsage.user + benchUsage.system) / 1000 / K;
  const others = cpuOf([load.pid, gateways.pid].filter((pid) => pid !== null));
  const ownCpu = (pid: number | null) => (pid === null ? null : (others.get(pid)! - cpuBefore.others.get(pid)!) / K);
  await new Promise((r) => setTimeout(r, 1000)); // a push sent twice would arrive now

  const { missed, twice } = await gateways.tally(measured.map((r) => r.token!));
  const { latencies, refused } = summarised(answers, expected);
  if (latenciesTo)
    writeFileSync(`${latenciesTo}-${target}-${mode}-${queue}.txt`, Array.from(answers.latencies, (ms) => ms.toFixed(2)).join('\n') + '\n');
  await load.close();
  await services.stop();
  await stack.close();
  await gateways.close();
  return {
    target,
    mode,
    queue,
    postPerSec: K / ((postedAt - t0) / 1000),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    refused,
    endToEnd: (unfinished ? received : K) / (((unfinished ? performance.now() : lastAt) - t0) / 1000),
    backlog,
    backlogSamples,
    behindS,
    missed,
    twice,
    unfinished,
    serviceCpu,
    apiCpu,
    databaseCpu,
    walBytes: Number(walBytes) / K,
    registrationWal,
    redisCpu,
    clientsCpu: ownCpu(load.pid),
    mocksCpu: ownCpu(gateways.pid),
    benchCpu,
    shape,
    backendsOpened: openedWhilePosting.rows[0]!.n,
    serviceAgeS: (t0 - servicesStartedAt) / 1000,
    postedFrom: new Date(performance.timeOrigin + t0).toISOString(),
    postedTo: new Date(performance.timeOrigin + postedAt).toISOString(),
  };
}

/**
 * The WAL of the counted window by relation and record kind, a notification's share of each (pg_walinspect, made in
 * the run's own database): which writes a notification costs, and which of them are full-page images.
 */
async function printWalDetail(db: Kysely<Database>, from: string, to: string): Promise<void> {
  await sql`create extension if not exists pg_walinspect`.execute(db);
  const { rows } = await sql<{ rel: string; kind: string; n: number; bytes: number; fpi: number }>`
    with r as (
      select resource_manager || '/' || record_type as kind, record_length, fpi_length,
        (regexp_match(block_ref, 'rel [0-9]+/([0-9]+)/([0-9]+)')) as m
      from pg_get_wal_records_info(${from}::pg_lsn, ${to}::pg_lsn))
    select coalesce(case when m[1]::oid = (select oid from pg_database where datname = current_database())
                      then pg_filenode_relation(0, m[2]::oid)::text end, m[2], '-') as rel,
      kind, count(*)::int as n, sum(record_length)::int as bytes, sum(fpi_length)::int as fpi
    from r group by 1, 2 order by 4 desc`.execute(db);
  const total = rows.reduce((s, r) => s + r.bytes, 0);
  console.log(`WAL of the counted window by relation and record (per notification; records ${(total / K).toFixed(0)} bytes in all):`);
  for (const r of rows)
    console.log(
      `  ${r.rel.padEnd(52)} ${r.kind.padEnd(28)} ${(r.n / K).toFixed(3).padStart(7)} records ${(r.bytes / K).toFixed(1).padStart(8)} bytes (fpi ${(r.fpi / K).toFixed(1)})`,
    );
  // how full the rows written leave the pages (each partition's fillfactor)
  const { rows: sizes } = await sql<{ rel: string; pages: number }>`
    select c.relname as rel, (pg_relation_size(c.oid) / 8192)::int as pages
    from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent in ('notifications'::regclass, 'delivery_batches'::regclass) and pg_relation_size(c.oid) > 0`.execute(db);
  console.log(`Heap pages of the notifications and their batches: ${sizes.map((s) => `${s.rel} ${s.pages}`).join(', ')}`);
}

/** The latencies in order, and how many answers were not `expected`. */
function summarised(answers: Answers, expected: number): { latencies: number[]; refused: number } {
  return {
    latencies: Array.from(answers.latencies).sort((a, b) => a - b),
    refused: answers.statuses.filter((status) => status !== expected).length,
  };
}

interface Floor {
  postPerSec: number;
  p50: number;
  p99: number;
  refused: number;
  serverCpu: number;
  databaseCpu: number;
  /** the clients' process, or this one when they run on its thread */
  clientsCpu: number;
}

/**
 * The same clients against the floor server (bench/lib/floor-server.ts): the least a durable 201 costs on this
 * machine with this stack, for the POST figures to be read against.
 */
async function measureFloor(): Promise<Floor> {
  const database = await benchDatabase('bench_floor');
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  const postmaster = parentPid((await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid);
  const port = await freePort();
  const server = spawn(process.execPath, [...PRODUCTION_NODE_ARGS, '--import', 'tsx', 'bench/lib/floor-server.ts'], {
    env: { ...process.env, DATABASE_URL: database.url, PORT: String(port) },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitReady(`${base}/ready`);
    const authorization = `Basic ${Buffer.from(':floor').toString('base64')}`;
    const load = new LoadClients({ base, authorization, clients, agent: view.httpClient, where: view.clientsIn });
    const posts = (n: number) =>
      Array.from({ length: n }, () => ({
        path: '/v6/notifications',
        body: {
          notification: { to: [{ name: 'device_id', criteria: [randomUUID()] }], payload: { alert: 'Your order has shipped', badge: 1 } },
        },
      }));
    await load.post(posts(WARMUP));
    const clientsCpuMs = () => cpuMs(load.pid ?? process.pid);
    const before = { server: cpuMs(server.pid!), database: serverCpuMs(postmaster), clients: clientsCpuMs() };
    const answers = await load.post(posts(K));
    const seconds = (answers.endedAt - answers.startedAt) / 1000;
    const { latencies, refused } = summarised(answers, 201);
    const clientsCpu = (clientsCpuMs() - before.clients) / K;
    await load.close();
    return {
      postPerSec: K / seconds,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      refused,
      serverCpu: (cpuMs(server.pid!) - before.server) / K,
      databaseCpu: (serverCpuMs(postmaster) - before.database) / K,
      clientsCpu,
    };
  } finally {
    server.kill('SIGKILL');
    await client.end();
    await database.close();
  }
}

async function main() {
  const slowFlush = flushDelayMs > 0 ? await startSlowFlushPostgres(flushDelayMs) : null;
  if (slowFlush) {
    process.on('exit', () => slowFlush.kill());
    process.env.DATABASE_URL = slowFlush.url;
  }
  const tps = await pgbenchTps();
  if (rateOfPgbench > 0) {
    if (!/^[\d.]+$/.test(tps)) throw new Error(`--rate-of-pgbench needs pgbench's figure, got: ${tps}`);
    rate = Math.round(rateOfPgbench * Number(tps));
  }
  const floor = rate === 0 ? await measureFloor() : null;
  const results: Result[] = [];
  for (const queue of queues)
    for (const mode of modes)
      for (const target of targets) {
        const r = await runOne(target, mode, queue);
        results.push(r);
        console.log(
          `${target} / ${mode} / ${queue}: POST ${r.postPerSec.toFixed(0)}/s, end to end ${r.endToEnd.toFixed(0)}/s, missed ${r.missed}, twice ${r.twice}; ` +
            `p99 ${r.p99.toFixed(1)} ms; PostgreSQL backends opened while posting ${r.backendsOpened} (the service started ${r.serviceAgeS.toFixed(1)} s before); posted ${r.postedFrom} to ${r.postedTo}`,
        );
      }

  const pace =
    rate > 0
      ? `posted at ${rate}/s${rateOfPgbench > 0 ? ` (${rateOfPgbench} × pgbench -N)` : ''} for ${(K / rate).toFixed(0)} s, latency counted from when each post was due`
      : 'posted as fast as answered';
  console.log(
    `\nunicast benchmark: ${K} notifications (after ${WARMUP} not counted), each to one device${returning ? ' that the warm-up notified' : ''}, ${clients} concurrent clients, ${pace}; mock gateways on loopback TLS HTTP/2 answering ${latencyMs} ms late`,
  );
  console.log(
    `View: ${viewName} (clients in ${view.clientsIn === 'process' ? 'a process of their own' : "a thread of the benchmark's process"} posting with ${view.httpClient === 'http' ? 'node:http, a keep-alive http.Agent' : "undici's Pool"}; ` +
      `${registered} devices ${view.devices === 'api' ? 'registered through POST /v6/devices with what a phone sends' : 'inserted by SQL, bare'}; ` +
      `the service with ${view.config === 'production' ? `production's settings (rate limits on, LOG_LEVEL info, log lines to ${LOG_FILE})` : 'rate limits off and LOG_LEVEL warn'} and the node flags of npm start; ` +
      `mock gateways in ${view.mocksIn === 'process' ? 'a process of their own' : "the benchmark's process"})` +
      (analyze ? '' : "; the devices' table NOT analyzed after the fill") +
      (notificationDays ? `; the day partitions of the last ${notificationDays} days made before the run` : ''),
  );
  if (slowFlush)
    console.log(
      `PostgreSQL: the benchmark's own (the machine's PostgreSQL 15, default settings), each WAL flush ${flushDelayMs} ms longer than this disk makes it (bench/lib/slow-flush.c), its WAL segments recycled before the run`,
    );
  console.log(`Devices' tables after the fill: ${results[0]?.shape ?? '–'}`);
  console.log(`PostgreSQL commit ceiling on the same server (pgbench -N, 50 clients): ${tps} transactions/s`);
  if (floor)
    console.log(
      `Floor on the same server (bench/lib/floor-server.ts: the device_id POST validated and committed, one INSERT a group, nothing enqueued or delivered): ` +
        `${floor.postPerSec.toFixed(0)} req/s, p50 ${floor.p50.toFixed(1)} ms, p99 ${floor.p99.toFixed(1)} ms, refused ${floor.refused}; ` +
        `CPU ms/request: server ${floor.serverCpu.toFixed(2)}, PostgreSQL ${floor.databaseCpu.toFixed(2)}, benchmark clients ${floor.clientsCpu.toFixed(2)}`,
    );
  console.log('');
  console.log(
    `| view | target | processes | queue | POST req/s | POST p50 ms | POST p99 ms | refused | end to end notifications/s | backlog when posting ended${rate > 0 ? ` (every ${(K / rate / SAMPLES).toFixed(1)} s before) | posting behind the schedule when it ended, s` : ''} | devices missed | pushed twice | CPU ms/notification: service (API + worker) | PostgreSQL | Redis | clients | mock gateways | benchmark process | PostgreSQL WAL bytes/notification | WAL bytes/device registration: new, again |`,
  );
  console.log(
    `|---|---|---|---|---:|---:|---:|---:|---:|---:|${rate > 0 ? '---:|' : ''}---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|`,
  );
  for (const r of results) {
    const processes = r.mode === 'single' ? 'one (npm start)' : 'API + worker';
    const e2e = `${r.endToEnd.toFixed(0)}${r.unfinished ? ' (unfinished at timeout)' : ''}`;
    console.log(
      `| ${viewName} | ${r.target} | ${processes} | ${r.queue} | ${r.postPerSec.toFixed(0)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.refused} | ${e2e} | ${r.backlog}${r.backlogSamples.length ? ` (${r.backlogSamples.join(', ')})` : ''}${rate > 0 ? ` | ${r.behindS.toFixed(1)}` : ''} | ${r.missed} | ${r.twice} | ${r.serviceCpu.toFixed(2)}${r.mode === 'split' ? ` (${r.apiCpu.toFixed(2)} + ${(r.serviceCpu - r.apiCpu).toFixed(2)})` : ''} | ${r.databaseCpu.toFixed(2)} | ${r.redisCpu === null ? '–' : r.redisCpu.toFixed(2)} | ${r.clientsCpu?.toFixed(2) ?? 'in benchmark'} | ${r.mocksCpu?.toFixed(2) ?? 'in benchmark'} | ${r.benchCpu.toFixed(2)} | ${r.walBytes.toFixed(0)} | ${r.registrationWal ? `${r.registrationWal.first.toFixed(0)}, ${r.registrationWal.again.toFixed(0)}` : '–'} |`,
    );
  }
  const bad = results.filter((r) => r.missed > 0 || r.twice > 0 || r.refused > 0);
  await slowFlush?.stop();
  process.exit(bad.length || floor?.refused ? 1 : 0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
