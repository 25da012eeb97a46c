/**
 * A best-time send at scale: N devices spread over every IANA zone (every 100th with none: UTC), four in five with
 * three sessions at an hour of their own over the last days, the fifth with none (10:00 on its clock). One
 * notification with send_at "best_time"; the service runs in this process on a clock the benchmark moves from wave
 * to wave (the real thing takes a day). Prints the time to cut it (the POST and the fan-out that works out each
 * device's hour), the waves, the send, and checks that every device got exactly one push, received while the clock
 * stood at the instant its batch was held for, and that the devices without sessions were held for 10:00 local.
 *
 *   npm run bench -- best-time [--devices 100000] [--queue redis|postgres]
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { wallTimeAt } from '../src/domain/schedule.js';
import { ManualClock } from '../test/helpers/harness.js';
import { benchStack, type BenchStack } from './lib/stack.js';
import { arg } from './lib/setup.js';
import {
  type ClockedServer,
  countReceived,
  printMeasures,
  type Received,
  sendWaves,
  seedZonedDevices,
  startClockedService,
} from './lib/clocked-sends.js';

const DEVICES = Number(arg('devices', '100000'));
const queue = arg('queue', process.env.REDIS_URL ? 'redis' : 'postgres');
const START = new Date('2026-12-23T19:30:00Z');
const ZONES = Intl.supportedValuesOf('timeZone');

type Held = { at: Date; zone: string; sessions: boolean };

/** The devices over every zone, and three sessions a device on the three days before (every fifth device none). */
async function seed(stack: BenchStack): Promise<void> {
  const t = performance.now();
  await seedZonedDevices(stack, DEVICES, ZONES);
  // three sessions a device on the three days before, at an hour (UTC) of its own; every fifth device none
  await sql`
    insert into app_sessions (device_id, id, app_id, started_at)
    select d.id, gen_random_uuid(), d.app_id,
           ${START}::timestamptz - make_interval(days => k) + make_interval(hours => (abs(hashtext(d.token)) % 24) - 19)
    from devices d cross join generate_series(1, 3) as k
    where d.app_id = ${stack.app.id}::uuid and abs(hashtext(d.token)) % 5 <> 0`.execute(stack.db.db);
  await sql`analyze devices`.execute(stack.db.db);
  await sql`analyze app_sessions`.execute(stack.db.db);
  console.log(`seeded ${DEVICES} devices and their sessions in ${Math.round(performance.now() - t)} ms`);
}

/** POSTs the best-time notification and waits until its waves are cut; `state` reads the notification's row. */
async function postAndCut(stack: BenchStack, server: ClockedServer) {
  const t = performance.now();
  const res = await server.inject({
    method: 'POST',
    url: '/v6/notifications',
    headers: { authorization: `Basic ${Buffer.from(`:${stack.keys.write}`).toString('base64')}` },
    payload: { notification: { to: '*', payload: { alert: 'At your hour' }, send_at: 'best_time' } },
  });
  if (res.statusCode !== 201) throw new Error(`POST answered ${res.statusCode}: ${res.body}`);
  const id = res.json().id as string;
  const state = async () =>
    (
      await sql<{ state: string; cut: boolean; next: Date | null }>`
      select state, fanout_done as cut, next_due_at as next from notifications where id = ${id}::uuid`.execute(stack.db.db)
    ).rows[0]!;
  for (let deadline = Date.now() + 600_000; !(await state()).cut; await new Promise((r) => setTimeout(r, 20)))
    if (Date.now() > deadline) throw new Error('the waves were not cut in 10 minutes');
  return { id, state, cutMs: performance.now() - t };
}

/** Each device's instant, as its batch holds it. */
async function heldForEach(stack: BenchStack, id: string): Promise<Map<string, Held>> {
  const heldFor = new Map<string, Held>();
  for (const row of (
    await sql<{ token: string; at: Date; zone: string | null; sessions: boolean }>`
      select d.token, b.not_before as at, d.time_zone as zone, abs(hashtext(d.token)) % 5 <> 0 as sessions
      from delivery_batches b cross join unnest(b.device_ids) as x(id) join devices d on d.id = x.id
      where b.notification_id = ${id}::uuid`.execute(stack.db.db)
  ).rows)
    heldFor.set(row.token, { at: row.at, zone: row.zone ?? 'UTC', sessions: row.sessions });
  return heldFor;
}

/** The waves: each distinct instant a batch is held for, and how many devices are due then. */
function wavesOf(heldFor: Map<string, Held>): { at: Date; due: number }[] {
  const waves = [...new Set([...heldFor.values()].map((h) => h.at.getTime()))].sort((a, b) => a - b);
  const wanted = new Map<number, number>();
  for (const h of heldFor.values()) wanted.set(h.at.getTime(), (wanted.get(h.at.getTime()) ?? 0) + 1);
  return waves.map((at) => ({ at: new Date(at), due: wanted.get(at)! }));
}

/** Prints the table; sets a failing exit code when a device was missed, pushed twice, early or held wrong. */
function report(received: Received, heldFor: Map<string, Held>, m: { waves: number; cutMs: number; sendMs: number; peakRss: number }) {
  let twice = 0;
  let early = 0;
  let notAtTen = 0;
  for (const [token, r] of received) {
    const h = heldFor.get(token);
    if (r.count > 1) twice++;
    if (!h || r.at < h.at) early++;
    if (h && !h.sessions && wallTimeAt(h.zone, h.at).hour !== 10) notAtTen++;
  }
  const missed = [...heldFor.keys()].filter((token) => !received.has(token)).length;
  const rows: [string, string][] = [
    ['devices (four in five with sessions)', String(DEVICES)],
    ['waves (distinct instants)', String(m.waves)],
    ['POST and cut, each device its hour (ms)', m.cutMs.toFixed(0)],
    ['cut (devices/s)', String(Math.round(DEVICES / (m.cutMs / 1000)))],
    ['pushes sent', String(received.size)],
    ['send time, all waves (s)', (m.sendMs / 1000).toFixed(1)],
    ['process peak RSS (service, mocks and this bookkeeping) (MB)', String(Math.round(m.peakRss / 1e6))],
    ['devices missed / pushed twice / before their wave', `${missed} / ${twice} / ${early}`],
    ['devices without sessions not held for 10:00 local', String(notAtTen)],
  ];
  printMeasures(`best-time benchmark: queue backend ${queue}`, rows);
  if (missed || twice || early || notAtTen || received.size !== DEVICES) process.exitCode = 1;
}

async function main() {
  const stack = await benchStack('bench_best_time', { queue, redisUrl: process.env.REDIS_URL ?? '' });
  const clock = new ManualClock(START);
  const received = countReceived(stack, clock);
  await seed(stack);
  const service = await startClockedService(stack, clock);

  const { id, state, cutMs } = await postAndCut(stack, service.server);
  const heldFor = await heldForEach(stack, id);
  const waves = wavesOf(heldFor);
  const sent = await sendWaves(clock, received, waves);
  for (let deadline = Date.now() + 60_000; (await state()).state !== 'sent'; await new Promise((r) => setTimeout(r, 100)))
    if (Date.now() > deadline) throw new Error(`notification still ${(await state()).state}`);

  report(received, heldFor, { ...sent, waves: waves.length, cutMs });
  await service.close();
  await stack.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
