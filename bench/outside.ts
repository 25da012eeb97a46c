/**
 * The outside sequence: what an outside check of `npm start` does, in its order, from processes apart from the
 * service. A fresh database; devices registered through `POST /v6/devices` with the sdk key, as phones do; one
 * ROLE=all process with production's settings (rate limits raised, LOG_LEVEL info, its log to a file); then
 * one-device notifications (a warm-up, then counted ones from 50 clients), transactional sends, and only then
 * the broadcasts, each alternated with a bare HTTP/2 client sending the same pushes to the same mocks.
 *
 *   npm run bench -- outside [--devices 20000] [--rounds 2] [--clients 50] [--warmup 2000] [--unicast 3000]
 *                            [--transactional 1000] [--gateway-latency-ms 100] [--unicast-latency-ms 0]
 *                            [--queue redis|postgres] [--bare-connections 2] [--analyze no|yes] [--database bench_outside]
 *
 * The mocks answer the one-device phases --unicast-latency-ms late and the broadcasts --gateway-latency-ms late,
 * as the outside check's did (its transactional rate, 638–836/s from 50 clients, is above the 500/s a 100 ms
 * answer would allow): a gateway whose round trip changes between quiet and busy times.
 * --database: a name of its own, for runs side by side on one PostgreSQL (the database is dropped and made anew).
 * --analyze yes: the devices' table analyzed after the fill, as autovacuum would have by then; by default not, as on
 * the machine's PostgreSQL, whose autovacuum is off.
 */
import { parseFcmServiceAccount } from '../src/domain/credentials.js';
import { ServiceAccountTokenCredential } from '../src/gateways/google-oauth.js';
import { registerThroughApi } from './lib/device-fill.js';
import { LoadClients } from './lib/load-clients.js';
import { measurePhase as phase, phaseCells, type Phase } from './lib/phases.js';
import { mocksHere, type MockGateways, waitReceived } from './lib/mock-gateways.js';
import { pgbenchTps } from './lib/pgbench.js';
import { sql } from 'kysely';
import { arg, median, parentPid, printRows } from './lib/setup.js';
import { bareBroadcast, BENCH_BUNDLE, benchApp, notificationPoster, type Services, startServices, waitFinished } from './lib/stack.js';
import { tmpdir } from 'node:os';
import path from 'node:path';

const devices = Number(arg('devices', '20000'));
const rounds = Number(arg('rounds', '2'));
const clients = Number(arg('clients', '50'));
const warmup = Number(arg('warmup', '2000'));
const unicast = Number(arg('unicast', '3000'));
const transactional = Number(arg('transactional', '1000'));
const broadcastLatencyMs = Number(arg('gateway-latency-ms', '100'));
const unicastLatencyMs = Number(arg('unicast-latency-ms', '0'));
const queue = arg('queue', 'redis');
const bareConnections = Number(arg('bare-connections', '2'));
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const analyze = arg('analyze', 'no') === 'yes';
if (warmup + unicast + transactional > devices) throw new Error('--devices must cover the one-device phases');
/** production's settings but the rate limits, raised as an outside check raises them by environment */
const OUTSIDE_ENV = { LOG_LEVEL: 'info', RATE_LIMIT_PER_SECOND: '100000', RATE_LIMIT_BURST: '100000' };
const LOG_FILE = path.join(tmpdir(), `pushd-bench-outside-${process.pid}.log`);
const PAYLOAD = { alert: 'Your order has shipped', badge: 1 };

type App = Awaited<ReturnType<typeof benchApp>>;
type Row = { id: string; user_id: string | null };
interface RoundResult {
  pipeline: number;
  bare: number;
  firstMs: number;
  missed: number;
  twice: number;
  inFlight: string;
}

/** Registers the devices through the API, as phones do; returns them in the order they were registered. */
async function registerDevices(stack: App): Promise<Row[]> {
  const { db, keys } = stack;
  const t = performance.now();
  await registerThroughApi({ env: stack.env, sdkKey: keys.sdk, identitySecret: stack.identitySecret, count: devices, clients });
  console.log(`registered ${devices} devices through POST /v6/devices in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  if (analyze) await sql`analyze devices`.execute(db.db);
  const rows = await db.db.selectFrom('devices').select(['id', 'user_id']).execute();
  rows.sort((a, b) => Number(a.user_id!.slice(1)) - Number(b.user_id!.slice(1)));
  return rows;
}

/** The one-device phases from the clients: a warm-up, the counted ones, the transactional sends; each measured. */
async function oneDevicePhases(stack: App, services: Services, gateways: MockGateways, rows: Row[]): Promise<Phase[]> {
  const { auth } = notificationPoster(services.base, stack.keys.write, PAYLOAD);
  const load = new LoadClients({ base: services.base, authorization: auth, clients, agent: 'http', where: 'process' });
  const toDevice = (row: Row) => ({
    path: '/v6/notifications',
    body: { notification: { to: [{ name: 'device_id', criteria: [row.id] }], payload: PAYLOAD } },
  });
  const toUser = (row: Row) => ({
    path: '/v6/transactional/notifications',
    body: { to: { field: 'user_id', value: row.user_id }, group: 'order-shipped', notification: { payload: PAYLOAD } },
  });
  const backend = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(stack.db.db)).rows[0]!.pid;
  const meters = { service: services.api.pid!, postmaster: parentPid(backend), clients: load.pid! };
  const phases: Phase[] = [];
  const tx = rows.slice(warmup + unicast, warmup + unicast + transactional);
  phases.push(await phase('one-device, warm-up', meters, 201, () => load.post(rows.slice(0, warmup).map(toDevice))));
  phases.push(await phase('one-device', meters, 201, () => load.post(rows.slice(warmup, warmup + unicast).map(toDevice))));
  phases.push(await phase('transactional', meters, 200, () => load.post(tx.map(toUser))));
  await waitReceived(gateways, warmup + unicast + transactional, 120_000);
  await load.close();
  return phases;
}

/** One broadcast round: the pipeline's broadcast to every device, then the bare client's same pushes; prints its line. */
async function broadcastRound(stack: App, services: Services, gateways: MockGateways, fcmAccessToken: string, round: number) {
  const { auth, post } = notificationPoster(services.base, stack.keys.write, PAYLOAD);
  await gateways.reset();
  const t0 = performance.now();
  const { id } = await post('*');
  await waitReceived(gateways, devices, 300_000);
  const got = await gateways.received();
  await waitFinished(services.base, auth, id);
  const { distinct, twice } = await gateways.summary();
  const seconds = (got.lastAtEpochMs - (performance.timeOrigin + t0)) / 1000;
  const firstMs = got.firstAtEpochMs - (performance.timeOrigin + t0);

  await gateways.reset();
  const bare = await bareBroadcast(gateways, fcmAccessToken, {
    devices,
    payload: PAYLOAD,
    notificationId: id,
    tokens: 'registration',
    connections: bareConnections,
  });
  const bareInFlight = (await gateways.received()).peakInFlight;
  const r: RoundResult = {
    pipeline: devices / seconds,
    bare: bare.ok / (bare.ms / 1000),
    firstMs,
    missed: devices - distinct,
    twice,
    inFlight: `${got.peakInFlight.join(' + ')} / ${bareInFlight.join(' + ')}`,
  };
  console.log(
    `round ${round + 1}: pipeline ${r.pipeline.toFixed(0)}/s, bare ${r.bare.toFixed(0)}/s, ratio ${(r.pipeline / r.bare).toFixed(2)}, ` +
      `POST -> first push ${firstMs.toFixed(0)} ms, most in flight APNs + FCM: pipeline / bare ${r.inFlight}, missed ${r.missed}, twice ${twice}`,
  );
  return r;
}

/** The phases' table and the broadcast rounds' table. */
function printReport(tps: string, phases: Phase[], results: RoundResult[]): void {
  const pg = Number(tps);
  console.log(
    `\noutside sequence: ${devices} devices registered through POST /v6/devices, one ROLE=all process (npm start's flags, ` +
      `production settings, rate limits raised, queue ${queue}, log to ${LOG_FILE}), ${clients} clients in a process of their own ` +
      `(node:http keep-alive); mocks answering ${unicastLatencyMs} ms late in the one-device phases and ${broadcastLatencyMs} ms ` +
      `in the broadcasts; bare client ${bareConnections} connection(s) x 1,000 streams per gateway; pgbench -N ${tps} tps; ` +
      `the devices' table ${analyze ? 'analyzed after the fill' : 'not analyzed (autovacuum off)'}\n`,
  );
  printRows(
    ['phase', 'req/s', '× pgbench -N', 'p50 ms', 'p99 ms', 'refused', 'CPU ms/request: service, PostgreSQL, clients', 'cores busy'],
    phases.map((p) => [...phaseCells(p, pg), ((p.cpu.reduce((a: number, b) => a + (b ?? 0), 0) * p.perSec) / 1000).toFixed(2)]),
  );
  console.log('');
  printRows(
    [
      'broadcast round',
      'pipeline pushes/s',
      'bare pushes/s',
      'ratio',
      'POST -> first push ms',
      'most in flight, APNs + FCM: pipeline / bare',
      'missed',
      'twice',
    ],
    results.map((r, i) => [
      String(i + 1),
      r.pipeline.toFixed(0),
      r.bare.toFixed(0),
      (r.pipeline / r.bare).toFixed(2),
      r.firstMs.toFixed(0),
      r.inFlight,
      String(r.missed),
      String(r.twice),
    ]),
  );
  console.log(`median ratio ${median(results.map((r) => r.pipeline / r.bare)).toFixed(2)}`);
}

async function main() {
  const tps = await pgbenchTps();
  const gateways = await mocksHere(BENCH_BUNDLE);
  const stack = await benchApp(arg('database', 'bench_outside'), { queue, redisUrl, gateways });
  const rows = await registerDevices(stack);

  if (unicastLatencyMs > 0) await gateways.delay(unicastLatencyMs);
  const services = await startServices({ ...stack.env, ...OUTSIDE_ENV }, { mode: 'single', logFile: LOG_FILE });
  const phases = await oneDevicePhases(stack, services, gateways, rows);

  await gateways.delay(broadcastLatencyMs);
  const oauth = await new ServiceAccountTokenCredential(parseFcmServiceAccount(gateways.serviceAccount), {
    tokenUrl: gateways.fcmTokenUrl,
  }).getAccessToken();
  const results: RoundResult[] = [];
  for (let round = 0; round < rounds; round++) results.push(await broadcastRound(stack, services, gateways, oauth.access_token, round));
  await services.stop();
  await stack.close();
  await gateways.close();

  printReport(tps, phases, results);
  process.exit(results.some((r) => r.missed > 0 || r.twice > 0) ? 1 : 0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
