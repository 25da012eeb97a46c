/**
 * Scale benchmark: one app of `--devices` devices (10 million is the size it is for), filled by SQL with the rows a
 * phone's registration writes (bench/lib/device-fill.ts: devices, their tags and custom attributes, into the same
 * indexes), then one broadcast to all of them for each worker count — the compiled service, one API process and N
 * worker processes on the Redis queue, the fan-out cut into ranges (FANOUT_RANGE_DEVICES) that any worker takes —
 * against a bare HTTP/2 client sending the same pushes to the same tokens at the same mock gateways (a process of
 * their own, counting pushes per token) in the same run.
 *
 *   npm run -s bench -- scale [--devices 50000] [--workers 1,2,4] [--chunk 50000] [--fill-parallel 2] [--range-devices N]
 *                             [--bare each|once] [--age-days D] [--retention-days 8] [--age-audience N]
 *
 * Per worker count: pushes/s, the bare client's on the same tokens and the ratio, WAL bytes a push
 * (pg_current_wal_lsn, the server's: other databases' writes count too), time from the POST to the first and the
 * last push, the ranges the fan-out was cut into, devices missed and pushed twice (exit 1 unless 0 and 0).
 *
 * --age-days D: then D simulated days of traffic on a moved clock. The service has no clock setting, so the
 * maintenance is driven here through the code the workers' sweep runs (maintainPartitions in
 * src/delivery/retention.ts) with a moved `now`, every table of DAY_PARTITIONED kept `--retention-days` (8, the least
 * the settings allow). Each day: the maintenance, then a broadcast's receipts (`--age-audience` devices, all by
 * default), unicast receipts (1 % of them), sessions (20 %, which count their devices active), opens (5 %) and
 * conversions (1 %), written by SQL; a line per day with each table's size (all its partitions), the partitions kept and
 * those dropped so far: flat sizes after the retention period while the drops grow.
 */
import { sql } from 'kysely';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DAY_PARTITIONED, PartitionsRepository, type DayPartitionedTable } from '../src/db/repositories/partitions.js';
import { parseFcmServiceAccount } from '../src/domain/credentials.js';
import { ServiceAccountTokenCredential } from '../src/gateways/google-oauth.js';
import { loadConfig } from '../src/platform/config.js';
import { createLogger } from '../src/platform/logger.js';
import { maintainPartitions, retentionOf } from '../src/delivery/retention.js';
import { fillRegistrations } from './lib/device-fill.js';
import { mocksInProcess, waitReceived, type MockGateways } from './lib/mock-gateways.js';
import { arg, cpuMs, printRows } from './lib/setup.js';
import {
  BENCH_BUNDLE,
  bareBroadcast,
  benchApp,
  LAB_ENV,
  notificationPoster,
  type Services,
  startServices,
  waitFinished,
} from './lib/stack.js';
import { createRepositories } from '../src/services/deps.js';

const devices = Number(arg('devices', '50000'));
const workerCounts = arg('workers', '1,2,4').split(',').map(Number);
const chunk = Number(arg('chunk', '50000'));
const fillParallel = Number(arg('fill-parallel', '2'));
const rangeDevices = arg('range-devices', '');
const ageDays = Number(arg('age-days', '0'));
/** 'once': the bare client runs after the first broadcast only, its rate the reference of every worker count */
const bareOnce = arg('bare', 'each') === 'once';
const retentionDays = arg('retention-days', '8');
const ageAudience = Number(arg('age-audience', String(devices)));
/** Percent of all devices that is `percent` of the aging's daily audience (TABLESAMPLE BERNOULLI's argument). */
const ofAudience = (percent: number) => sql.lit((percent * Math.min(ageAudience, devices)) / devices);
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PAYLOAD = { alert: 'bench', badge: 1 };
const LOG_FILE = path.join(tmpdir(), `pushd-bench-scale-${process.pid}.log`);
/** one-device notifications sent through the queue before each broadcast, so the workers' connections are warm */
const WARM_PER_WORKER = 10;
const DAY_MS = 86_400_000;

type Stack = Awaited<ReturnType<typeof benchApp>>;

async function main(): Promise<number> {
  const mocks = await mocksInProcess(BENCH_BUNDLE);
  try {
    const stack = await benchApp(arg('database', 'bench_scale'), { queue: 'redis', redisUrl, gateways: mocks });
    try {
      await fill(stack);
      const { status, notificationId } = await broadcasts(stack, mocks);
      if (ageDays > 0) await age(stack, notificationId);
      return status;
    } finally {
      await stack.close();
    }
  } finally {
    await mocks.close();
  }
}

/** The devices, `chunk` a statement, `--fill-parallel` at a time; then VACUUM ANALYZE, as autovacuum leaves them. */
async function fill(stack: Stack) {
  const { db, app } = stack;
  const t0 = performance.now();
  let printedAt = 0;
  const { insertMs, indexMs } = await fillRegistrations(db, app.id, {
    count: devices,
    chunk,
    parallel: fillParallel,
    progress: (written) => {
      const now = performance.now();
      if (now - printedAt < 10_000 && written < devices) return;
      printedAt = now;
      step(`filled ${written} of ${devices} devices: ${rate(written, now - t0)}/s`);
    },
  });
  step(`secondary indexes built in ${(indexMs / 1000).toFixed(1)} s`);
  const v0 = performance.now();
  for (const table of ['devices', 'device_tags', 'device_attributes']) await sql`vacuum analyze ${sql.table(table)}`.execute(db.db);
  const vacuumMs = performance.now() - v0;
  const { rows } = await sql<{ relation: string; mb: string }>`
    select relname as relation, (pg_total_relation_size(oid) / 1048576)::text as mb
    from pg_class where relname in ('devices', 'device_tags', 'device_attributes') order by relname`.execute(db.db);
  const total = insertMs + indexMs + vacuumMs;
  console.log(
    `\nfill: ${devices} devices (registration(i) by SQL, ${chunk} a statement, ${fillParallel} at a time) in ` +
      `${(total / 1000).toFixed(1)} s, ${rate(devices, total)} devices/s: rows ${(insertMs / 1000).toFixed(1)} s ` +
      `(${rate(devices, insertMs)}/s), secondary indexes ${(indexMs / 1000).toFixed(1)} s, VACUUM ANALYZE ` +
      `${(vacuumMs / 1000).toFixed(1)} s; MB with indexes: ${rows.map((r) => `${r.relation} ${r.mb}`).join(', ')}\n`,
  );
}

interface Round {
  workers: number;
  seconds: number;
  bare: number;
  bareRun: { ms: number; ok: number };
  walBytes: number;
  workerCpuUs: number;
  firstMs: number;
  lastMs: number;
  ranges: number;
  missed: number;
  twice: number;
}

/** What a worker count's broadcast needs beside its services. */
interface BroadcastContext {
  stack: Stack;
  mocks: MockGateways;
  /** the bare client's FCM access token */
  accessToken: string;
  /** the rounds so far: with --bare once, the first one's bare run serves them all */
  rounds: Round[];
}

/** One broadcast to every device for each worker count, each beside the bare client's same pushes. */
async function broadcasts(stack: Stack, mocks: MockGateways): Promise<{ status: number; notificationId: string }> {
  const { db } = stack;
  const env = { ...stack.env, ...LAB_ENV, ...(rangeDevices ? { FANOUT_RANGE_DEVICES: rangeDevices } : {}) };
  const warmIds = (
    await db.db
      .selectFrom('devices')
      .select('id')
      .where('app_id', '=', stack.app.id)
      .orderBy('id')
      .limit(WARM_PER_WORKER * Math.max(...workerCounts))
      .execute()
  ).map((d) => d.id);
  const oauth = await new ServiceAccountTokenCredential(parseFcmServiceAccount(mocks.serviceAccount), {
    tokenUrl: mocks.fcmTokenUrl,
  }).getAccessToken();
  const ctx: BroadcastContext = { stack, mocks, accessToken: oauth.access_token, rounds: [] };
  let notificationId = '';
  for (const workers of workerCounts) {
    const services = await startServices(env, { mode: 'split', workers, logFile: LOG_FILE });
    const poster = notificationPoster(services.base, stack.keys.write, PAYLOAD);
    try {
      // warm, not counted: one-device notifications through the queue (a create with an Idempotency-Key is not sent
      // by the API itself), so each worker has its gateway connections and credentials, as a long-running one has
      const warm = warmIds.slice(0, WARM_PER_WORKER * workers);
      await Promise.all(
        warm.map((id, i) => poster.post([{ name: 'device_id', criteria: [id] }], { 'idempotency-key': `warm-${workers}-${i}` })),
      );
      await waitReceived(mocks, warm.length, 60_000);
      await sleep(500);
      await mocks.reset();
      step(`${workers} worker(s) started and warm`);
      const { round, id } = await broadcastRound(ctx, workers, services, poster);
      notificationId = id;
      ctx.rounds.push(round);
    } finally {
      await services.stop();
    }
  }
  printBroadcasts(ctx.rounds);
  const bad = ctx.rounds.filter((r) => r.missed > 0 || r.twice > 0);
  for (const r of bad) console.error(`FAIL ${r.workers} worker(s): ${r.missed} devices missed, ${r.twice} pushed twice`);
  return { status: bad.length ? 1 : 0, notificationId };
}

/** The broadcast to every device on `workers` warm workers, then the bare client's same pushes; its round and notification. */
async function broadcastRound(
  { stack, mocks, accessToken, rounds }: BroadcastContext,
  workers: number,
  services: Services,
  { auth, post }: ReturnType<typeof notificationPoster>,
): Promise<{ round: Round; id: string }> {
  const { db } = stack;
  const wal0 = (await sql<{ lsn: string }>`select pg_current_wal_lsn()::text as lsn`.execute(db.db)).rows[0]!.lsn;
  const cpu0 = services.workers.reduce((sum, w) => sum + cpuMs(w.pid!), 0);
  const t0 = performance.timeOrigin + performance.now();
  const { id } = await post('*');
  const finished = waitFinished(services.base, auth, id);
  await Promise.race([waitReceived(mocks, devices, 3_600_000), finished]);
  const { firstAtEpochMs, lastAtEpochMs } = await mocks.received();
  const workerCpu = services.workers.reduce((sum, w) => sum + cpuMs(w.pid!), 0) - cpu0;
  // the last batches' records written too
  await finished;
  const { rows } = await sql<{ bytes: string }>`select pg_wal_lsn_diff(pg_current_wal_lsn(), ${wal0}::pg_lsn)::text as bytes`.execute(
    db.db,
  );
  await sleep(1000); // a push sent twice would arrive now
  const counted = await mocks.summary();
  const ranges = await db.db
    .selectFrom('fanout_ranges')
    .select(sql<string>`count(*)::text`.as('n'))
    .where('notification_id', '=', id)
    .executeTakeFirstOrThrow();
  await mocks.reset();
  step(`${workers} worker(s): broadcast to ${devices} devices done in ${((lastAtEpochMs - t0) / 1000).toFixed(1)} s`);

  const bare =
    (bareOnce ? rounds[0]?.bareRun : undefined) ??
    (await bareBroadcast(mocks, accessToken, { devices, payload: PAYLOAD, notificationId: id, tokens: 'registration' }));
  await mocks.reset();
  if (bare.ok !== devices) throw new Error(`bare client: only ${bare.ok} of ${devices} pushes accepted`);
  const seconds = (lastAtEpochMs - t0) / 1000;
  step(`${workers} worker(s): ${rate(devices, seconds * 1000)}/s, bare ${rate(bare.ok, bare.ms)}/s`);
  const round: Round = {
    workers,
    seconds,
    bare: bare.ok / (bare.ms / 1000),
    bareRun: bare,
    walBytes: Number(rows[0]!.bytes) / devices,
    workerCpuUs: (workerCpu * 1000) / devices,
    firstMs: firstAtEpochMs - t0,
    lastMs: lastAtEpochMs - t0,
    ranges: Number(ranges.n),
    missed: devices - counted.distinct,
    twice: counted.twice,
  };
  return { round, id };
}

/** The table: a row per worker count. */
function printBroadcasts(rounds: Round[]): void {
  console.log(
    `\nscale benchmark: one app of ${devices} devices (half iOS, half Android, filled as registered), one broadcast to all ` +
      `per worker count; 1 API process + N worker processes (compiled, production node flags), Redis queue, ` +
      `FANOUT_RANGE_DEVICES ${rangeDevices || 'default'}; mock gateways in a process of their own on loopback TLS HTTP/2, ` +
      `counting pushes per token; bare client: 1 connection x 1,000 streams per gateway, the same ${devices} tokens` +
      `${bareOnce ? ', run once after the first broadcast' : ''}; ` +
      `WAL: the PostgreSQL server's, from the POST to the notification sent; service log lines in ${LOG_FILE}\n`,
  );
  printRows(
    [
      'workers',
      'pushes/s',
      'bare pushes/s',
      'ratio to bare',
      'WAL bytes/push',
      'worker CPU µs/push',
      'POST -> first push',
      'POST -> last push',
      'ranges',
      'missed / twice',
    ],
    rounds.map((r) => [
      String(r.workers),
      (devices / r.seconds).toFixed(0),
      r.bare.toFixed(0),
      (devices / r.seconds / r.bare).toFixed(2),
      r.walBytes.toFixed(0),
      r.workerCpuUs.toFixed(1),
      `${r.firstMs.toFixed(0)} ms`,
      `${(r.lastMs / 1000).toFixed(1)} s`,
      String(r.ranges),
      `${r.missed} / ${r.twice}`,
    ]),
  );
}

/**
 * `ageDays` simulated days on a moved clock: each day the workers' partition maintenance with that day's `now`,
 * then the day's traffic by SQL, then each time-partitioned table's size.
 */
async function age(stack: Stack, notificationId: string) {
  const { db } = stack;
  const retention = retentionOf(
    loadConfig({
      DATABASE_URL: stack.database.url,
      RETENTION_RECEIPTS_DAYS: retentionDays,
      RETENTION_ACTIVE_DEVICES_DAYS: retentionDays,
      RETENTION_SESSIONS_DAYS: retentionDays,
      RETENTION_ACTIVITY_DAYS: retentionDays,
      MESSAGE_RETENTION_DAYS: retentionDays,
    }),
  );
  const tables = Object.keys(DAY_PARTITIONED) as DayPartitionedTable[];
  const partitions = new PartitionsRepository();
  const log = createLogger('warn');
  const today = Date.parse(`${new Date().toISOString().slice(0, 10)}T00:00:00Z`);
  const sizes = async () => {
    const { rows } = await sql<{ table: string; bytes: string }>`
      select t.name as table, coalesce(sum(pg_total_relation_size(p.relid)), 0)::text as bytes
      from unnest(${tables}::text[]) as t(name), pg_partition_tree(t.name::regclass) p
      group by t.name`.execute(db.db);
    return new Map(rows.map((r) => [r.table, Number(r.bytes)]));
  };
  const kept = async () => (await Promise.all(tables.map((t) => partitions.list(db.db, t)))).reduce((n, list) => n + list.length, 0);
  const lines: string[][] = [];
  let dropped = 0;
  step(`aging: ${ageDays} days on a moved clock, every table kept ${retentionDays} days, ${ageAudience} devices a day's broadcast`);
  for (let day = 1; day <= ageDays; day++) {
    const now = new Date(today + day * DAY_MS + 3_600_000);
    const m0 = performance.now();
    const results = await maintainPartitions({ db: db.db, repos: { ...createRepositories(), partitions }, log }, retention, now);
    const maintainMs = performance.now() - m0;
    dropped += tables.reduce((n, t) => n + results[t].dropped.length, 0);
    const t0 = performance.now();
    const rows = await dayTraffic(stack, notificationId, now);
    const trafficMs = performance.now() - t0;
    const size = await sizes();
    const mb = (bytes: number) => (bytes / 1048576).toFixed(1);
    lines.push([
      String(day),
      now.toISOString().slice(0, 10),
      String(rows),
      `${(trafficMs / 1000).toFixed(1)} s`,
      ...tables.map((t) => mb(size.get(t) ?? 0)),
      mb([...size.values()].reduce((a, b) => a + b, 0)),
      String(await kept()),
      String(dropped),
      `${maintainMs.toFixed(0)} ms`,
    ]);
    step(`day ${day}: ${lines.at(-1)!.slice(2).join(', ')}`);
  }
  console.log(
    `\naging: ${ageDays} simulated days, each table kept ${retentionDays} days; the maintenance the workers' sweep runs ` +
      `(maintainPartitions) called with the moved clock's now (the service has no clock setting); each day's traffic by ` +
      `SQL: a broadcast's receipts (${ageAudience} devices), unicast receipts (1 %), sessions (20 %, counting their devices ` +
      `active), opens (5 %), conversions (1 %) of as many; device_messages is measured, not fed (a message's rows need ` +
      `a message); sizes in MB, all of a table's partitions with indexes\n`,
  );
  printRows(['day', 'date', 'rows added', 'took', ...tables, 'total MB', 'partitions', 'dropped so far', 'maintenance'], lines);
}

/** One simulated day's traffic written by SQL, at `now`'s hour on: answers the rows added. */
async function dayTraffic(stack: Stack, notificationId: string, now: Date): Promise<number> {
  const { db, app } = stack;
  const at = now.toISOString();
  const day = at.slice(0, 10);
  const counts = await Promise.all([
    // a broadcast's receipts: a notification of its own a day (the receipts keep no reference to it)
    sql`
      insert into device_pushes (device_id, notification_id, received_at)
      select id, ${randomUUID()}::uuid, ${at}::timestamptz + random() * interval '1 hour'
      from devices where app_id = ${app.id}::uuid limit ${ageAudience}`.execute(db.db),
    sql`
      insert into device_pushes (device_id, notification_id, received_at)
      select id, gen_random_uuid(), ${at}::timestamptz + random() * interval '20 hours'
      from devices tablesample bernoulli (${ofAudience(1)}) where app_id = ${app.id}::uuid`.execute(db.db),
  ]);
  // sessions, opens and conversions update the same daily counters: one after the other
  for (const q of [
    sql`
      insert into app_sessions (device_id, id, app_id, started_at, duration_seconds)
      select id, gen_random_uuid(), app_id, ${at}::timestamptz + random() * interval '20 hours', 60
      from devices tablesample bernoulli (${ofAudience(20)}) where app_id = ${app.id}::uuid`,
    // opens and conversions of the broadcast measured above (their rows reference a notification)
    sql`
      insert into push_opens (notification_id, kind, device_id, app_id, opened_at)
      select ${notificationId}::uuid, 'direct', id, app_id, ${at}::timestamptz + random() * interval '20 hours'
      from devices tablesample bernoulli (${ofAudience(5)}) where app_id = ${app.id}::uuid`,
    sql`
      insert into notification_conversions (notification_id, source, name, device_id, day, count)
      select ${notificationId}::uuid, '', 'purchase', id, ${day}::date, 1
      from devices tablesample bernoulli (${ofAudience(1)}) where app_id = ${app.id}::uuid`,
  ])
    counts.push(await q.execute(db.db));
  return counts.reduce((n, r) => n + Number(r.numAffectedRows ?? 0), 0);
}

const rate = (count: number, ms: number) => ((count * 1000) / ms).toFixed(0);
const began = performance.now();
/** A line on the way, so a long run shows where it is. */
const step = (what: string) => console.log(`[${((performance.now() - began) / 1000).toFixed(1)} s] ${what}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

main().then(
  (status) => process.exit(status),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
