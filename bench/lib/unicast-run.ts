/**
 * One configuration of the unicast benchmark (bench/unicast.ts): a fresh database filled with devices, the service
 * in one mode on one queue, the warm-up, then the counted one-device notifications and what they cost.
 */
import { writeFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import type { DatabaseHandle } from '../../src/db/database.js';
import { PartitionsRepository } from '../../src/db/repositories/partitions.js';
import { maintainPartitions, retentionOf } from '../../src/delivery/retention.js';
import { loadConfig } from '../../src/platform/config.js';
import { createLogger } from '../../src/platform/logger.js';
import { createRepositories } from '../../src/services/deps.js';
import { fillShape, insertBareDevices, registerThroughApi, walBytesDuring } from './device-fill.js';
import { LoadClients, type Answers, type Post } from './load-clients.js';
import { mocksHere, mocksInProcess, type MockGateways } from './mock-gateways.js';
import { cpuMs, parentPid, percentile, serverCpuMs } from './setup.js';
import { BENCH_BUNDLE, benchApp, LAB_ENV, startServices, type Services } from './stack.js';
import { PRODUCTION_ENV, SAMPLES, type Target, type UnicastOptions } from './unicast-options.js';
import { printWalDetail } from './wal-detail.js';

export interface Result {
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

type Stack = Awaited<ReturnType<typeof benchApp>>;
/** A registered device, as the notifications address it. */
type DeviceRow = { id: string; token: string | null; user_id: string | null };

/** A configuration's service and clients, started on a fresh database filled with devices. */
interface Configuration {
  gateways: MockGateways;
  stack: Stack;
  services: Services;
  /** performance.now() when the service was started */
  servicesStartedAt: number;
  load: LoadClients;
  /** the devices in the order they were registered */
  rows: DeviceRow[];
  registrationWal: Result['registrationWal'];
  shape: string;
  request(row: DeviceRow): Post;
  /** the status a notification is answered with */
  expected: number;
  /** Waits until the mocks have received `n` pushes or `deadline` (performance.now()) passed; the pushes received. */
  waitReceived(n: number, deadline: number): Promise<number>;
}

/** Runs one configuration: `target`'s notifications, the service as `mode` on `queue`. */
export async function runOne(o: UnicastOptions, target: Target, mode: 'single' | 'split', queue: string): Promise<Result> {
  const { notifications: K } = o;
  const c = await startConfiguration(o, target, mode, queue);
  const { gateways, stack, services, load } = c;
  await load.post(c.rows.slice(K).map(c.request));
  await c.waitReceived(o.warmup, performance.now() + o.timeoutMs);
  await gateways.reset();
  const counted = await measureCounted(o, c, queue);
  if (o.latenciesTo)
    writeFileSync(
      `${o.latenciesTo}-${target}-${mode}-${queue}.txt`,
      Array.from(counted.answers.latencies, (ms) => ms.toFixed(2)).join('\n') + '\n',
    );
  await load.close();
  await services.stop();
  await stack.close();
  await gateways.close();
  const { answers: _, ...figures } = counted;
  return { target, mode, queue, ...figures, registrationWal: c.registrationWal, shape: c.shape };
}

/** The mocks, a fresh database filled with devices, the service started on it, and its clients. */
async function startConfiguration(o: UnicastOptions, target: Target, mode: 'single' | 'split', queue: string): Promise<Configuration> {
  const { view } = o;
  const gateways = view.mocksIn === 'process' ? await mocksInProcess(BENCH_BUNDLE) : await mocksHere(BENCH_BUNDLE);
  const stack = await benchApp('bench_unicast', { queue, redisUrl: o.redisUrl, gateways });
  await makeDayPartitions(stack, o.notificationDays);
  const { registrationWal, shape, rows } = await fillDevices(o, stack);
  if (o.latencyMs > 0) await gateways.delay(o.latencyMs);
  const logFile = view.config === 'production' ? o.logFile : undefined;
  const servicesStartedAt = performance.now();
  const services = await startServices(view.config === 'lab' ? { ...stack.env, ...LAB_ENV } : { ...stack.env, ...PRODUCTION_ENV }, {
    mode,
    logFile,
  });

  const auth = `Basic ${Buffer.from(`:${stack.keys.write}`).toString('base64')}`;
  const load = new LoadClients({
    base: services.base,
    authorization: auth,
    clients: o.clients,
    agent: view.httpClient,
    where: view.clientsIn,
  });
  const waitReceived = async (n: number, deadline: number) => {
    let received = (await gateways.received()).count;
    while (received < n && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      received = (await gateways.received()).count;
    }
    return received;
  };
  return {
    gateways,
    stack,
    services,
    servicesStartedAt,
    load,
    rows,
    registrationWal,
    shape,
    request: (row) => requestOf(target, row),
    expected: target === 'transactional' ? 200 : 201,
    waitReceived,
  };
}

/** The maintenance of each of the last `days` days, as it ran then: each makes its day's partitions. */
async function makeDayPartitions({ db }: Stack, days: number): Promise<void> {
  const partitions = new PartitionsRepository();
  const log = createLogger('silent');
  for (let d = days; d > 0; d--)
    await maintainPartitions(
      { db: db.db, repos: { ...createRepositories(), partitions }, log },
      retentionOf(loadConfig({})),
      new Date(Date.now() - d * 86_400_000),
    );
}

/** Registers `registered` devices (through the API, or bare rows by SQL); the WAL a registration took, the tables' shape, the devices. */
async function fillDevices(
  { view, registered, clients, analyze }: UnicastOptions,
  stack: Stack,
): Promise<{ registrationWal: Result['registrationWal']; shape: string; rows: DeviceRow[] }> {
  const { db, keys, app } = stack;
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
  return { registrationWal, shape, rows };
}

const payload = { alert: 'Your order has shipped', badge: 1 };

/** The notification `target` posts to one device. */
function requestOf(target: Target, row: DeviceRow): Post {
  return target === 'transactional'
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
}

/** The counted notifications: posted, delivered, and what they cost; the clients' answers beside the figures. */
async function measureCounted(o: UnicastOptions, c: Configuration, queue: string) {
  const { notifications: K, rate } = o;
  const { db } = c.stack;
  const meters = await cpuMeters(o, queue, db, c.services, [c.load.pid, c.gateways.pid]);
  const walBefore = await walAt(db);
  const measured = o.returning ? c.rows.slice(K, 2 * K) : c.rows.slice(0, K);
  const { answers, backlogSamples } = await postCounted(o, c, measured);
  // from the first post to the last answer, as the clients saw them (not the hand-over of the list to their thread)
  const { startedAt: t0, endedAt: postedAt } = answers;
  const backendsOpened = await backendsOpenedBetween(db, t0, postedAt);
  const behindS = rate > 0 ? Math.max(0, (postedAt - t0) / 1000 - (K - 1) / rate) : 0;
  const backlog = K - (await c.gateways.received()).count;
  const received = await c.waitReceived(K, postedAt + o.timeoutMs);
  const lastAt = (await c.gateways.received()).lastAtEpochMs - performance.timeOrigin;
  const unfinished = received < K;
  const delivered = meters.delivered();
  const walBytes = (
    await sql<{ bytes: string }>`select pg_wal_lsn_diff(${await walAt(db)}::pg_lsn, ${walBefore}::pg_lsn)::text as bytes`.execute(db.db)
  ).rows[0]!.bytes;
  // pg_walinspect reads up to what is flushed, not what is written
  if (o.walDetail)
    await printWalDetail(
      db.db,
      walBefore,
      (await sql<{ lsn: string }>`select pg_current_wal_flush_lsn()::text as lsn`.execute(db.db)).rows[0]!.lsn,
      K,
    );
  const others = await meters.others();
  await new Promise((r) => setTimeout(r, 1000)); // a push sent twice would arrive now

  const { missed, twice } = await c.gateways.tally(measured.map((r) => r.token!));
  const { latencies, refused } = summarised(answers, c.expected);
  return {
    answers,
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
    ...delivered,
    walBytes: Number(walBytes) / K,
    ...others,
    backendsOpened,
    serviceAgeS: (t0 - c.servicesStartedAt) / 1000,
    postedFrom: new Date(performance.timeOrigin + t0).toISOString(),
    postedTo: new Date(performance.timeOrigin + postedAt).toISOString(),
  };
}

/**
 * Posts the counted notifications to `measured`, at --rate on a schedule (the backlog sampled SAMPLES times as they
 * go) or as fast as answered.
 */
async function postCounted({ notifications: K, rate }: UnicastOptions, c: Configuration, measured: DeviceRow[]) {
  const backlogSamples: number[] = [];
  const sampler =
    rate > 0
      ? setInterval(
          () => {
            const answered = c.load.answered();
            void c.gateways.received().then(({ count }) => backlogSamples.push(Math.max(0, answered - count)));
          },
          (K / rate / SAMPLES) * 1000,
        )
      : null;
  const answers = await c.load.post(measured.map(c.request), rate);
  if (sampler) clearInterval(sampler);
  return { answers, backlogSamples };
}

/** PostgreSQL backends of the database opened between `t0` and `t1` (performance.now()). */
async function backendsOpenedBetween({ db }: DatabaseHandle, t0: number, t1: number): Promise<number> {
  const opened = await sql<{ n: number }>`
    select count(*)::int as n
    from pg_stat_activity
    where datname = current_database()
      and backend_start between to_timestamp(${(performance.timeOrigin + t0) / 1000})
                            and to_timestamp(${(performance.timeOrigin + t1) / 1000})`.execute(db);
  return opened.rows[0]!.n;
}

const walAt = async (db: DatabaseHandle) =>
  (await sql<{ lsn: string }>`select pg_current_wal_lsn()::text as lsn`.execute(db.db)).rows[0]!.lsn;

/**
 * CPU spent per notification, which a busy machine slows down but does not change much: the meters read when made,
 * `delivered` reading the service's and PostgreSQL's again, `others` Redis's, this process's and those of `others`
 * (the clients' and the mocks' processes, null when they run in this one); ms a notification.
 */
async function cpuMeters(
  { notifications: K, redisUrl }: UnicastOptions,
  queue: string,
  db: DatabaseHandle,
  services: Services,
  [clientsPid, mocksPid]: [number | null, number | null],
) {
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
  const otherPids = [clientsPid, mocksPid].filter((pid) => pid !== null);
  const cpuBefore = {
    service: cpuOf(servicePids),
    database: serverCpuMs(postmaster),
    bench: process.cpuUsage(),
    redis: await redisCpuMs(),
    others: cpuOf(otherPids),
  };
  const spent = (before: Map<number, number>, after: Map<number, number>) =>
    [...after].reduce((sum, [pid, ms]) => sum + ms - (before.get(pid) ?? 0), 0);
  return {
    delivered: () => ({
      serviceCpu: spent(cpuBefore.service, cpuOf(servicePids)) / K,
      apiCpu: spent(cpuBefore.service, cpuOf([services.api.pid!])) / K,
      databaseCpu: (serverCpuMs(postmaster) - cpuBefore.database) / K,
    }),
    async others() {
      const redisCpu = redis ? ((await redisCpuMs()) - cpuBefore.redis) / K : null;
      redis?.disconnect();
      const benchUsage = process.cpuUsage(cpuBefore.bench);
      const benchCpu = (benchUsage.user + benchUsage.system) / 1000 / K;
      const others = cpuOf(otherPids);
      const ownCpu = (pid: number | null) => (pid === null ? null : (others.get(pid)! - cpuBefore.others.get(pid)!) / K);
      return { redisCpu, clientsCpu: ownCpu(clientsPid), mocksCpu: ownCpu(mocksPid), benchCpu };
    },
  };
}

/** The latencies in order, and how many answers were not `expected`. */
export function summarised(answers: Answers, expected: number): { latencies: number[]; refused: number } {
  return {
    latencies: Array.from(answers.latencies).sort((a, b) => a - b),
    refused: answers.statuses.filter((status) => status !== expected).length,
  };
}
