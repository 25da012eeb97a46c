/**
 * Templates benchmark: a broadcast whose alert is `Hi {{ custom.first_name | default: "there" }}` (names spread over
 * --names distinct values, a tenth of the devices without one) against the same broadcast untemplated, and a
 * templated transactional send against an untemplated one, through the whole pipeline to the mock gateways, in
 * alternated rounds of one run; the worker's CPU per push for each.
 *
 *   npm run bench -- templates [--devices 100000] [--names 20000] [--rounds 3] [--sends 200] [--queue postgres|redis]
 */
import { sql } from 'kysely';
import { arg, cpuMs, median, printTable } from './lib/setup.js';
import { benchStack, startServices, waitFinished } from './lib/stack.js';

const devices = Number(arg('devices', '100000'));
const names = Number(arg('names', '20000'));
const rounds = Number(arg('rounds', '3'));
const sends = Number(arg('sends', '200'));
const queue = arg('queue', process.env.REDIS_URL ? 'redis' : 'postgres');
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PLAIN = { alert: 'Hi there', badge: 1 };
const TEMPLATED = { alert: 'Hi {{ custom.first_name | default: "there" }}', badge: 1 };

async function main() {
  const stack = await benchStack(arg('database', 'bench_templates'), { queue, redisUrl });
  const { db, apns, fcm, keys, app } = stack;
  await sql`
    insert into devices (app_id, platform, token, user_id)
    select ${app.id}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex'), 'u' || i
    from generate_series(1, ${devices}) as i`.execute(db.db);
  await sql`
    insert into device_attributes (device_id, app_id, name, type, str_value)
    select id, app_id, 'first_name', 'string', 'name-' || (abs(hashtext(id::text)) % ${names})
    from devices where app_id = ${app.id}::uuid and abs(hashtext(id::text)) % 10 <> 0`.execute(db.db);
  await sql`analyze devices`.execute(db.db);
  const services = await startServices(stack.env, { mode: 'split', workers: 1 });
  const { base, workers } = services;
  const auth = `Basic ${Buffer.from(`:${keys.write}`).toString('base64')}`;
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
  const accepted = () => apns.accepted + fcm.accepted;

  const broadcast = async (payload: Record<string, unknown>) => {
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

  const results: {
    plain: Awaited<ReturnType<typeof broadcast>>;
    templated: Awaited<ReturnType<typeof broadcast>>;
    txPlain: number;
    txTemplated: number;
  }[] = [];
  for (let round = 0; round < rounds; round++) {
    const before = accepted();
    const r = {
      plain: await broadcast(PLAIN),
      templated: await broadcast(TEMPLATED),
      txPlain: await transactional(PLAIN),
      txTemplated: await transactional(TEMPLATED),
    };
    if (accepted() - before < 2 * devices + 2 * sends)
      throw new Error(`round ${round + 1}: ${accepted() - before} pushes accepted, fewer than sent`);
    results.push(r);
    console.log(
      `round ${round + 1}: broadcast ${r.plain.perSecond.toFixed(0)}/s untemplated, ${r.templated.perSecond.toFixed(0)}/s templated; transactional ${r.txPlain.toFixed(0)}/s, ${r.txTemplated.toFixed(0)}/s templated`,
    );
  }
  console.log(
    `\ntemplates benchmark: ${devices} devices (half iOS, half Android), ${names} distinct first names, queue ${queue}, median of ${rounds} rounds\n`,
  );
  const m = (f: (r: (typeof results)[number]) => number) => median(results.map(f));
  printTable([
    ['broadcast pushes/s untemplated', m((r) => r.plain.perSecond).toFixed(0)],
    ['broadcast pushes/s templated', m((r) => r.templated.perSecond).toFixed(0)],
    ['ratio templated / untemplated broadcast', m((r) => r.templated.perSecond / r.plain.perSecond).toFixed(2)],
    ['worker CPU per push untemplated', `${m((r) => r.plain.cpuUs).toFixed(0)} µs`],
    ['worker CPU per push templated', `${m((r) => r.templated.cpuUs).toFixed(0)} µs`],
    ['transactional sends/s untemplated / templated', `${m((r) => r.txPlain).toFixed(0)} / ${m((r) => r.txTemplated).toFixed(0)}`],
    ['ratio templated / untemplated transactional', m((r) => r.txTemplated / r.txPlain).toFixed(2)],
  ]);
  await services.stop();
  await stack.close();
  process.exit(0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
