/**
 * Huawei Push Kit broadcast benchmark: POST /v6/notifications to every Huawei device of an app, to the last token
 * accepted by the mock HMS (OAuth + messages:send) on loopback, against a bare node:http2 multicast client sending the
 * same requests (1,000 tokens each, the same bearer token) to the same mock in the same run (the machine's ceiling).
 *
 *   npm run bench -- hms [--devices 100000] [--rounds 3] [--queue redis|postgres] [--gateway-latency-ms 0]
 *                        [--bare-connections 1] [--bare-in-flight <the worker's bound>]
 *
 * The bare client keeps as many requests in flight as the worker can give the gateway at most (DELIVERY_CONCURRENCY
 * batches of DELIVERY_BATCH_SIZE devices, 1,000 tokens a request) on one connection (the mock allows 1,000 streams,
 * so the gateway opens no second one); each round prints what the pipeline kept in flight and open, to compare.
 * Every device must get exactly one push a round, counted per token at the mock: the benchmark exits 1 when one is
 * missed or pushed twice.
 */
import { sql } from 'kysely';
import { requestAccessToken } from '../src/gateways/google-oauth.js';
import { HMS_MAX_TOKENS_PER_REQUEST } from '../src/gateways/hms.js';
import { loadConfig } from '../src/platform/config.js';
import { AppService } from '../src/services/apps.js';
import { createRepositories } from '../src/services/deps.js';
import { testKeyring } from '../test/engines/secrets-key.js';
import { HmsMock } from '../test/mocks/index.js';
import { arg, cpuMs, median, parentPid, printTable, runBenchChild, serverCpuMs } from './lib/setup.js';
import { benchStack, type BenchStack, notificationPoster, type Services, startServices, waitFinished, warmWorker } from './lib/stack.js';
import { hmsTokenOf } from './lib/hms-tokens.js';

const devices = Number(arg('devices', '100000'));
const rounds = Number(arg('rounds', '3'));
const queue = arg('queue', process.env.REDIS_URL ? 'redis' : 'postgres');
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const latencyMs = Number(arg('gateway-latency-ms', '0'));
const bareConnections = Number(arg('bare-connections', '1'));
const PAYLOAD = { alert: 'bench', title: 'pushd' };
const HMS_APP_ID = '10000001';
const HMS_SECRET = 'bench-client-secret';

interface RoundResult {
  pipeline: number;
  databaseUs: number;
  mockUs: number;
  bare: number;
  firstMs: number;
  recordedMs: number;
  workerUs: number;
  bareUs: number;
  missed: number;
  twice: number;
}

/** The app's HMS credentials and its Huawei devices; returns the devices' tokens (device i has hmsTokenOf(i)). */
async function seed(stack: BenchStack): Promise<string[]> {
  const { db, app } = stack;
  await new AppService({ db: db.db, secrets: testKeyring(), repos: createRepositories() }).setHms(app.id, {
    hmsAppId: HMS_APP_ID,
    clientSecret: HMS_SECRET,
  });
  const t = Date.now();
  // device i has hmsTokenOf(i): the token the bare client sends it
  const tokens = Array.from({ length: devices }, (_, i) => hmsTokenOf(i));
  await sql`
    insert into devices (app_id, platform, token)
    select ${app.id}::uuid, 'huawei', t.token
    from unnest(${tokens}::text[]) as t(token)`.execute(db.db);
  await sql`analyze devices`.execute(db.db);
  console.log(`seeded ${devices} Huawei devices in ${Date.now() - t} ms`);
  return tokens;
}

/** Pushes per token at the mock since the last reset: the pipeline's and the bare client's rounds are counted alike. */
class Received {
  readonly counts = new Map<string, number>();
  firstAt = 0;
  private onAll: (() => void) | undefined;

  constructor(
    hms: HmsMock,
    private readonly tokens: string[],
  ) {
    hms.onAccept = (token) => {
      if (this.counts.size === 0) this.firstAt = performance.now();
      this.counts.set(token, (this.counts.get(token) ?? 0) + 1);
      if (this.counts.size === devices) this.onAll?.();
    };
  }

  /** Resolves with the time every device has had a push since now. */
  all(): Promise<number> {
    return new Promise<number>((resolve) => (this.onAll = () => resolve(performance.now())));
  }

  tally() {
    let twice = 0;
    for (const n of this.counts.values()) if (n > 1) twice += 1;
    return { missed: this.tokens.filter((token) => !this.counts.has(token)).length, twice };
  }
}

interface Bench {
  stack: BenchStack;
  hms: HmsMock;
  services: Services;
  poster: ReturnType<typeof notificationPoster>;
  received: Received;
  /** PostgreSQL's server process, whose CPU (its children's included) is measured per round */
  postmaster: number;
  /** the bare client's access token */
  accessToken: string;
  bareInFlight: number;
}

/** The pipeline to every device (a new notification each round): its times and the CPU it took. */
async function pipelineBroadcast({ stack, hms, services, poster, received, postmaster }: Bench) {
  const { workers } = services;
  received.counts.clear();
  hms.resetStats();
  const all = received.all();
  const workerCpu0 = workers.reduce((sum, w) => sum + cpuMs(w.pid!), 0);
  const [databaseCpu0, mockCpu0] = [serverCpuMs(postmaster), cpuMs(process.pid)];
  const t0 = performance.now();
  const { id } = await poster.post('*');
  // a device missed never completes `all`: the round then ends when the notification is sent
  const sent = waitFinished(services.base, poster.auth, id).then(() => performance.now());
  const tEnd = await Promise.race([all, sent]);
  const workerCpu = workers.reduce((sum, w) => sum + cpuMs(w.pid!), 0) - workerCpu0;
  const [databaseCpu, mockCpu] = [serverCpuMs(postmaster) - databaseCpu0, cpuMs(process.pid) - mockCpu0];
  await sent;
  // the receipts and outcomes are recorded after the last push: the notification is finished once they are
  const times = await stack.db.db
    .selectFrom('notifications')
    .select(sql<number>`extract(epoch from finished_at - created_at) * 1000`.as('ms'))
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return { id, t0, tEnd, workerCpu, databaseCpu, mockCpu, recordedMs: Number(times.ms) };
}

/** The ceiling: the same pushes from the bare client (the stored payload, as the worker maps it). */
async function bareMulticast({ stack, hms, received, accessToken, bareInFlight }: Bench, id: string) {
  received.counts.clear();
  hms.resetStats();
  const stored = await stack.db.db.selectFrom('notifications').select('payload').where('id', '=', id).executeTakeFirstOrThrow();
  return runBenchChild<{ ms: number; ok: number; cpuMs: number }>(
    'bench/lib/bare-hms.ts',
    {
      devices,
      origin: hms.origin,
      hmsAppId: HMS_APP_ID,
      accessToken,
      payload: stored.payload,
      notificationId: id,
      connections: bareConnections,
      inFlight: bareInFlight,
    },
    'BARE_NODE_ARGS',
  );
}

/** One round: the pipeline, then the bare client, to every device; prints its line. */
async function runRound(bench: Bench, round: number): Promise<RoundResult> {
  const { hms, received, bareInFlight } = bench;
  const p = await pipelineBroadcast(bench);
  const pipelineTally = received.tally();
  const firstMs = received.firstAt - p.t0;
  const pipelineShape = `${hms.openSessions} connection(s), ${hms.peakConcurrency} requests in flight at most`;

  const bare = await bareMulticast(bench, p.id);
  const bareTally = received.tally();
  const r: RoundResult = {
    pipeline: devices / ((p.tEnd - p.t0) / 1000),
    bare: devices / (bare.ms / 1000),
    firstMs,
    recordedMs: p.recordedMs,
    workerUs: (p.workerCpu * 1000) / devices,
    databaseUs: (p.databaseCpu * 1000) / devices,
    mockUs: (p.mockCpu * 1000) / devices,
    bareUs: (bare.cpuMs * 1000) / devices,
    missed: pipelineTally.missed + bareTally.missed,
    twice: pipelineTally.twice + bareTally.twice,
  };
  console.log(
    `round ${round + 1}: pipeline ${r.pipeline.toFixed(0)}/s (${pipelineShape}, first push ${firstMs.toFixed(0)} ms, last ${(p.tEnd - p.t0).toFixed(0)} ms, ` +
      `all recorded ${p.recordedMs.toFixed(0)} ms), bare ${r.bare.toFixed(0)}/s ` +
      `(${bareConnections} connection(s), ${bareInFlight} in flight), ratio ${(r.pipeline / r.bare).toFixed(2)}; ` +
      `CPU per push: worker ${r.workerUs.toFixed(1)} µs, PostgreSQL ${r.databaseUs.toFixed(1)} µs, mock and benchmark ${r.mockUs.toFixed(1)} µs, ` +
      `bare client ${r.bareUs.toFixed(1)} µs; ` +
      `pipeline missed ${pipelineTally.missed}, twice ${pipelineTally.twice}; bare missed ${bareTally.missed}, twice ${bareTally.twice}`,
  );
  return r;
}

/** The medians over the rounds. */
function printSummary(results: RoundResult[], bareInFlight: number): void {
  const ratios = results.map((r) => r.pipeline / r.bare);
  const med = (pick: (r: RoundResult) => number) => median(results.map(pick));
  const sum = (pick: (r: RoundResult) => number) => results.reduce((s, r) => s + pick(r), 0);

  console.log(
    `\nHMS benchmark: one broadcast to ${devices} Huawei devices, queue backend ${queue}, mock HMS on loopback TLS HTTP/2 ` +
      `answering ${latencyMs} ms late, 1,000 tokens a request, bare client ${bareConnections} connection(s) x ${bareInFlight} requests ` +
      `in flight, median of ${rounds} rounds; the mock counts every push per token\n`,
  );
  printTable([
    ['pipeline pushes/s (POST -> last token accepted)', med((r) => r.pipeline).toFixed(0)],
    ['pipeline: POST -> first push (full audience)', `${med((r) => r.firstMs).toFixed(0)} ms`],
    ["pipeline: created -> finished, every push recorded (the row's times)", `${med((r) => r.recordedMs).toFixed(0)} ms`],
    ['bare node:http2 multicast pushes/s (ceiling)', med((r) => r.bare).toFixed(0)],
    ['ratio pipeline / bare (per round)', ratios.map((x) => x.toFixed(2)).join(' ')],
    ['ratio pipeline / bare (median)', median(ratios).toFixed(2)],
    ['worker CPU per push, all threads (median)', `${med((r) => r.workerUs).toFixed(1)} µs`],
    ['PostgreSQL CPU per push, its server processes (median)', `${med((r) => r.databaseUs).toFixed(1)} µs`],
    ['mock HMS and benchmark CPU per push, pipeline rounds (median)', `${med((r) => r.mockUs).toFixed(1)} µs`],
    ['bare client CPU per push, all threads (median)', `${med((r) => r.bareUs).toFixed(1)} µs`],
    ['devices missed / pushed twice (all rounds, both senders)', `${sum((r) => r.missed)} / ${sum((r) => r.twice)}`],
  ]);
}

async function main() {
  const hms = await HmsMock.start({ record: false });
  hms.addApp(HMS_APP_ID, HMS_SECRET);
  if (latencyMs > 0) hms.faults.sometimes(1, { type: 'delay', ms: latencyMs });
  const stack = await benchStack('bench_hms', { queue, redisUrl });
  const tokens = await seed(stack);

  const env = { ...stack.env, HMS_ORIGIN: hms.origin, HMS_TOKEN_URL: hms.tokenUrl };
  const config = loadConfig({ ...process.env, ...env });
  const requestsPerBatch = Math.ceil(config.DELIVERY_BATCH_SIZE / HMS_MAX_TOKENS_PER_REQUEST);
  const bareInFlight = Number(arg('bare-in-flight', String(config.DELIVERY_CONCURRENCY * requestsPerBatch)));
  const services = await startServices(env, { mode: 'split', workers: 1 });
  const poster = notificationPoster(services.base, stack.keys.write, PAYLOAD);

  // the worker's connection and access token warm; each round then counts its own pushes
  await warmWorker(stack, poster.post, hms);
  // the bare client's access token, fetched before it starts as the worker's was
  const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: HMS_APP_ID, client_secret: HMS_SECRET });
  const { access_token: accessToken } = await requestAccessToken(hms.tokenUrl, form);

  // PostgreSQL's CPU (its server's processes) and this process's (the mock HMS's, mostly) are measured per round too
  const postmaster = parentPid((await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(stack.db.db)).rows[0]!.pid);
  const received = new Received(hms, tokens);
  const bench: Bench = { stack, hms, services, poster, received, postmaster, accessToken, bareInFlight };
  const results: RoundResult[] = [];
  for (let round = 0; round < rounds; round++) results.push(await runRound(bench, round));
  hms.onAccept = undefined;
  printSummary(results, bareInFlight);

  await services.stop();
  await stack.close();
  await hms.close();
  process.exit(results.some((r) => r.missed > 0 || r.twice > 0) ? 1 : 0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
