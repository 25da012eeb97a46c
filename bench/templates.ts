/**
 * Templates benchmark: a broadcast whose alert is `Hi {{ custom.first_name | default: "there" }}` (names spread over
 * --names distinct values, a tenth of the devices without one) against the same broadcast untemplated, and a
 * templated transactional send against an untemplated one, through the whole pipeline to the mock gateways, in
 * alternated rounds of one run; the worker's CPU per push for each. Each round ends with the reference: a bare
 * node:http2 client (bench/lib/bare-client.ts, as the fan-out benchmark's) sending the same personal alerts, one per
 * device, to the same mocks.
 *
 *   npm run bench -- templates [--devices 100000] [--names 20000] [--rounds 3] [--sends 200] [--queue postgres|redis]
 *                              [--bare-connections 1]
 */
import { sql } from 'kysely';
import { parseFcmServiceAccount } from '../src/gateways/fcm.js';
import { ServiceAccountTokenCredential } from '../src/gateways/google-oauth.js';
import { arg, cpuMs, median, printTable } from './lib/setup.js';
import { bareBroadcast, benchStack, type BenchStack, gatewaysOf, type Services, startServices, waitFinished } from './lib/stack.js';

const devices = Number(arg('devices', '100000'));
const names = Number(arg('names', '20000'));
const rounds = Number(arg('rounds', '3'));
const sends = Number(arg('sends', '200'));
const bareConnections = Number(arg('bare-connections', '1'));
const queue = arg('queue', process.env.REDIS_URL ? 'redis' : 'postgres');
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PLAIN = { alert: 'Hi there', badge: 1 };
const TEMPLATED = { alert: 'Hi {{ custom.first_name | default: "there" }}', badge: 1 };

interface Rate {
  perSecond: number;
  cpuUs: number;
}
interface RoundResult {
  plain: Rate;
  templated: Rate;
  txPlain: number;
  txTemplated: number;
  bare: Rate;
}

/** The devices (user id `u<i>`) and their first names: `names` distinct ones, a tenth of the devices without one. */
async function seed({ db, app }: BenchStack): Promise<void> {
  await sql`
    insert into devices (app_id, platform, token, user_id)
    select ${app.id}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex'), 'u' || i
    from generate_series(1, ${devices}) as i`.execute(db.db);
  await sql`
    insert into device_attributes (device_id, app_id, name, type, str_value)
    select id, app_id, 'first_name', 'string', 'name-' || (abs(hashtext(id::text)) % ${names})
    from devices where app_id = ${app.id}::uuid and abs(hashtext(id::text)) % 10 <> 0`.execute(db.db);
  await sql`analyze devices`.execute(db.db);
}

/** The pipeline's two sends, through the service's API: a broadcast (rate and worker CPU) and `sends` transactional ones. */
function pipelineSends(stack: BenchStack, services: Services) {
  const { base, workers } = services;
  const auth = `Basic ${Buffer.from(`:${stack.keys.write}`).toString('base64')}`;
  const post = async (url: string, body: unknown) => {
    const res = await fetch(`${base}${url}`, {
      method: 'POST',
      headers: { authorization: auth, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (res.status >= 300) throw new Error(`${url}: ${res.status} ${await res.text()}`);
    return (await res.json()) as { id: string };
  };
  const workerCpu = () => workers.reduce((sum, w) => sum + cpuMs(w.pid!), 0);

  const broadcast = async (payload: Record<string, unknown>): Promise<Rate> => {
    const [cpu0, t0] = [workerCpu(), performance.now()];
    const { id } = await post('/v6/notifications', { notification: { to: '*', payload } });
    await waitFinished(base, auth, id);
    return { perSecond: devices / ((performance.now() - t0) / 1000), cpuUs: ((workerCpu() - cpu0) * 1000) / devices };
  };
  const transactional = async (payload: Record<string, unknown>) => {
    const t0 = performance.now();
    for (let i = 1; i <= sends; i++)
      await post('/v6/transactional/notifications', {
        to: { field: 'user_id', value: `u${i}` },
        group: 'bench',
        notification: { payload },
      });
    return sends / ((performance.now() - t0) / 1000);
  };
  return { broadcast, transactional };
}

/** The reference: the same number of personal alerts (as many distinct names) from a bare client to the same mocks. */
async function bareReference(stack: BenchStack, fcmAccessToken: string): Promise<Rate> {
  const r = await bareBroadcast(gatewaysOf(stack), fcmAccessToken, {
    devices,
    payload: PLAIN,
    personal: { names },
    notificationId: '00000000-0000-4000-8000-000000000000',
    connections: bareConnections,
  });
  if (r.ok !== devices) throw new Error(`bare client: only ${r.ok} of ${devices} pushes accepted`);
  return { perSecond: r.ok / (r.ms / 1000), cpuUs: (r.cpuMs * 1000) / devices };
}

/** The medians over the rounds. */
function printSummary(results: RoundResult[]): void {
  console.log(
    `\ntemplates benchmark: ${devices} devices (half iOS, half Android), ${names} distinct first names, queue ${queue}, bare client ${bareConnections} connection(s) x 1,000 streams per gateway, median of ${rounds} rounds\n`,
  );
  const m = (f: (r: RoundResult) => number) => median(results.map(f));
  printTable([
    ['broadcast pushes/s untemplated', m((r) => r.plain.perSecond).toFixed(0)],
    ['broadcast pushes/s templated', m((r) => r.templated.perSecond).toFixed(0)],
    ['ratio templated / untemplated broadcast', m((r) => r.templated.perSecond / r.plain.perSecond).toFixed(2)],
    ['bare client pushes/s, the same personal alerts', m((r) => r.bare.perSecond).toFixed(0)],
    [
      'ratio templated broadcast / bare client (per round)',
      results.map((r) => (r.templated.perSecond / r.bare.perSecond).toFixed(2)).join(' '),
    ],
    ['ratio templated broadcast / bare client (median)', m((r) => r.templated.perSecond / r.bare.perSecond).toFixed(2)],
    ['worker CPU per push untemplated', `${m((r) => r.plain.cpuUs).toFixed(0)} µs`],
    ['worker CPU per push templated', `${m((r) => r.templated.cpuUs).toFixed(0)} µs`],
    ['bare client CPU per push, all threads', `${m((r) => r.bare.cpuUs).toFixed(0)} µs`],
    ['transactional sends/s untemplated / templated', `${m((r) => r.txPlain).toFixed(0)} / ${m((r) => r.txTemplated).toFixed(0)}`],
    ['ratio templated / untemplated transactional', m((r) => r.txTemplated / r.txPlain).toFixed(2)],
  ]);
}

async function main() {
  const stack = await benchStack(arg('database', 'bench_templates'), { queue, redisUrl });
  const { apns, fcm, serviceAccount: sa } = stack;
  await seed(stack);
  const services = await startServices(stack.env, { mode: 'split', workers: 1 });
  const { broadcast, transactional } = pipelineSends(stack, services);
  const accepted = () => apns.accepted + fcm.accepted;
  const oauth = await new ServiceAccountTokenCredential(parseFcmServiceAccount(sa.json), { tokenUrl: fcm.tokenUrl }).getAccessToken();

  const results: RoundResult[] = [];
  for (let round = 0; round < rounds; round++) {
    const before = accepted();
    const r: RoundResult = {
      plain: await broadcast(PLAIN),
      templated: await broadcast(TEMPLATED),
      txPlain: await transactional(PLAIN),
      txTemplated: await transactional(TEMPLATED),
      bare: await bareReference(stack, oauth.access_token),
    };
    if (accepted() - before < 2 * devices + 2 * sends)
      throw new Error(`round ${round + 1}: ${accepted() - before} pushes accepted, fewer than sent`);
    results.push(r);
    console.log(
      `round ${round + 1}: broadcast ${r.plain.perSecond.toFixed(0)}/s untemplated, ${r.templated.perSecond.toFixed(0)}/s templated; transactional ${r.txPlain.toFixed(0)}/s, ${r.txTemplated.toFixed(0)}/s templated; bare client ${r.bare.perSecond.toFixed(0)}/s`,
    );
  }
  printSummary(results);
  await services.stop();
  await stack.close();
  process.exit(0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
