/**
 * Fan-out benchmark: the whole pipeline from POST /v6/notifications to the last push received by the mock
 * gateways on loopback, against a bare node:http2 client sending the same pushes to the same mocks (the
 * machine's ceiling). Also time to first push for a one-device audience and the worker's peak RSS.
 *
 *   npm run bench -- fanout [--devices 200000] [--rounds 3] [--queue postgres|redis] [--workers 1] [--gateway-latency-ms 0]
 *                           [--bare-connections 1] [--languages 0] [--database bench_fanout] [--cap 3/day]
 *                           [--warmup-rounds 0]
 *
 * --gateway-latency-ms N: the mocks answer every push N ms late, as a gateway in a far data centre does. The bare
 * client then keeps the window a real gateway allows (1,000 streams a connection) on --bare-connections
 * connections per gateway; each round prints how many the pipeline kept open, to compare.
 * --languages N: the broadcast carries content in N languages (`localized`), and the devices are spread over those
 * N languages and English (the payload as it is); the bare client sends the English payload to all.
 * --cap CAPS: the app has these frequency caps (`set-limits --cap`'s form) during the broadcasts, set after the
 * warm-up, so every push of a round takes a slot (the cap check's whole cost); --rounds may not exceed the smallest N.
 * --warmup-rounds N: N broadcasts to every device before the measured rounds, not counted (no bare client): the
 * worker's broadcast code then runs compiled from the first measured round, as in a worker that has sent broadcasts
 * before; without it the first round also measures the process's JIT warm-up (40–60 % more CPU a push).
 * Every device must get exactly one push a round: the benchmark exits 1 when one is missed or pushed twice.
 */
import { sql } from 'kysely';
import { parseFcmServiceAccount } from '../src/domain/credentials.js';
import { ServiceAccountTokenCredential } from '../src/gateways/google-oauth.js';
import { arg, cpuMs, median, peakRssMb, percentile, printTable } from './lib/setup.js';
import {
  bareBroadcast,
  type BareSpec,
  benchStack,
  type BenchStack,
  gatewaysOf,
  type Services,
  startServices,
  waitFinished,
} from './lib/stack.js';
import { parseFrequencyCaps } from '../src/domain/frequency-caps.js';
import { AppService } from '../src/services/apps.js';
import { createRepositories } from '../src/services/deps.js';
import { testKeyring } from '../test/engines/secrets-key.js';

const devices = Number(arg('devices', '200000'));
const rounds = Number(arg('rounds', '3'));
const queue = arg('queue', process.env.REDIS_URL ? 'redis' : 'postgres');
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PAYLOAD = { alert: 'bench', badge: 1 };
const latencyMs = Number(arg('gateway-latency-ms', '0'));
const bareConnections = Number(arg('bare-connections', '1'));
const LANGUAGES = ['fr', 'de', 'es', 'it', 'pt', 'nl', 'sv', 'pl', 'ja', 'ko', 'tr', 'ru', 'ar', 'he', 'hi', 'th', 'vi', 'id', 'ms', 'da'];
const languages = LANGUAGES.slice(0, Number(arg('languages', '0')));
const LOCALIZED = languages.length ? Object.fromEntries(languages.map((l) => [l, { alert: `bench ${l}` }])) : undefined;
/** each device's locale: one of the languages, or English (device i has the (i mod (N + 1))th) */
const LOCALES = [...languages.map((l) => `${l}_${l.toUpperCase()}`), 'en_US'];
const warmupRounds = Number(arg('warmup-rounds', '0'));
const capText = arg('cap', '');
const caps = capText ? parseFrequencyCaps(capText) : null;
if (capText && !caps) throw new Error(`--cap ${capText}: must be N/minute, N/hour or N/day, comma-separated`);
if (caps && rounds > Math.min(...caps.map((c) => c.limit))) throw new Error(`--rounds ${rounds}: more than --cap ${capText} admits`);

interface RoundResult {
  pipeline: number;
  bare: number;
  firstMs: number;
  /** POST to the first request at a mock: the pipeline's part of firstMs (the rest is the mock's delay and turn) */
  requestMs: number;
  workerUs: number;
  bareUs: number;
  missed: number;
  twice: number;
}

/** What the rounds share: the world, the services and the POST of the notification to `to`. */
interface Fanout {
  stack: BenchStack;
  services: Services;
  auth: string;
  post: (to: unknown, headers?: Record<string, string>) => Promise<Response>;
}

/** The devices, half iOS, each with one of LOCALES. */
async function seed({ db, app }: BenchStack): Promise<void> {
  const t = Date.now();
  await sql`
    insert into devices (app_id, platform, token, locale)
    select ${app.id}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex'),
      (${LOCALES}::text[])[1 + (i / 2) % ${LOCALES.length}::int]
    from generate_series(1, ${devices}) as i`.execute(db.db);
  await sql`analyze devices`.execute(db.db);
  console.log(`seeded ${devices} devices in ${Date.now() - t} ms`);
}

/**
 * (1) Time to first push, one-device audiences (warm: connections and JWT/OAuth tokens are reused), sorted; then
 * the worker warmed by the same sends through the queue, and the warm-up broadcasts.
 */
async function firstPushesAndWarmUp({ stack, services, auth, post }: Fanout): Promise<number[]> {
  const { db, apns, fcm } = stack;
  const sample = await db.db.selectFrom('devices').select('id').orderBy('id').limit(31).execute();
  const firstPush: number[] = [];
  /** Posts a notification to one device and waits for its push at the gateway. */
  const pushTo = async (deviceId: string, headers: Record<string, string> = {}) => {
    const arrived = new Promise<void>((resolve) => {
      apns.onAccept = fcm.onAccept = () => resolve();
    });
    await post([{ name: 'device_id', criteria: [deviceId] }], headers);
    await arrived;
    apns.onAccept = fcm.onAccept = undefined;
  };
  for (const [i, d] of sample.entries()) {
    const t0 = performance.now();
    await pushTo(d.id);
    if (i > 0) firstPush.push(performance.now() - t0); // the first one opens the gateway connections
  }
  firstPush.sort((a, b) => a - b);
  // Those were sent by the API process (it sends the small audiences it cuts): the worker's connections are warm
  // too before the broadcasts, as a long-running worker's are, by the same sends through the queue (a create with
  // an Idempotency-Key is not sent by the API itself). A worker cold when a broadcast starts gauges the round trip
  // on loaded samples and may open a second connection to a gateway.
  for (const [i, d] of sample.entries()) await pushTo(d.id, { 'idempotency-key': `warm-worker-${i}` });
  for (let i = 0; i < warmupRounds; i++) {
    const res = await post('*');
    if (res.status !== 201) throw new Error(`warm-up POST failed: ${res.status} ${await res.text()}`);
    await waitFinished(services.base, auth, ((await res.json()) as { id: string }).id);
  }
  return firstPush;
}

/** (2) The whole pipeline to every device (a new notification each round): its times, CPU and tally. */
async function pipelineBroadcast({ stack, services, auth, post }: Fanout) {
  const { apns, fcm } = stack;
  const { workers } = services;
  apns.resetStats();
  fcm.resetStats();
  let firstAt = 0;
  // pushes per token: the round ends when every device has one, and a device pushed twice is a bug
  const received = new Map<string, number>();
  const all = new Promise<number>((resolve) => {
    const seen = (token: string) => {
      if (received.size === 0) firstAt = performance.now();
      received.set(token, (received.get(token) ?? 0) + 1);
      if (received.size === devices) resolve(performance.now());
    };
    apns.onAccept = seen;
    fcm.onAccept = seen;
  });
  const workerCpu0 = workers.reduce((sum, w) => sum + cpuMs(w.pid!), 0);
  const t0 = performance.now();
  const res = await post('*');
  if (res.status !== 201) throw new Error(`POST failed: ${res.status} ${await res.text()}`);
  const { id } = (await res.json()) as { id: string };
  // a device missed never completes `all`: the round then ends when the notification is sent
  const sent = waitFinished(services.base, auth, id).then(() => performance.now());
  const tEnd = await Promise.race([all, sent]);
  const workerCpu = workers.reduce((sum, w) => sum + cpuMs(w.pid!), 0) - workerCpu0;
  await sent;
  apns.onAccept = fcm.onAccept = undefined;
  return {
    id,
    t0,
    tEnd,
    firstAt,
    workerCpu,
    connections: `${apns.openSessions} + ${fcm.openSessions}`,
    firstRequestAt: Math.min(...[apns.firstRequestAt, fcm.firstRequestAt].filter((at) => at > 0)),
    missed: devices - received.size,
    twice: [...received.values()].filter((n) => n > 1).length,
  };
}

/** One round: (2) the pipeline, then (3) the ceiling, a bare HTTP/2 client sending the same pushes; prints its line. */
async function runRound(fanout: Fanout, bareClient: { spec: BareSpec; fcmAccessToken: string }, round: number): Promise<RoundResult> {
  const { apns, fcm } = fanout.stack;
  const p = await pipelineBroadcast(fanout);

  // (3) the ceiling: a bare HTTP/2 client, same number of pushes to the same mocks
  apns.resetStats();
  fcm.resetStats();
  // the same requests, byte for byte; BARE_NODE_ARGS: node flags for it (--cpu-prof, to compare its profile with the worker's)
  const bare = await bareBroadcast(gatewaysOf(fanout.stack), bareClient.fcmAccessToken, { ...bareClient.spec, notificationId: p.id });
  if (bare.ok !== devices) throw new Error(`bare client: only ${bare.ok} of ${devices} pushes accepted`);
  const r: RoundResult = {
    pipeline: devices / ((p.tEnd - p.t0) / 1000),
    bare: bare.ok / (bare.ms / 1000),
    firstMs: p.firstAt - p.t0,
    requestMs: p.firstRequestAt - p.t0,
    workerUs: (p.workerCpu * 1000) / devices,
    bareUs: (bare.cpuMs * 1000) / devices,
    missed: p.missed,
    twice: p.twice,
  };
  console.log(
    `round ${round + 1}: pipeline ${r.pipeline.toFixed(0)}/s, bare ${r.bare.toFixed(0)}/s, ratio ${(r.pipeline / r.bare).toFixed(2)}; POST -> first push ${r.firstMs.toFixed(0)} ms (first request at the gateway ${r.requestMs.toFixed(0)} ms); connections APNs + FCM: pipeline ${p.connections}, bare ${bareConnections} + ${bareConnections}; CPU per push: worker ${r.workerUs.toFixed(0)} µs, bare client ${r.bareUs.toFixed(0)} µs; devices missed ${p.missed}, pushed twice ${p.twice}`,
  );
  return r;
}

/** The medians over the rounds, the one-device times to first push and the workers' peak RSS. */
function printSummary(results: RoundResult[], firstPush: number[], workerRss: string): void {
  const ratios = results.map((r) => r.pipeline / r.bare);
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

  console.log(
    `\nfan-out benchmark: ${devices} devices (half iOS, half Android) in ${languages.length + 1} language(s), queue backend ${queue}, mocks on loopback TLS HTTP/2 answering ${latencyMs} ms late, bare client ${bareConnections} connection(s) x 1,000 streams per gateway, frequency caps ${capText || 'none'}, median of ${rounds} rounds after ${warmupRounds} warm-up broadcast(s)\n`,
  );
  printTable([
    ['pipeline pushes/s (POST -> last push received)', median(results.map((r) => r.pipeline)).toFixed(0)],
    ['pipeline: POST -> first push (full audience), median', `${median(results.map((r) => r.firstMs)).toFixed(0)} ms`],
    ['pipeline: POST -> first push (per round)', results.map((r) => `${r.firstMs.toFixed(0)} ms`).join(' ')],
    ['pipeline: POST -> first request at the gateway (per round)', results.map((r) => `${r.requestMs.toFixed(1)} ms`).join(' ')],
    ['bare node:http2 pushes/s (ceiling)', median(results.map((r) => r.bare)).toFixed(0)],
    ['ratio pipeline / bare (per round)', ratios.map((x) => x.toFixed(2)).join(' ')],
    ['ratio pipeline / bare (median)', median(ratios).toFixed(2)],
    ['worker CPU per push, all threads (median)', `${median(results.map((r) => r.workerUs)).toFixed(0)} µs`],
    ['bare client CPU per push, all threads (median)', `${median(results.map((r) => r.bareUs)).toFixed(0)} µs`],
    ['time to first push, 1-device audience, p50', `${percentile(firstPush, 50).toFixed(1)} ms`],
    ['time to first push, 1-device audience, p95', `${percentile(firstPush, 95).toFixed(1)} ms`],
    ['worker peak RSS', `${workerRss} MB`],
    ['devices missed / pushed twice (all rounds)', `${sum(results.map((r) => r.missed))} / ${sum(results.map((r) => r.twice))}`],
  ]);
}

async function main() {
  // --database: a name of its own, for runs side by side on one PostgreSQL (the database is dropped and made anew)
  const stack = await benchStack(arg('database', 'bench_fanout'), { queue, redisUrl });
  const { db, apns, fcm, keys, app } = stack;
  const sa = stack.serviceAccount;
  await seed(stack);
  if (latencyMs > 0) for (const mock of [apns, fcm]) mock.faults.sometimes(1, { type: 'delay', ms: latencyMs });

  const services = await startServices(stack.env, { mode: 'split', workers: Number(arg('workers', '1')) });
  const auth = `Basic ${Buffer.from(`:${keys.write}`).toString('base64')}`;
  const post = (to: unknown, headers: Record<string, string> = {}) =>
    fetch(`${services.base}/v6/notifications`, {
      method: 'POST',
      headers: { authorization: auth, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ notification: { to, payload: PAYLOAD, localized: LOCALIZED } }),
    });
  const fanout: Fanout = { stack, services, auth, post };
  const firstPush = await firstPushesAndWarmUp(fanout);

  if (caps) {
    await new AppService({ db: db.db, secrets: testKeyring(), repos: createRepositories() }).setLimits(app.id, { frequencyCaps: caps });
    await new Promise((resolve) => setTimeout(resolve, 500)); // the processes' caches hear the change
  }

  const oauth = await new ServiceAccountTokenCredential(parseFcmServiceAccount(sa.json), { tokenUrl: fcm.tokenUrl }).getAccessToken();
  const bareClient = { spec: { devices, payload: PAYLOAD, connections: bareConnections }, fcmAccessToken: oauth.access_token };

  // (2) and (3), alternated for `rounds` rounds: this machine's speed drifts by tens of percent over a
  // minute, so each round compares the pipeline with the ceiling measured right after it.
  const results: RoundResult[] = [];
  for (let round = 0; round < rounds; round++) results.push(await runRound(fanout, bareClient, round));
  const workerRss = services.workers.map((w) => peakRssMb(w.pid!)).join(' + ');
  printSummary(results, firstPush, workerRss);

  await services.stop();
  await stack.close();
  process.exit(results.some((r) => r.missed > 0 || r.twice > 0) ? 1 : 0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
