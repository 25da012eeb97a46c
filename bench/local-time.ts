/**
 * A local-time send at scale: N devices spread over every IANA zone (and some with none, which follow UTC), one
 * notification for 09:00 on each device's clock. The service runs in this process on a clock the benchmark moves
 * from wave to wave (the real thing takes 26 hours). Prints the time to plan it (the POST, which plans), the
 * plan's size, the process's memory, the send, and checks that every device got exactly one push, received while
 * the clock stood in the 09:00 minute of the device's own zone; the zones already past 09:00 are skipped and counted.
 *
 *   npm run bench -- local-time [--devices 1000000] [--queue redis|postgres] [--per-minute N]
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { planLocalTime, isInLocalMinute, parseLocalDateTime } from '../src/domain/schedule.js';
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

const DEVICES = Number(arg('devices', '1000000'));
const queue = arg('queue', process.env.REDIS_URL ? 'redis' : 'postgres');
const perMinute = arg('per-minute', '');
const WALL = '2026-12-24T09:00';
// 19:30Z on the 23rd: 09:00 on the 24th has passed at UTC+14 (Kiritimati) and +13:45 (Chatham), nowhere else
const START = new Date('2026-12-23T19:30:00Z');
const ZONES = Intl.supportedValuesOf('timeZone');

/** Seeds the devices; returns each device's zone by token (UTC for the devices with none). */
async function seed(stack: BenchStack): Promise<Map<string, string>> {
  const t = performance.now();
  // every 100th device has no zone (the app's default, UTC); the rest go round the zones
  await seedZonedDevices(stack, DEVICES, ZONES);
  await sql`analyze devices`.execute(stack.db.db);
  const zoneOf = new Map<string, string>();
  for (const row of (await sql<{ token: string; time_zone: string | null }>`select token, time_zone from devices`.execute(stack.db.db))
    .rows)
    zoneOf.set(row.token, row.time_zone ?? 'UTC');
  console.log(`seeded ${DEVICES} devices over ${ZONES.length} zones in ${Math.round(performance.now() - t)} ms`);
  return zoneOf;
}

/** POSTs the local-time notification (which plans it); returns its id, the POST's time and the stored plan's size. */
async function postAndPlan(stack: BenchStack, server: ClockedServer) {
  const t = performance.now();
  const res = await server.inject({
    method: 'POST',
    url: '/v6/notifications',
    headers: { authorization: `Basic ${Buffer.from(`:${stack.keys.write}`).toString('base64')}` },
    payload: {
      notification: {
        to: '*',
        payload: { alert: 'Merry Christmas Eve' },
        send_at: WALL,
        local_time: true,
        ...(perMinute ? { throttle: { per_minute: Number(perMinute) } } : {}),
      },
    },
  });
  const planMs = performance.now() - t;
  if (res.statusCode !== 201) throw new Error(`POST answered ${res.statusCode}: ${res.body}`);
  const id = res.json().id as string;
  const stored = await sql<{ bytes: number; waves: number }>`
    select pg_column_size(local_plan) as bytes, jsonb_array_length(local_plan->'waves') as waves from notifications where id = ${id}::uuid`.execute(
    stack.db.db,
  );
  return { id, planMs, ...stored.rows[0]! };
}

/** Waits (a minute at most) until the notification is sent; returns how many devices it skipped as past 09:00. */
async function waitSent(stack: BenchStack, id: string): Promise<number> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const n = (
      await sql<{ state: string; skipped: number }>`
      select state, skipped_past_local_time as skipped from notifications where id = ${id}::uuid`.execute(stack.db.db)
    ).rows[0]!;
    if (n.state === 'sent') return n.skipped;
    if (Date.now() > deadline) throw new Error(`notification still ${n.state}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface Outcome {
  zoneOf: Map<string, string>;
  past: Set<string>;
  received: Received;
  posted: Awaited<ReturnType<typeof postAndPlan>>;
  sent: { sendMs: number; peakRss: number };
  skipped: number;
  expectedSkipped: number;
}

/** Prints the table; sets a failing exit code when a device was missed, pushed twice, pushed outside 09:00 or skipped wrongly. */
function report({ zoneOf, past, received, posted, sent, skipped, expectedSkipped }: Outcome): void {
  const local = parseLocalDateTime(WALL)!;
  let twice = 0;
  let outside = 0;
  for (const [token, r] of received) {
    if (r.count > 1) twice++;
    if (!isInLocalMinute(r.at, zoneOf.get(token)!, local)) outside++;
  }
  const missed = [...zoneOf].filter(([token, z]) => !past.has(z) && !received.has(token)).length;
  const rows: [string, string][] = [
    ['devices / zones (some devices with none: UTC)', `${DEVICES} / ${ZONES.length}`],
    ['waves (distinct instants of 09:00)', String(posted.waves)],
    ['POST, planning included (ms)', posted.planMs.toFixed(0)],
    ['plan stored (bytes, compressed)', String(posted.bytes)],
    ['skipped: 09:00 already past (counted / expected)', `${skipped} / ${expectedSkipped}`],
    ['pushes sent', String(received.size)],
    ['send time, all waves (s)', (sent.sendMs / 1000).toFixed(1)],
    ['pushes/s while sending', String(Math.round(received.size / (sent.sendMs / 1000)))],
    ['process peak RSS (service, mocks and this bookkeeping) (MB)', String(Math.round(sent.peakRss / 1e6))],
    ['devices missed / pushed twice', `${missed} / ${twice}`],
    ["pushes received outside the device's own 09:00 minute", String(outside)],
  ];
  printMeasures(
    `local-time benchmark: ${WALL} on each device's clock, queue backend ${queue}${perMinute ? `, ${perMinute}/minute` : ''}`,
    rows,
  );
  if (missed || twice || outside || skipped !== expectedSkipped) process.exitCode = 1;
}

async function main() {
  const stack = await benchStack('bench_local_time', { queue, redisUrl: process.env.REDIS_URL ?? '' });
  const clock = new ManualClock(START);
  const received = countReceived(stack, clock);
  const zoneOf = await seed(stack);
  const service = await startClockedService(stack, clock);

  // the plan the service should make, to know which devices each wave must reach
  const expected = planLocalTime(WALL, [...new Set([...ZONES, 'UTC'])], START);
  const past = new Set(expected.past);
  const expectedSkipped = [...zoneOf.values()].filter((z) => past.has(z)).length;

  const posted = await postAndPlan(stack, service.server);

  // move the clock to each wave's instant and wait for its devices before the next
  const wanted = new Map<number, number>(); // wave instant -> devices due then
  const zoneWave = new Map(expected.waves.flatMap((w) => w.zones.map((z) => [z, w.at.getTime()] as const)));
  for (const z of zoneOf.values()) if (!past.has(z)) wanted.set(zoneWave.get(z)!, (wanted.get(zoneWave.get(z)!) ?? 0) + 1);
  const waves = expected.waves.map((wave) => ({ at: wave.at, due: wanted.get(wave.at.getTime()) ?? 0 }));
  const sent = await sendWaves(clock, received, waves);
  clock.set(new Date(expected.waves.at(-1)!.at.getTime() + 60_000));
  const skipped = await waitSent(stack, posted.id);

  report({ zoneOf, past, received, posted, sent, skipped, expectedSkipped });
  await service.close();
  await stack.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
