/**
 * The database's failover under load, as teams run PostgreSQL: two Patroni members (etcd, synchronous_mode) behind
 * HAProxy (test/engines/patroni.ts), one API and one worker process pointed at HAProxy's read-write and read-only
 * ports. A broadcast per fault plus one-device notifications at a steady rate from outside clients (each retried
 * after a 503's Retry-After with its Idempotency-Key, as a careful client does); a `patronictl switchover`, then a
 * SIGKILL of the new primary's Patroni and postmaster (a lost machine). Prints per fault: seconds without a
 * primary, 503s, other 5xx, requests without an answer, notifications answered 201 never delivered, pushes sent
 * twice, and the time until the unicast p99 is back under 100 ms. Exits 1 when a 5xx other than 503 was answered, a
 * request went unanswered, an accepted notification or a broadcast's device was never delivered, or a process
 * crashed.
 *
 * The mock gateways run in a process of their own: in the clients' event loop, 500 requests a second and their
 * retries slowed the mocks' answers past the service's 10 s push timeout, and the mocks' work slowed the clients.
 * Before all that, with nothing failing and no broadcast, the ceiling: 50 clients posting one-device notifications
 * as fast as they are answered for --ceiling-seconds (0: none), so a --rate the machine cannot carry shows as such.
 *
 *   npm run bench -- failover [--devices 100000] [--rate 500] [--after 20] [--ceiling-seconds 20] [--samples file.json]
 *   (--samples: every request attempt, the faults and the outages, as JSON, for a closer look)
 */
import { writeFile } from 'node:fs/promises';
import { sql } from 'kysely';
import pg from 'pg';
import type { DatabaseHandle } from '../src/db/database.js';
import { startPatroniCluster, type PatroniCluster } from '../test/engines/patroni.js';
import { startPrivateRedis } from './lib/private-services.js';
import { arg, percentile, printRows } from './lib/setup.js';
import { mocksInProcess } from './lib/mock-gateways.js';
import { addApp, BENCH_BUNDLE, benchApp, LAB_ENV, startServices } from './lib/stack.js';
import { faultSettings } from './lib/fault-settings.js';
import {
  CLIENT_PATIENCE_MS,
  cpuShare,
  measureCeiling,
  postBroadcast,
  poster,
  sleep,
  summary,
  UnicastLoad,
  type Attempt,
  type Post,
} from './lib/failover-load.js';

const devices = Number(arg('devices', '100000'));
const rate = Number(arg('rate', '500'));
const afterSeconds = Number(arg('after', '20'));
const samplesFile = arg('samples', '');
const ceilingSeconds = Number(arg('ceiling-seconds', '20'));
const CEILING_CLIENTS = 50;
/** the one-device notifications' load runs this long at most before the faults (each target gets one) */
const LOAD_SECONDS = 300;
const P99_TARGET_MS = 100;

/** Each outage of the read-write port: from the first probe that found no primary to the next that found one. */
function probePrimary(url: string): { outages: { from: number; to: number | null }[]; stop(): void } {
  const outages: { from: number; to: number | null }[] = [];
  let running = true;
  void (async () => {
    while (running) {
      const at = performance.now();
      // a primary too busy to answer within 3 s is still a primary: HAProxy refuses at once while there is none
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000, query_timeout: 3000 });
      client.on('error', () => undefined);
      const primary = await client
        .connect()
        .then(() => client.query<{ primary: boolean }>('select not pg_is_in_recovery() as primary'))
        .then((r) => r.rows[0]?.primary === true)
        .catch(() => false);
      await client.end().catch(() => undefined);
      const open = outages.at(-1);
      if (!primary && (!open || open.to !== null)) outages.push({ from: at, to: null });
      if (primary && open && open.to === null) open.to = at;
      await sleep(Math.max(0, 100 - (performance.now() - at)));
    }
  })();
  return { outages, stop: () => (running = false) };
}

async function seed(stack: { db: DatabaseHandle }, appId: string, count: number, platform: 'mixed' | 'android', prefix: string) {
  await sql`
    insert into devices (app_id, platform, token)
    select ${appId}::uuid, case when ${platform} = 'mixed' and i % 2 = 0 then 'ios' else 'android' end,
      encode(sha256(convert_to(${prefix} || i::text, 'UTF8')), 'hex')
    from generate_series(1, ${count}::int) as i`.execute(stack.db.db);
  return stack.db.db.selectFrom('devices').select(['id', 'token']).where('app_id', '=', appId).orderBy('token').execute();
}

/** The Patroni pair behind HAProxy and a private Redis, stopped however the benchmark ends. */
async function startEngines() {
  const t0 = performance.now();
  const cluster = await startPatroniCluster();
  const redis = await startPrivateRedis();
  process.on('exit', () => {
    redis.kill();
    cluster.killNow();
  });
  // a stop from outside (a test's timeout) still runs the 'exit' handlers, so no engine outlives the benchmark
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => process.exit(1));
  console.log(`failover benchmark: Patroni cluster up in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  process.env.DATABASE_URL = cluster.primaryUrl;
  return { cluster, redis };
}

/**
 * The mock gateways in a process of their own (the clients' load does not slow their answers, nor they the clients);
 * a broadcast app per fault (so each device's pushes are those of one broadcast), one for the unicasts, one for the
 * ceiling; their devices.
 */
async function setUpApps(redisUrl: string) {
  const mocks = await mocksInProcess([BENCH_BUNDLE, 'com.example.bench.second']);
  const stack = await benchApp('failover', { queue: 'redis', redisUrl, gateways: mocks });
  const second = await addApp(stack.db, mocks, 'com.example.bench.second');
  const unicast = await addApp(stack.db, mocks, 'com.example.bench.unicast');
  const ceilingApp = await addApp(stack.db, mocks, 'com.example.bench.ceiling');
  const broadcasts = [
    { fault: 'switchover', key: stack.keys.write },
    { fault: 'kill', key: second.keys.write },
  ];
  const fillStart = performance.now();
  const audience = [await seed(stack, stack.app.id, devices, 'mixed', 'a'), await seed(stack, second.app.id, devices, 'mixed', 'b')];
  const targets = await seed(stack, unicast.app.id, Math.ceil(rate * (LOAD_SECONDS + afterSeconds)), 'android', 'u');
  const ceilingTargets = ceilingSeconds > 0 ? await seed(stack, ceilingApp.app.id, 3000 * ceilingSeconds, 'android', 'c') : [];
  const filled = 2 * devices + targets.length + ceilingTargets.length;
  console.log(`${filled} devices inserted (one SQL statement a set) in ${((performance.now() - fillStart) / 1000).toFixed(1)} s`);
  return { mocks, stack, unicastKey: unicast.keys.write, ceilingKey: ceilingApp.keys.write, broadcasts, audience, targets, ceilingTargets };
}
type Apps = Awaited<ReturnType<typeof setUpApps>>;

/** One API and one worker process, reading through HAProxy's read-only port, with the faults' settings. */
function startFailoverServices(cluster: PatroniCluster, stack: Apps['stack']) {
  const settings = faultSettings(devices);
  const env = {
    ...stack.env,
    ...LAB_ENV,
    DATABASE_READ_URL: cluster.through(stack.database.url, 'ro'),
    ...Object.fromEntries(Object.entries(settings).map(([k, v]) => [k, String(v)])),
  };
  return startServices(env, { mode: 'split', workers: 1 });
}

interface FaultWindow {
  fault: string;
  at: number;
  until: number;
  notification: string;
}

/**
 * Per broadcast, once the cluster is healthy: the broadcast, then its fault once a fifth of its devices were reached
 * (the broadcast is in flight). A fault's figures are those of the requests from it until the next broadcast is posted.
 */
async function runFaults(cluster: PatroniCluster, apps: Apps, post: Post, attempts: Attempt[]): Promise<FaultWindow[]> {
  const faults: FaultWindow[] = [];
  for (const [i, b] of apps.broadcasts.entries()) {
    await sleep(3000);
    await cluster.untilHealthy(180_000);
    if (i > 0) faults[i - 1]!.until = performance.now();
    const id = await postBroadcast(post, attempts, b.key, b.fault);
    const reachedBefore = (await apps.mocks.received()).count;
    while ((await apps.mocks.received()).count - reachedBefore < devices / 5) await sleep(50);
    const at = performance.now();
    if (b.fault === 'switchover') {
      const { from, to } = await cluster.switchover();
      console.log(`switchover ${from} -> ${to} done in ${((performance.now() - at) / 1000).toFixed(1)} s`);
    } else {
      const leader = (await cluster.leader())!;
      await cluster.kill(leader);
      const next = await waitForLeader(cluster, leader);
      console.log(`killed ${leader}; ${next} leads after ${((performance.now() - at) / 1000).toFixed(1)} s`);
    }
    faults.push({ fault: b.fault, at, until: Infinity, notification: id });
  }
  return faults;
}

async function main() {
  const { cluster, redis } = await startEngines();
  const apps = await setUpApps(redis.url);
  const { mocks, stack } = apps;
  const services = await startFailoverServices(cluster, stack);
  const post = poster(services.base);
  // the ceiling: as many clients as the outside sequence's, each posting its next as soon as answered
  const ceiling =
    ceilingSeconds > 0
      ? await measureCeiling(post, apps.ceilingKey, apps.ceilingTargets, { seconds: ceilingSeconds, clients: CEILING_CLIENTS })
      : { attempts: [], accepted: [] };
  const loadCpuBefore = process.cpuUsage();
  const loadWallBefore = performance.now();
  const load = new UnicastLoad({ post, key: apps.unicastKey, targets: apps.targets, rate });
  load.start();
  const probe = probePrimary(cluster.primaryUrl);
  const faults = await runFaults(cluster, apps, post, load.attempts);
  await sleep(afterSeconds * 1000);
  const loadCpu = process.cpuUsage(loadCpuBefore);
  const loadWall = (performance.now() - loadWallBefore) / 1000;
  const ranOut = load.ranOut;
  await load.stop();
  probe.stop();

  // what was accepted is delivered within moments of the primary's return; then nothing more arrives
  const deadline = performance.now() + 120_000;
  const acceptedTokens = [...load.accepted, ...ceiling.accepted];
  const audienceTokens = apps.audience.map((devicesOf) => devicesOf.map((d) => d.token!));
  const undelivered = async () => (await mocks.tally([...acceptedTokens, ...audienceTokens.flat()])).missed;
  while ((await undelivered()) > 0 && performance.now() < deadline) await sleep(1000);
  await sleep(2000);
  await services.stop();

  const broadcastTallies = await Promise.all(audienceTokens.map((tokens) => mocks.tally(tokens)));
  const rows = faults.map((f, i) => faultRow(f, load.attempts, probe.outages, broadcastTallies[i]!));
  if (samplesFile) await writeFile(samplesFile, JSON.stringify({ attempts: load.attempts, faults, outages: probe.outages }));
  const lost = (await mocks.tally(acceptedTokens)).missed;
  const unicastTwice = (await mocks.tally([...apps.ceilingTargets, ...apps.targets].map((d) => d.token!))).twice;
  const clientsCpu = `the whole load (${loadWall.toFixed(0)} s): ${cpuShare((loadCpu.user + loadCpu.system) / 1e6, loadWall)}`;
  report({ load, faults, rows, clientsCpu, ranOut, ceilingAccepted: ceiling.accepted.length, lost, unicastTwice });
  const failures = failuresOf(rows, lost, load.gaveUp.length);
  for (const f of failures) console.error(`FAIL ${f}`);
  await stack.close();
  await mocks.close();
  await redis.stop();
  await cluster.stop();
  process.exit(failures.length ? 1 : 0);
}

type FaultRow = ReturnType<typeof faultRow>;

/** A fault's figures: those of the attempts and outages in its window, and its broadcast's tally. */
function faultRow(
  f: FaultWindow,
  attempts: Attempt[],
  outages: { from: number; to: number | null }[],
  tally: { missed: number; twice: number },
) {
  const inWindow = (at: number) => at >= f.at && at < f.until;
  const mine = attempts.filter((a) => inWindow(a.at));
  const outage = outages.filter((o) => inWindow(o.from)).reduce((s, o) => s + ((o.to ?? performance.now()) - o.from), 0);
  return {
    fault: f.fault,
    noPrimary: outage / 1000,
    s503: mine.filter((a) => a.status === 503).length,
    other5xx: mine.filter((a) => a.status >= 500 && a.status !== 503).length,
    unanswered: mine.filter((a) => a.status === 0).length,
    // reduce, not a spread: a fault's window holds more attempts than a call takes arguments
    slowest: mine.reduce((most, a) => Math.max(most, a.ms), 0),
    p99Back: p99BackAfter(mine, f.at),
    missedBroadcast: tally.missed,
    twiceBroadcast: tally.twice,
  };
}

/** The load before the faults, the totals, and a row per fault. */
function report(r: {
  load: UnicastLoad;
  faults: FaultWindow[];
  rows: FaultRow[];
  /** the clients' own CPU over the load, and whether its targets ran out */
  clientsCpu: string;
  ranOut: boolean;
  ceilingAccepted: number;
  lost: number;
  unicastTwice: number;
}) {
  const { attempts } = r.load;
  const other4xx = attempts.filter((a) => a.status >= 400 && a.status < 500).length;
  const firstFault = r.faults[0]?.at ?? 0;
  const loadStart = attempts.length ? Math.min(...attempts.slice(0, 1000).map((a) => a.at)) : 0;
  const beforeFaults = attempts.filter((a) => a.at < firstFault);
  const beforeSeconds = (firstFault - loadStart) / 1000;
  console.log(
    `before the faults (${rate}/s offered, the first broadcast posted after 3 s, ${beforeSeconds.toFixed(1)} s): ${summary(beforeFaults, beforeSeconds)}`,
  );
  console.log(r.clientsCpu);
  if (r.ranOut) console.log(`the ${r.load.sent} one-device targets ran out before the end: the load stopped early`);
  console.log(
    `\n${devices} devices per broadcast; ${r.load.sent} one-device notifications at ${rate}/s (${r.load.accepted.length} answered 201, ` +
      `${r.load.gaveUp.length} given up by their client, ${other4xx} answered 4xx; ${r.ceilingAccepted} more in the ceiling); ` +
      `${r.lost} answered 201 and never delivered; ` +
      `${r.unicastTwice} one-device targets pushed more than once\n`,
  );
  printRows(
    [
      'fault',
      's without a primary',
      '503s',
      'other 5xx',
      'no answer',
      'slowest answer',
      'unicast p99 < 100 ms after',
      'broadcast missed',
      'broadcast sent twice',
    ],
    r.rows.map((row) => [
      row.fault,
      row.noPrimary.toFixed(1),
      String(row.s503),
      String(row.other5xx),
      String(row.unanswered),
      `${(row.slowest / 1000).toFixed(2)} s`,
      row.p99Back === null ? 'never' : `${row.p99Back.toFixed(0)} s`,
      String(row.missedBroadcast),
      String(row.twiceBroadcast),
    ]),
  );
}

function failuresOf(rows: FaultRow[], lost: number, gaveUp: number): string[] {
  return [
    ...rows.flatMap((r) => [
      ...(r.other5xx ? [`${r.fault}: ${r.other5xx} 5xx other than 503`] : []),
      ...(r.unanswered ? [`${r.fault}: ${r.unanswered} requests without an answer`] : []),
      ...(r.missedBroadcast ? [`${r.fault}: ${r.missedBroadcast} devices of its broadcast never reached`] : []),
    ]),
    ...(lost ? [`${lost} notifications answered 201 and never delivered`] : []),
    ...(gaveUp ? [`${gaveUp} notifications still refused after ${CLIENT_PATIENCE_MS / 1000} s of retries`] : []),
  ];
}

async function waitForLeader(cluster: PatroniCluster, not: string): Promise<string> {
  const deadline = performance.now() + 120_000;
  while (performance.now() < deadline) {
    const leader = await cluster.leader();
    if (leader && leader !== not) return leader;
    await sleep(100);
  }
  throw new Error(`no member took over from ${not} within 120 s`);
}

/**
 * Seconds from the fault until the unicast answers are fast again: the end of the last one-second window (of the
 * attempts made from the fault on) whose p99 is at or above the target; null when the last window is still slow.
 */
function p99BackAfter(attempts: Attempt[], faultAt: number): number | null {
  const windows = new Map<number, number[]>();
  for (const a of attempts) {
    const w = Math.floor((a.at - faultAt) / 1000);
    windows.set(w, [...(windows.get(w) ?? []), a.status === 201 ? a.ms : Infinity]);
  }
  const slow = [...windows]
    .sort(([a], [b]) => a - b)
    .map(([w, ms]) => ({
      w,
      p99: percentile(
        ms.sort((x, y) => x - y),
        99,
      ),
    }))
    .filter((x) => x.p99 >= P99_TARGET_MS);
  const lastWindow = Math.max(...windows.keys());
  if (!slow.length) return 0;
  return slow.at(-1)!.w === lastWindow ? null : slow.at(-1)!.w + 1;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
