import type { ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.js';
import { migrate } from '../../src/db/migrate.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { TEST_SECRETS_KEY, testKeyring } from '../../test/engines/secrets-key.js';
import { ApnsMock, FcmMock, generateApnsKey, generateServiceAccount } from '../../test/mocks/index.js';
import type { GatewayEndpoints } from './mock-gateways.js';
import { benchDatabase, freePort, PRODUCTION_NODE_ARGS, runBenchChild, startService, waitReady } from './setup.js';

export const BENCH_BUNDLE = 'com.example.bench';

/** A benchmark's world: a fresh migrated database, an app whose APNs and FCM credentials point at mock gateways. */
export interface BenchStack {
  database: { url: string; close(): Promise<void> };
  db: DatabaseHandle;
  app: { id: string };
  /** the app's identity secret: a phone's user id is registered with its hash (identity verification is on) */
  identitySecret: string;
  keys: { read: string; write: string; sdk: string };
  apns: ApnsMock;
  fcm: FcmMock;
  apnsKey: ReturnType<typeof generateApnsKey>;
  serviceAccount: ReturnType<typeof generateServiceAccount>;
  /** The environment that points a service process at this database and these mocks. */
  env: Record<string, string>;
  close(): Promise<void>;
}

export async function benchStack(name: string, opts: { queue: string; redisUrl: string; record?: boolean }): Promise<BenchStack> {
  const apnsKey = generateApnsKey();
  const serviceAccount = generateServiceAccount();
  const apns = await ApnsMock.start({ record: opts.record ?? false, topic: BENCH_BUNDLE });
  const fcm = await FcmMock.start({ record: opts.record ?? false });
  apns.addKey(apnsKey);
  fcm.addServiceAccount(serviceAccount);
  const gateways = {
    apnsOrigin: apns.origin,
    fcmOrigin: fcm.origin,
    fcmTokenUrl: fcm.tokenUrl,
    apnsCredentials: apnsKey.credentials,
    serviceAccount: serviceAccount.json,
  };
  const world = await benchApp(name, { ...opts, gateways });
  return {
    ...world,
    apns,
    fcm,
    apnsKey,
    serviceAccount,
    env: { ...world.env, ...LAB_ENV },
    async close() {
      await Promise.all([apns.close(), fcm.close()]);
      await world.close();
    },
  };
}

/**
 * What the lab's service runs with beside production's settings: the benchmarks measure throughput, not the rate limits;
 * they read /metrics with the token.
 */
export const LAB_ENV = {
  RATE_LIMIT_PER_SECOND: '0',
  RATE_LIMIT_SDK_PER_SECOND: '0',
  LOG_LEVEL: 'warn',
  METRICS_TOKEN: 'bench-metrics-token-0123',
};

/** A fresh migrated database and an app whose APNs and FCM credentials are those `gateways` accept. */
export async function benchApp(
  name: string,
  opts: { queue: string; redisUrl: string; gateways: GatewayEndpoints },
): Promise<Omit<BenchStack, 'apns' | 'fcm' | 'apnsKey' | 'serviceAccount'>> {
  const database = await benchDatabase(name);
  const db = openDatabase(database.url);
  await migrate(db.pool);
  const { app, keys, identitySecret } = await addApp(db, opts.gateways);
  const env = {
    DATABASE_URL: database.url,
    SECRETS_KEY: TEST_SECRETS_KEY,
    APNS_ORIGIN_PRODUCTION: opts.gateways.apnsOrigin,
    APNS_ORIGIN_SANDBOX: opts.gateways.apnsOrigin,
    FCM_ORIGIN: opts.gateways.fcmOrigin,
    GOOGLE_TOKEN_URL: opts.gateways.fcmTokenUrl,
    QUEUE_PREFIX: `bench${Date.now()}`,
    REDIS_URL: opts.queue === 'redis' ? opts.redisUrl : '',
  };
  return {
    database,
    db,
    app,
    identitySecret,
    keys,
    env,
    async close() {
      await db.close();
      await database.close();
    },
  };
}

/** An app in a benchmark's database, its APNs and FCM credentials those `gateways` accept. */
export async function addApp(db: DatabaseHandle, gateways: GatewayEndpoints, bundleId = BENCH_BUNDLE) {
  const apps = new AppService({ db: db.db, secrets: testKeyring(), repos: createRepositories() });
  const { app, keys, identity_secret: identitySecret } = await apps.createApp(bundleId);
  await apps.setPushCredentials(app.id, 'apns', gateways.apnsCredentials);
  await apps.setPushCredentials(app.id, 'fcm', gateways.serviceAccount);
  return { app, keys, identitySecret };
}

/** The service processes of a benchmark, and how to stop them. Any of them exiting early ends the benchmark. */
export interface Services {
  base: string;
  api: ChildProcess;
  /** every API process (`apis` of them, on ports of their own) and its base URL; the first is `api` at `base` */
  apis: ChildProcess[];
  bases: string[];
  /** The processes that run delivery workers (the API process too when they run as one). */
  workers: ChildProcess[];
  /** SIGKILLs worker `i`, as a lost machine does, and starts another in its place (in `workers`). */
  killWorker(i: number): void;
  stop(): Promise<void>;
}

/**
 * `split`: `apis` ROLE=api processes (1) plus `workers` ROLE=worker processes, as a scaled deployment runs;
 * `single`: one ROLE=all process, as `npm start` runs. WORKER_NODE_ARGS adds node flags to the worker processes
 * (--cpu-prof, heap limits); `apiEnv` adds settings to the API processes alone.
 */
export async function startServices(
  env: Record<string, string>,
  opts: { mode: 'split' | 'single'; workers?: number; apis?: number; logFile?: string; apiEnv?: Record<string, string> },
): Promise<Services> {
  // the processes' log lines appended to a file, as a log collector takes them, instead of on this terminal
  const stdout = opts.logFile ? openSync(opts.logFile, 'a') : 'inherit';
  const ports = await Promise.all(Array.from({ length: opts.mode === 'single' ? 1 : (opts.apis ?? 1) }, freePort));
  // node options added to production's (say --cpu-prof): the workers', and the API's when it runs apart
  const withArgs = (extra: string | undefined) => [...PRODUCTION_NODE_ARGS, ...(extra ?? '').split(' ').filter(Boolean)];
  const workerArgs = withArgs(process.env.WORKER_NODE_ARGS);
  const apiArgs = withArgs(process.env.API_NODE_ARGS);
  const apis = ports.map((port) =>
    startService(
      { ...env, ...opts.apiEnv, PORT: String(port), HOST: '127.0.0.1', ROLE: opts.mode === 'single' ? 'all' : 'api' },
      opts.mode === 'single' ? workerArgs : apiArgs,
      stdout,
    ),
  );
  const startWorker = () => watch(startService({ ...env, ROLE: 'worker' }, workerArgs, stdout));
  let stopping = false;
  const killed = new Set<ChildProcess>();
  function watch(child: ChildProcess) {
    child.on('exit', (code) => {
      if (stopping || killed.has(child)) return;
      console.error(`a service process exited early (code ${code}); see its output above`);
      process.exit(1);
    });
    return child;
  }
  apis.forEach(watch);
  const workers = opts.mode === 'single' ? [apis[0]!] : Array.from({ length: opts.workers ?? 1 }, startWorker);
  const all = () => [...new Set([...apis, ...workers])];
  // however the benchmark ends (an error included), it must not leave the service processes running
  const killAll = () => {
    for (const child of all()) if (child.exitCode === null) child.kill('SIGKILL');
  };
  process.on('exit', killAll);
  const bases = ports.map((port) => `http://127.0.0.1:${port}`);
  for (const base of bases) await waitReady(`${base}/ready`);
  return {
    base: bases[0]!,
    api: apis[0]!,
    apis,
    bases,
    workers,
    killWorker(i) {
      killed.add(workers[i]!);
      workers[i]!.kill('SIGKILL');
      workers[i] = startWorker();
    },
    async stop() {
      stopping = true;
      // a graceful stop (it writes what --cpu-prof collected); whatever still runs after 10 s is killed
      const running = all().filter((child) => child.exitCode === null && child.signalCode === null);
      const stopped = running.map((child) => new Promise((resolve) => child.once('exit', resolve)));
      for (const child of running) child.kill('SIGTERM');
      await Promise.race([Promise.all(stopped), new Promise((resolve) => setTimeout(resolve, 10_000))]);
      killAll();
      process.off('exit', killAll);
      if (typeof stdout === 'number') closeSync(stdout);
    },
  };
}

/**
 * Waits until a notification is sent (or failed). The pushes have all arrived while its last batches are still
 * being recorded: a round that waits for this before the next starts does not overlap it.
 */
export async function waitFinished(base: string, authorization: string, id: string): Promise<void> {
  for (;;) {
    const r = await fetch(`${base}/v6/notifications/${id}`, { headers: { authorization } });
    const body = (await r.json()) as { state?: string };
    if (body.state === 'sent' || body.state === 'failed') return;
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** POST /v6/notifications of `payload` to `to` with the app's write key; throws unless it is created. */
export function notificationPoster(base: string, writeKey: string, payload: Record<string, unknown>) {
  const auth = `Basic ${Buffer.from(`:${writeKey}`).toString('base64')}`;
  const post = async (to: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}/v6/notifications`, {
      method: 'POST',
      headers: { authorization: auth, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ notification: { to, payload } }),
    });
    if (res.status !== 201) throw new Error(`POST failed: ${res.status} ${await res.text()}`);
    return (await res.json()) as { id: string };
  };
  return { auth, post };
}

/**
 * Warms the worker's gateway connection and credentials, as a long-running worker's are: one-device sends to five of
 * the stack's devices through the queue (a create with an Idempotency-Key is not sent by the API itself), each
 * awaited at the mock.
 */
export async function warmWorker(
  stack: Pick<BenchStack, 'db'>,
  post: ReturnType<typeof notificationPoster>['post'],
  mock: { onAccept: ((token: string) => void) | undefined },
): Promise<void> {
  const sample = await stack.db.db.selectFrom('devices').select('id').orderBy('id').limit(5).execute();
  for (const [i, { id }] of sample.entries()) {
    const arrived = new Promise<void>((resolve) => (mock.onAccept = () => resolve()));
    await post([{ name: 'device_id', criteria: [id] }], { 'idempotency-key': `warm-worker-${i}` });
    await arrived;
  }
  mock.onAccept = undefined;
}

/** What the bare client sends: `devices` pushes of `payload`; personal alerts as the templates benchmark renders them. */
export interface BareSpec {
  devices: number;
  payload: Record<string, unknown>;
  tokens?: 'registration';
  personal?: { names: number };
  connections?: number;
}

/** The endpoints and credentials of a stack's mock gateways, as a client of its own reaches them. */
export function gatewaysOf({ apns, fcm, apnsKey, serviceAccount }: BenchStack): GatewayEndpoints {
  return {
    apnsOrigin: apns.origin,
    fcmOrigin: fcm.origin,
    fcmTokenUrl: fcm.tokenUrl,
    apnsCredentials: apnsKey.credentials,
    serviceAccount: serviceAccount.json,
  };
}

/**
 * The ceiling: bench/lib/bare-client.ts sending `devices` pushes of `payload` (for notification `notificationId`) to
 * the mock gateways, `connections` (1) x 1,000 streams per gateway, in a process of its own (BARE_NODE_ARGS: its node
 * flags); `tokens: 'registration'` sends to registration(i)'s tokens. Answers its time, pushes answered 200 and CPU.
 */
export function bareBroadcast(
  gateways: GatewayEndpoints,
  fcmAccessToken: string,
  spec: BareSpec & { notificationId: string },
): Promise<{ ms: number; ok: number; cpuMs: number }> {
  return runBenchChild(
    'bench/lib/bare-client.ts',
    {
      ...spec,
      apnsOrigin: gateways.apnsOrigin,
      fcmOrigin: gateways.fcmOrigin,
      topic: BENCH_BUNDLE,
      apnsKey: gateways.apnsCredentials,
      fcmProject: gateways.serviceAccount.project_id,
      fcmAccessToken,
      connections: spec.connections ?? 1,
      streamsPerConnection: 1000,
    },
    'BARE_NODE_ARGS',
  );
}
