/**
 * Live Activity benchmark: one update (`POST /v6/live-activities`) to an activity whose token N devices hold, from
 * the POST to the last push received by the mock APNs on loopback, against a bare node:http2 client sending the
 * same N Live Activity pushes to the same mock in the same run (the machine's ceiling).
 *
 *   npm run bench -- live-activity [--tokens 20000] [--rounds 2] [--queue postgres|redis] [--bare-connections 1]
 *
 * Every token must get exactly one push a round: the benchmark exits 1 when one is missed or pushed twice.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { liveActivityTopic } from '../src/domain/live-activity.js';
import { arg, cpuMs, median, printTable, runBenchChild } from './lib/setup.js';
import { BENCH_BUNDLE, benchStack, type BenchStack, type Services, startServices } from './lib/stack.js';
import { activityTokenOf } from './lib/live-activity-tokens.js';

const tokens = Number(arg('tokens', '20000'));
const rounds = Number(arg('rounds', '2'));
const queue = arg('queue', process.env.REDIS_URL ? 'redis' : 'postgres');
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const bareConnections = Number(arg('bare-connections', '1'));

interface RoundResult {
  pipeline: number;
  bare: number;
  firstMs: number;
  workerUs: number;
  bareUs: number;
  missed: number;
  twice: number;
}

/** N devices holding the activity's token, and one more holding the warm-up activity's; returns both activity ids. */
async function seed({ db, app }: BenchStack): Promise<{ activity: string; warm: string }> {
  const activity = randomUUID();
  const warm = randomUUID();
  const t = Date.now();
  await sql`
    insert into devices (app_id, platform, token)
    select ${app.id}::uuid, 'ios', encode(sha256(int4send(i)), 'hex')
    from generate_series(0, ${tokens}) as i`.execute(db.db);
  // device i (in id order) holds the activity token activityTokenOf(i); the last one also holds the warm-up activity
  const ids = await db.db.selectFrom('devices').select('id').where('app_id', '=', app.id).orderBy('id').execute();
  await sql`
    insert into live_activity_tokens (device_id, activity_id, app_id, activity_type, token)
    select d.id, ${activity}, ${app.id}::uuid, 'BenchAttributes', t.token
    from unnest(${ids.slice(0, tokens).map((r) => r.id)}::uuid[], ${ids.slice(0, tokens).map((_, i) => activityTokenOf(i))}::text[])
      as t(id, token)
    join devices d on d.id = t.id`.execute(db.db);
  await sql`
    insert into live_activity_tokens (device_id, activity_id, app_id, activity_type, token)
    values (${ids[tokens]!.id}::uuid, ${warm}, ${app.id}::uuid, 'BenchAttributes', ${activityTokenOf(tokens)})`.execute(db.db);
  await sql`analyze devices`.execute(db.db);
  await sql`analyze live_activity_tokens`.execute(db.db);
  console.log(`seeded ${tokens} devices with the activity's token in ${Date.now() - t} ms`);
  return { activity, warm };
}

/** POSTs an update to an activity (returns the send's id) and waits for a send to end, through the service's API. */
function liveActivityApi(base: string, writeKey: string) {
  const auth = `Basic ${Buffer.from(`:${writeKey}`).toString('base64')}`;
  const post = async (activityId: string, round: number) => {
    const res = await fetch(`${base}/v6/live-activities`, {
      method: 'POST',
      headers: { authorization: auth, 'content-type': 'application/json' },
      body: JSON.stringify({ live_activity: { event: 'update', activity_id: activityId, content_state: { score: round } } }),
    });
    if (res.status !== 201) throw new Error(`POST failed: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { live_activity: { id: string } }).live_activity.id;
  };
  const finished = async (id: string) => {
    for (;;) {
      const r = await fetch(`${base}/v6/live-activities/${id}`, { headers: { authorization: auth } });
      const { live_activity: la } = (await r.json()) as { live_activity: { state: string } };
      if (la.state === 'sent' || la.state === 'failed') return;
      await new Promise((res) => setTimeout(res, 100));
    }
  };
  return { post, finished };
}

/** One round: the update through the pipeline, then the bare client sending the same pushes; prints its line. */
async function runRound(stack: BenchStack, services: Services, api: ReturnType<typeof liveActivityApi>, activity: string, round: number) {
  const { db, apns, apnsKey } = stack;
  const { workers } = services;
  apns.resetStats();
  const received = new Map<string, number>();
  let firstAt = 0;
  const all = new Promise<number>((resolve) => {
    apns.onAccept = (token) => {
      if (received.size === 0) firstAt = performance.now();
      received.set(token, (received.get(token) ?? 0) + 1);
      if (received.size === tokens) resolve(performance.now());
    };
  });
  const workerCpu0 = workers.reduce((sum, w) => sum + cpuMs(w.pid!), 0);
  const t0 = performance.now();
  const id = await api.post(activity, round);
  const done = api.finished(id).then(() => performance.now());
  const tEnd = await Promise.race([all, done]);
  const workerCpu = workers.reduce((sum, w) => sum + cpuMs(w.pid!), 0) - workerCpu0;
  await done;
  apns.onAccept = undefined;
  const missed = tokens - received.size;
  const twice = [...received.values()].filter((n) => n > 1).length;

  apns.resetStats();
  const stored = await db.db.selectFrom('notifications').select('payload').where('id', '=', id).executeTakeFirstOrThrow();
  const bare = await runBenchChild<{ ms: number; ok: number; cpuMs: number }>(
    'bench/lib/bare-live-activity.ts',
    {
      tokens,
      apnsOrigin: apns.origin,
      topic: BENCH_BUNDLE,
      apnsKey: apnsKey.credentials,
      payload: stored.payload,
      connections: bareConnections,
      streamsPerConnection: 1000,
    },
    'BARE_NODE_ARGS',
  );
  if (bare.ok !== tokens) throw new Error(`bare client: only ${bare.ok} of ${tokens} pushes accepted`);
  const r: RoundResult = {
    pipeline: tokens / ((tEnd - t0) / 1000),
    bare: bare.ok / (bare.ms / 1000),
    firstMs: firstAt - t0,
    workerUs: (workerCpu * 1000) / tokens,
    bareUs: (bare.cpuMs * 1000) / tokens,
    missed,
    twice,
  };
  console.log(
    `round ${round + 1}: pipeline ${r.pipeline.toFixed(0)}/s (first push ${r.firstMs.toFixed(0)} ms), bare ${r.bare.toFixed(0)}/s, ` +
      `ratio ${(r.pipeline / r.bare).toFixed(2)}; CPU per push: worker ${r.workerUs.toFixed(1)} µs, bare client ${r.bareUs.toFixed(1)} µs; ` +
      `tokens missed ${missed}, pushed twice ${twice}`,
  );
  return r;
}

/** The medians over the rounds. */
function printSummary(results: RoundResult[]): void {
  const ratios = results.map((r) => r.pipeline / r.bare);
  console.log(
    `\nLive Activity benchmark: one update to ${tokens} activity tokens, queue backend ${queue}, mock APNs on loopback TLS HTTP/2, bare client ${bareConnections} connection(s) x 1,000 streams, median of ${rounds} rounds\n`,
  );
  printTable([
    ['pipeline pushes/s (POST -> last push received)', median(results.map((r) => r.pipeline)).toFixed(0)],
    ['bare node:http2 pushes/s (ceiling)', median(results.map((r) => r.bare)).toFixed(0)],
    ['ratio pipeline / bare (per round)', ratios.map((x) => x.toFixed(2)).join(' ')],
    ['ratio pipeline / bare (median)', median(ratios).toFixed(2)],
    ['pipeline: POST -> first push', `${median(results.map((r) => r.firstMs)).toFixed(0)} ms`],
    ['worker CPU per push, all threads (median)', `${median(results.map((r) => r.workerUs)).toFixed(1)} µs`],
    ['bare client CPU per push, all threads (median)', `${median(results.map((r) => r.bareUs)).toFixed(1)} µs`],
    [
      'tokens missed / pushed twice (all rounds)',
      `${results.reduce((s, r) => s + r.missed, 0)} / ${results.reduce((s, r) => s + r.twice, 0)}`,
    ],
  ]);
}

async function main() {
  const stack = await benchStack('bench_live_activity', { queue, redisUrl });
  stack.apns.addTopic(liveActivityTopic(BENCH_BUNDLE));
  const { activity, warm } = await seed(stack);

  const services = await startServices(stack.env, { mode: 'split', workers: 1 });
  const api = liveActivityApi(services.base, stack.keys.write);
  // the worker's APNs connection and JWT are warm before the rounds, as a long-running worker's are
  await api.finished(await api.post(warm, -1));

  const results: RoundResult[] = [];
  for (let round = 0; round < rounds; round++) results.push(await runRound(stack, services, api, activity, round));
  printSummary(results);
  await services.stop();
  await stack.close();
  process.exit(results.some((r) => r.missed > 0 || r.twice > 0) ? 1 : 0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
