/**
 * Web Push broadcast benchmark: POST /v6/notifications to every web device of an app, to the last push received by
 * a loopback TLS push service, against (a) a bare node:http2 sender doing the same encryption and VAPID to the same
 * mock with the window pushd keeps, and (b) the web-push package's sendNotification loop (one HTTPS request per
 * push, as the Parse Server adapter sends). Also the CPU a push spends on its encryption alone, and pushd's.
 *
 *   npm run bench -- web-push [--devices 20000] [--rounds 3] [--queue redis|postgres] [--concurrency 50]
 *                             [--bare-connections 2] [--verify-every 100]
 *
 * Every device must get exactly one push a round from each sender: the benchmark exits 1 when one is missed or
 * pushed twice, or when the mock refuses a push (a bad header, VAPID JWT or body).
 */
import { generateKeyPairSync } from 'node:crypto';
import { sql } from 'kysely';
import { toWebPushMessage } from '../src/domain/push-mapping.js';
import { encryptRecord } from '../src/gateways/web-push.js';
import { AppService } from '../src/services/apps.js';
import { createRepositories } from '../src/services/deps.js';
import { testKeyring } from '../test/engines/secrets-key.js';
import { arg, cpuMs, median, printTable, runBenchChild } from './lib/setup.js';
import { benchStack, type BenchStack, notificationPoster, type Services, startServices, waitFinished, warmWorker } from './lib/stack.js';
import { BenchWebPushMock, browserKeyPool } from './lib/web-push-mock.js';
import type { WebPushSenderSpec } from './lib/web-push-senders.js';

const devices = Number(arg('devices', '20000'));
const rounds = Number(arg('rounds', '3'));
const queue = arg('queue', process.env.REDIS_URL ? 'redis' : 'postgres');
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const concurrency = Number(arg('concurrency', '50'));
const bareConnections = Number(arg('bare-connections', '2'));
const verifyEvery = Number(arg('verify-every', '100'));
const PAYLOAD = { alert: 'bench', title: 'pushd' };
/** Browser key pairs shared across devices (device i has pair i % size): the mock only needs to decrypt. */
const KEY_POOL_SIZE = Math.min(1000, devices);
const ENCRYPT_SAMPLE = 10_000;
const SUBJECT = 'mailto:bench@example.com';

type Vapid = ReturnType<typeof vapidPair>;
type KeyPool = ReturnType<typeof browserKeyPool>;
interface RoundResult {
  pushd: number;
  bare: number;
  lib: number;
  firstMs: number;
  workerUs: number;
  bareUs: number;
  libUs: number;
}

/** The app's VAPID keys, and the web devices: device i's endpoint on the mock, its browser keys pair i % pool size. */
async function seed(stack: BenchStack, mock: BenchWebPushMock, pool: KeyPool, vapid: Vapid): Promise<void> {
  const { db, app } = stack;
  await new AppService({ db: db.db, secrets: testKeyring(), repos: createRepositories() }).setWebPush(app.id, {
    subject: SUBJECT,
    publicKey: vapid.publicKey,
    privateKey: vapid.privateKey,
  });
  const t = Date.now();
  await sql`
    insert into devices (app_id, platform, token, web_push_p256dh, web_push_auth)
    select ${app.id}::uuid, 'web', ${mock.origin} || '/push/' || i,
      (${pool.map((k) => k.p256dh)}::text[])[1 + i % ${KEY_POOL_SIZE}],
      (${pool.map((k) => k.auth)}::text[])[1 + i % ${KEY_POOL_SIZE}]
    from generate_series(1, ${devices}) as i`.execute(db.db);
  await sql`analyze devices`.execute(db.db);
  console.log(`seeded ${devices} web devices (${KEY_POOL_SIZE} browser key pairs) in ${Date.now() - t} ms`);
}

/** The bare sender or the web-push package's loop, in a process of its own, sending every device the same push. */
function runSender(mock: BenchWebPushMock, vapid: Vapid, name: WebPushSenderSpec['sender'], notificationId: string) {
  return runBenchChild<{ ms: number; ok: number; cpuMs: number }>(
    'bench/lib/web-push-senders.ts',
    {
      sender: name,
      devices,
      origin: mock.origin,
      keyPoolSize: KEY_POOL_SIZE,
      vapid: { subject: SUBJECT, ...vapid },
      payload: PAYLOAD,
      notificationId,
      connections: bareConnections,
      streamsPerConnection: 1000,
      concurrency,
    } satisfies WebPushSenderSpec,
    name === 'bare' ? 'BARE_NODE_ARGS' : 'WEB_PUSH_NODE_ARGS',
  );
}

/** What the mock saw, summed over every sender and round: every device once, nothing refused. */
class MockTally {
  missed = 0;
  twice = 0;
  verified = 0;
  refused = 0;
  refusedWhy: string[] = [];
  constructor(private readonly mock: BenchWebPushMock) {}

  /** What the mock saw since its reset, added to the sums; returns the round line's words for `who`. */
  check(who: string): string {
    const tally = this.mock.tally(devices);
    this.missed += tally.missed;
    this.twice += tally.twice;
    this.verified += this.mock.verified;
    this.refused += this.mock.refused;
    this.refusedWhy.push(...this.mock.refusedWhy);
    return `${who} missed ${tally.missed}, twice ${tally.twice}`;
  }
}

/** pushd: the whole pipeline to every device (a new notification each round); its rate, first push and worker CPU. */
async function pushdBroadcast(mock: BenchWebPushMock, services: Services, poster: ReturnType<typeof notificationPoster>) {
  const { base, workers } = services;
  mock.reset();
  let firstAt = 0;
  const all = new Promise<number>((resolve) => {
    mock.onAccept = () => {
      if (firstAt === 0) firstAt = performance.now();
      if (mock.counts.size === devices) resolve(performance.now());
    };
  });
  const workerCpu0 = workers.reduce((sum, w) => sum + cpuMs(w.pid!), 0);
  const t0 = performance.now();
  const { id } = await poster.post('*');
  // a device missed never completes `all`: the round then ends when the notification is sent
  const sent = waitFinished(base, poster.auth, id).then(() => performance.now());
  const tEnd = await Promise.race([all, sent]);
  const workerCpu = workers.reduce((sum, w) => sum + cpuMs(w.pid!), 0) - workerCpu0;
  await sent;
  mock.onAccept = undefined;
  return { id, t0, tEnd, firstAt, workerCpu };
}

/** One round: pushd, then the bare sender, then the web-push package, each to every device; prints its line. */
async function runRound(
  ctx: { mock: BenchWebPushMock; vapid: Vapid; services: Services; poster: ReturnType<typeof notificationPoster>; tally: MockTally },
  round: number,
): Promise<RoundResult> {
  const { mock, vapid, tally } = ctx;
  const { id, t0, tEnd, firstAt, workerCpu } = await pushdBroadcast(mock, ctx.services, ctx.poster);
  const connections = mock.openSessions;
  const pushdTally = tally.check('pushd');

  mock.reset();
  const bare = await runSender(mock, vapid, 'bare', id);
  const bareTally = tally.check('bare');
  mock.reset();
  const lib = await runSender(mock, vapid, 'web-push', id);
  const libTally = tally.check('web-push');
  const r: RoundResult = {
    pushd: devices / ((tEnd - t0) / 1000),
    bare: bare.ok / (bare.ms / 1000),
    lib: lib.ok / (lib.ms / 1000),
    firstMs: firstAt - t0,
    workerUs: (workerCpu * 1000) / devices,
    bareUs: (bare.cpuMs * 1000) / devices,
    libUs: (lib.cpuMs * 1000) / devices,
  };
  console.log(
    `round ${round + 1}: pushd ${r.pushd.toFixed(0)}/s (${connections} connections), bare ${r.bare.toFixed(0)}/s, web-push package ${r.lib.toFixed(0)}/s; ` +
      `ratio pushd/bare ${(r.pushd / r.bare).toFixed(2)}; CPU per push: worker ${r.workerUs.toFixed(0)} µs, bare ${r.bareUs.toFixed(0)} µs, ` +
      `web-push ${r.libUs.toFixed(0)} µs; ${pushdTally}; ${bareTally}; ${libTally}`,
  );
  return r;
}

/** The medians over the rounds, the encryption's CPU and the mock's checks. */
function printSummary(results: RoundResult[], encryptUs: number, tally: MockTally): void {
  const ratios = results.map((r) => r.pushd / r.bare);
  const med = (pick: (r: RoundResult) => number) => median(results.map(pick));

  console.log(
    `\nweb push benchmark: ${devices} web devices on one loopback TLS push service (HTTP/2, HTTP/1.1 for the web-push package), ` +
      `queue backend ${queue}, median of ${rounds} rounds; the mock counts every push per endpoint, checks every push's headers, ` +
      `and verifies the VAPID JWT and decrypts the body of 1 push in ${verifyEvery}\n`,
  );
  printTable([
    ['pushd pushes/s (POST -> last push received)', med((r) => r.pushd).toFixed(0)],
    ['pushd: POST -> first push (full audience)', `${med((r) => r.firstMs).toFixed(0)} ms`],
    [`bare node:http2 sender pushes/s (same crypto, ${bareConnections} x 1,000 streams)`, med((r) => r.bare).toFixed(0)],
    ['ratio pushd / bare (per round)', ratios.map((x) => x.toFixed(2)).join(' ')],
    ['ratio pushd / bare (median)', median(ratios).toFixed(2)],
    [`web-push package sendNotification pushes/s (${concurrency} in flight)`, med((r) => r.lib).toFixed(0)],
    ['ratio pushd / web-push package (median)', median(results.map((r) => r.pushd / r.lib)).toFixed(2)],
    [`encryption CPU per push (encryptRecord alone, ${ENCRYPT_SAMPLE} pushes)`, `${encryptUs.toFixed(0)} µs`],
    ['pushd worker CPU per push, all threads (median)', `${med((r) => r.workerUs).toFixed(0)} µs`],
    ['bare sender CPU per push, all threads (median)', `${med((r) => r.bareUs).toFixed(0)} µs`],
    ['web-push package CPU per push, all threads (median)', `${med((r) => r.libUs).toFixed(0)} µs`],
    ['pushes verified (JWT + decrypted) / refused by the mock', `${tally.verified} / ${tally.refused}`],
    ['devices missed / pushed twice (all rounds, all senders)', `${tally.missed} / ${tally.twice}`],
  ]);
  for (const why of tally.refusedWhy.slice(0, 5)) console.error(`refused: ${why}`);
}

async function main() {
  const pool = browserKeyPool(KEY_POOL_SIZE);
  const vapid = vapidPair();
  const mock = await BenchWebPushMock.start({ pool, applicationServerKey: vapid.publicKey, verifyEvery });
  const stack = await benchStack('bench_web_push', { queue, redisUrl });
  await seed(stack, mock, pool, vapid);

  const encryptUs = encryptionCpuUs(pool);

  const services = await startServices({ ...stack.env, WEB_PUSH_ALLOWED_ORIGINS: mock.origin }, { mode: 'split', workers: 1 });
  const poster = notificationPoster(services.base, stack.keys.write, PAYLOAD);

  // the worker's connection and VAPID JWT warm, as a long-running worker's are (an Idempotency-Key sends through the queue)
  await warmWorker(stack, poster.post, mock);

  const tally = new MockTally(mock);
  const results: RoundResult[] = [];
  for (let round = 0; round < rounds; round++) results.push(await runRound({ mock, vapid, services, poster, tally }, round));
  printSummary(results, encryptUs, tally);

  await services.stop();
  await stack.close();
  await mock.close();
  process.exit(tally.missed > 0 || tally.twice > 0 || tally.refused > 0 ? 1 : 0);
}

/** The app's VAPID key pair: as stored (base64url point and scalar) and as PEM for the bare sender's signer. */
function vapidPair() {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const jwk = privateKey.export({ format: 'jwk' });
  const point = Buffer.concat([Buffer.from([4]), Buffer.from(jwk.x!, 'base64url'), Buffer.from(jwk.y!, 'base64url')]);
  return {
    publicKey: point.toString('base64url'),
    privateKey: jwk.d!,
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

/** CPU µs one push's encryption takes (RFC 8291: ECDH with a fresh key pair, HKDF, AES-128-GCM), in this process. */
function encryptionCpuUs(pool: ReturnType<typeof browserKeyPool>): number {
  const { body } = toWebPushMessage(PAYLOAD, '00000000-0000-0000-0000-000000000000', { now: new Date() });
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < ENCRYPT_SAMPLE; i++) encryptRecord(body, pool[i % pool.length]!);
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / ENCRYPT_SAMPLE;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
