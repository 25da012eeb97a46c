/**
 * Faults at scale: one broadcast to every seeded device per scenario, through the production processes (API and
 * worker as separate processes, Redis queue) to the mock gateways, while something breaks:
 *   kill          the worker SIGKILLed at 5 random moments, restarted each time
 *   redis         Redis restarted mid-send (no persistence: the queued jobs are lost)
 *   postgres      PostgreSQL restarted mid-send (sessions terminated)
 *   gateways      10 % of requests answered 503/429 with Retry-After, plus random GOAWAYs and reset streams
 *   unregistered  1 % of the tokens unregistered (APNs 410 Unregistered, FCM 404 UNREGISTERED)
 * The mocks count accepted pushes per token. Exits 1 when a device was missed, the invalid tokens dropped differ
 * from those seeded, a push was sent twice more often than the batches in flight allow, or a process crashed.
 *
 *   npm run bench -- faults [--devices 100000] [--scenarios kill,redis,postgres,gateways,unregistered] [--timeout 600]
 *   (FAULTS_LOG_LEVEL=warn shows the service processes' warnings: retries, sweeps, reconnections)
 *
 * Redis and PostgreSQL are private to the benchmark (free ports, PostgreSQL under .bench-data/faults): they are
 * restarted, and the machine's shared ones must not be.
 */
import { type ChildProcess } from 'node:child_process';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../src/db/schema.js';
import { NotificationsRepository } from '../src/db/repositories/notifications.js';
import type { ApnsMock, Fault, FcmMock } from '../test/mocks/index.js';
import { startPrivatePostgres, startPrivateRedis, type RestartableService } from './lib/private-services.js';
import { arg, freePort, startService, waitReady } from './lib/setup.js';
import { benchStack, type BenchStack } from './lib/stack.js';
import { duplicateBound, faultSettings } from './lib/fault-settings.js';

const devices = Number(arg('devices', '100000'));
const timeoutMs = Number(arg('timeout', '600')) * 1000;
const SCENARIOS = ['kill', 'redis', 'postgres', 'gateways', 'unregistered'] as const;
type Scenario = (typeof SCENARIOS)[number];
const chosen = arg('scenarios', SCENARIOS.join(',')).split(',') as Scenario[];
const KILLS = 5;
const UNREGISTERED_SHARE = 0.01;

const SETTINGS = faultSettings(devices);

interface Row {
  scenario: Scenario;
  injected: string;
  missed: number;
  twice: number;
  bound: number;
  dropped: number;
  seeded: number;
  ms: number | null;
  crashes: number;
}

/** A service process restarted whenever it exits; exits the benchmark did not cause are counted as crashes. */
class Supervised {
  crashes = 0;
  private child!: ChildProcess;
  private killing = false;
  private stopping = false;

  constructor(
    private readonly name: string,
    private readonly env: Record<string, string>,
  ) {
    this.spawn();
  }

  private spawn() {
    const child = startService(this.env);
    this.child = child;
    child.on('exit', (code, signal) => {
      if (this.stopping) return;
      if (!this.killing) {
        this.crashes += 1;
        console.error(`${this.name} exited by itself (code ${code}, signal ${signal}); restarting it`);
      }
      this.killing = false;
      setTimeout(() => this.spawn(), this.crashes ? 500 : 0);
    });
  }

  /** SIGKILL, as the OOM killer or a lost machine would; it is started again at once. */
  kill() {
    this.killing = true;
    this.child.kill('SIGKILL');
  }

  async stop() {
    this.stopping = true;
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  }

  killNow() {
    this.stopping = true;
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}

/** Pushes accepted by the mocks, per token. */
class PushCounter {
  readonly perToken = new Map<string, number>();
  constructor(mocks: (ApnsMock | FcmMock)[]) {
    for (const mock of mocks) mock.onAccept = (token) => this.perToken.set(token, (this.perToken.get(token) ?? 0) + 1);
  }
  /** Devices reached at least once. */
  get reached(): number {
    return this.perToken.size;
  }
  /** Resolves once `count` devices were reached, or never when `done` comes first. */
  async reach(count: number, done: () => boolean): Promise<boolean> {
    while (this.reached < count) {
      if (done()) return false;
      await sleep(10);
    }
    return true;
  }
}

async function main() {
  const redis = await startPrivateRedis();
  const postgres = await startPrivatePostgres('.bench-data/faults');
  // each scenario's database is made on this server (benchStack makes it where DATABASE_URL points)
  process.env.DATABASE_URL = postgres.url;
  const processes: Supervised[] = [];
  process.on('exit', () => {
    for (const p of processes) p.killNow();
    redis.kill();
    postgres.kill();
  });
  console.log(
    `faults benchmark: ${devices} devices per scenario (half iOS, half Android), Redis queue, private Redis ${redis.url} and ` +
      `PostgreSQL ${postgres.url}; ${Object.entries(SETTINGS)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
  );

  const rows: Row[] = [];
  for (const scenario of chosen) {
    if (!SCENARIOS.includes(scenario)) throw new Error(`unknown scenario ${scenario}; one of ${SCENARIOS.join(', ')}`);
    rows.push(await runScenario(scenario, { redis, postgres, processes }));
  }

  console.log(
    `\n${devices} devices per scenario. Bound of "sent twice": process faults x the pushes a worker has in flight ` +
      `(2 x DELIVERY_CONCURRENCY x DELIVERY_BATCH_SIZE = ${2 * SETTINGS.DELIVERY_CONCURRENCY * SETTINGS.DELIVERY_BATCH_SIZE}: sending, and sent not yet recorded) ` +
      `+ GOAWAYs x the streams in flight (GATEWAY_MAX_IN_FLIGHT = ${SETTINGS.GATEWAY_MAX_IN_FLIGHT})\n`,
  );
  printRows(rows);
  const failures = rows.flatMap((r) => [
    ...(r.missed > 0 ? [`${r.scenario}: ${r.missed} devices missed`] : []),
    ...(r.dropped !== r.seeded ? [`${r.scenario}: ${r.dropped} invalid tokens dropped, ${r.seeded} seeded`] : []),
    ...(r.twice > r.bound ? [`${r.scenario}: ${r.twice} pushes sent twice, more than the bound ${r.bound}`] : []),
    ...(r.crashes > 0 ? [`${r.scenario}: ${r.crashes} service process crashes`] : []),
    ...(r.ms === null ? [`${r.scenario}: the notification did not finish within ${timeoutMs / 1000} s`] : []),
  ]);
  for (const f of failures) console.error(`FAIL ${f}`);

  await redis.stop();
  await postgres.stop();
  process.exit(failures.length ? 1 : 0);
}

async function runScenario(
  scenario: Scenario,
  env: { redis: RestartableService; postgres: RestartableService; processes: Supervised[] },
): Promise<Row> {
  const stack = await benchStack(`faults_${scenario}`, { queue: 'redis', redisUrl: env.redis.url });
  const db = stack.db.db;
  const counter = new PushCounter([stack.apns, stack.fcm]);
  const seeded = await seed(stack, scenario);
  const { api, worker, base } = await startProcesses(stack, env.processes);

  const t0 = performance.now();
  const id = await postBroadcast(base, stack.keys.write, scenario);
  let over = false;
  const finished = untilFinished(db, id, t0 + timeoutMs);
  const fault: FaultRun = { scenario, counter, worker, env, valid: seeded.tokens.length - seeded.invalid.size, done: () => over };
  const [finishedAt, injected] = await Promise.all([finished.then((at) => ((over = true), at)), inject(fault)]);
  const { faulted, invalid, tokens } = seeded;
  if (scenario === 'gateways')
    injected.text = `${faulted.refused} answered 503/429 (Retry-After 1), ${faulted.goaway} GOAWAYs, ${faulted.reset} streams reset`;
  if (scenario === 'unregistered') injected.text = `${invalid.size} tokens unregistered`;

  // Stopped before counting, so a push still in flight (a duplicate run) is counted too.
  await Promise.all([api.stop(), worker.stop()]);
  const { missed, twice } = countPushes(counter, tokens, invalid);
  const dropped = await droppedTokens(db, stack.app.id);
  // its counters are its batches' sums, as the API reads them
  const notifications = new NotificationsRepository();
  const [n] = await notifications.withCounters(db, [(await notifications.findById(db, id))!]);
  await stack.close();
  const ms = finishedAt === null ? null : finishedAt - t0;
  const row: Row = {
    scenario,
    injected: injected.text || '-',
    missed,
    twice,
    bound: duplicateBound(SETTINGS, injected.processFaults, faulted.goaway),
    dropped,
    seeded: invalid.size,
    ms,
    crashes: api.crashes + worker.crashes,
  };
  console.log(
    `${scenario}: ${row.injected}; notification ${n!.state}, ${n!.pushes_succeeded} pushes recorded as succeeded, ` +
      `${n!.tokens_invalidated} tokens invalidated; ${counter.reached} devices reached` +
      (ms === null ? '; did not finish' : ` in ${(ms / 1000).toFixed(1)} s`),
  );
  return row;
}

/**
 * The scenario's devices; for `unregistered` a share of their tokens marked unregistered at the mocks, for `gateways`
 * the mocks' refusals, GOAWAYs and resets (counted as they happen).
 */
async function seed(stack: BenchStack, scenario: Scenario) {
  const { db, apns, fcm } = stack;
  const appId = stack.app.id;
  await sql`
    insert into devices (app_id, platform, token)
    select ${appId}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex')
    from generate_series(1, ${devices}) as i`.execute(db.db);
  const tokens = await db.db.selectFrom('devices').select(['token', 'platform']).where('app_id', '=', appId).execute();
  const invalid = new Set<string>();
  if (scenario === 'unregistered') {
    for (const { token, platform } of shuffled(tokens).slice(0, Math.round(tokens.length * UNREGISTERED_SHARE))) {
      invalid.add(token!);
      if (platform === 'ios') apns.markUnregistered(token!);
      else fcm.markUnregistered(token!);
    }
  }
  const faulted = { refused: 0, goaway: 0, reset: 0 };
  if (scenario === 'gateways') {
    for (const [mock, refusals] of [
      [apns, APNS_REFUSALS],
      [fcm, FCM_REFUSALS],
    ] as const) {
      mock.faults
        .sometimes(0.1, () => (faulted.refused++, pick(refusals)))
        .sometimes(0.001, () => (faulted.goaway++, { type: 'goaway' }))
        .sometimes(0.003, () => (faulted.reset++, { type: 'reset' }));
    }
  }
  return { tokens, invalid, faulted };
}

/**
 * An API and a worker process, each restarted whenever it exits, with the benchmark's settings; added to `processes`
 * (killed however the benchmark ends) before they are waited for.
 */
async function startProcesses(stack: BenchStack, processes: Supervised[]) {
  const port = await freePort();
  const common = {
    ...stack.env,
    LOG_LEVEL: process.env.FAULTS_LOG_LEVEL ?? 'error',
    ...Object.fromEntries(Object.entries(SETTINGS).map(([k, v]) => [k, String(v)])),
  };
  const api = new Supervised('api', { ...common, ROLE: 'api', PORT: String(port), HOST: '127.0.0.1' });
  const worker = new Supervised('worker', { ...common, ROLE: 'worker' });
  processes.push(api, worker);
  const base = `http://127.0.0.1:${port}`;
  await waitReady(`${base}/ready`);
  return { api, worker, base };
}

/** A notification to every device; answers its id. */
async function postBroadcast(base: string, writeKey: string, scenario: Scenario): Promise<string> {
  const res = await fetch(`${base}/v6/notifications`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`:${writeKey}`).toString('base64')}`, 'content-type': 'application/json' },
    body: JSON.stringify({ notification: { to: '*', payload: { alert: `faults: ${scenario}` } } }),
  });
  if (res.status !== 201) throw new Error(`POST failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { id: string }).id;
}

/** When the notification was sent or failed (performance.now()); null when the deadline came first. */
async function untilFinished(db: Kysely<Database>, id: string, deadline: number): Promise<number | null> {
  while (performance.now() < deadline) {
    // the database may be restarting: a failed poll is just retried
    const n = await db
      .selectFrom('notifications')
      .select('state')
      .where('id', '=', id)
      .executeTakeFirst()
      .catch(() => undefined);
    if (n?.state === 'sent' || n?.state === 'failed') return performance.now();
    await sleep(100);
  }
  return null;
}

/** What a scenario's faults act on. */
interface FaultRun {
  scenario: Scenario;
  counter: PushCounter;
  worker: Supervised;
  env: { redis: RestartableService; postgres: RestartableService };
  /** devices with a valid token */
  valid: number;
  /** the notification has finished */
  done: () => boolean;
}

/** The scenario's faults of processes (kill, redis, postgres), each at a random moment; what was done and how many. */
async function inject(run: FaultRun): Promise<{ text: string; processFaults: number }> {
  const { scenario, counter, valid, done } = run;
  // a random moment: when a random share (10-90 %) of the devices has been reached
  const moment = () => Math.floor(valid * (0.1 + Math.random() * 0.8));
  const reachedPct = () => `${Math.round((100 * counter.reached) / valid)}%`;
  if (scenario === 'kill') {
    const moments = Array.from({ length: KILLS }, moment).sort((a, b) => a - b);
    const at: string[] = [];
    for (const m of moments) {
      // each kill after the restarted worker has sent something, so no two kills hit the same worker
      const since = counter.reached;
      if (!(await counter.reach(Math.max(m, since + 1), done))) break;
      run.worker.kill();
      at.push(reachedPct());
    }
    return { text: `${at.length} SIGKILLs (at ${at.join(', ')} reached)`, processFaults: at.length };
  }
  if (scenario === 'redis' || scenario === 'postgres') {
    if (!(await counter.reach(moment(), done))) return { text: '', processFaults: 0 };
    const pct = reachedPct();
    const t = performance.now();
    await (scenario === 'redis' ? run.env.redis : run.env.postgres).restart(1000);
    return { text: `restarted at ${pct} reached, down ${((performance.now() - t) / 1000).toFixed(1)} s`, processFaults: 1 };
  }
  // gateways: injected by the mocks all along; unregistered: seeded
  return { text: '', processFaults: 0 };
}

/** Devices with a valid token never reached, and pushes beyond the first; none may have reached an unregistered token. */
function countPushes(counter: PushCounter, tokens: { token: string | null }[], invalid: Set<string>) {
  let missed = 0;
  let twice = 0;
  let invalidAccepted = 0;
  for (const { token } of tokens) {
    const n = counter.perToken.get(token!) ?? 0;
    if (invalid.has(token!)) invalidAccepted += n;
    else if (n === 0) missed += 1;
    else twice += n - 1;
  }
  if (invalidAccepted) throw new Error(`the mocks accepted ${invalidAccepted} pushes to unregistered tokens`);
  return { missed, twice };
}

async function droppedTokens(db: Kysely<Database>, appId: string): Promise<number> {
  const { count } = await db
    .selectFrom('devices')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('app_id', '=', appId)
    .where('token_invalidated_at', 'is not', null)
    .executeTakeFirstOrThrow();
  return Number(count);
}

const APNS_REFUSALS: Fault[] = [
  { type: 'status', status: 503, reason: 'ServiceUnavailable', retryAfter: 1 },
  { type: 'status', status: 429, reason: 'TooManyRequests', retryAfter: 1 },
];
const FCM_REFUSALS: Fault[] = [
  { type: 'status', status: 503, reason: 'UNAVAILABLE', retryAfter: 1 },
  { type: 'status', status: 429, reason: 'QUOTA_EXCEEDED', retryAfter: 1 },
];

function printRows(rows: Row[]): void {
  const table = [
    ['scenario', 'faults injected', 'devices missed', 'sent twice (bound)', 'invalid tokens dropped (seeded)', 'time to finish', 'crashes'],
    ...rows.map((r) => [
      r.scenario,
      r.injected,
      String(r.missed),
      `${r.twice} (${r.bound})`,
      `${r.dropped} (${r.seeded})`,
      r.ms === null ? 'did not finish' : `${(r.ms / 1000).toFixed(1)} s`,
      String(r.crashes),
    ]),
  ];
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  console.log(line(table[0]!));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const row of table.slice(1)) console.log(line(row));
}

function shuffled<T>(items: T[]): T[] {
  const a = [...items];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

const pick = <T>(items: T[]): T => items[Math.floor(Math.random() * items.length)]!;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
