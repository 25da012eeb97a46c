/**
 * The sends that wait for a wall-clock time (best-time, local-time): the service runs in the benchmark's process
 * on a clock the benchmark moves from wave to wave, and each push is counted at the mocks with the clock's time.
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { Lifecycle, startPushd } from '../../src/app/start.js';
import { loadConfig } from '../../src/platform/config.js';
import { createLogger } from '../../src/platform/logger.js';
import type { ManualClock } from '../../test/helpers/harness.js';
import type { BenchStack } from './stack.js';

/** Per token: how many pushes it got, and the clock's time at the first. */
export type Received = Map<string, { count: number; at: Date }>;

/** Counts every push the mock APNs and FCM accept, with the clock's time at the first to each token. */
export function countReceived(stack: BenchStack, clock: ManualClock): Received {
  const received: Received = new Map();
  stack.apns.onAccept = stack.fcm.onAccept = (token) => {
    const seen = received.get(token);
    received.set(token, { count: (seen?.count ?? 0) + 1, at: seen?.at ?? clock.now() });
  };
  return received;
}

/** `count` devices, half iOS, over `zones` in turn; every 100th has no zone (the app's default, UTC). */
export async function seedZonedDevices(stack: BenchStack, count: number, zones: string[]): Promise<void> {
  await sql`
    insert into devices (app_id, platform, token, time_zone)
    select ${stack.app.id}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex'),
           case when i % 100 = 0 then null else (${zones}::text[])[1 + i % ${zones.length}] end
    from generate_series(1, ${count}) as i`.execute(stack.db.db);
}

/** The in-process API server of startClockedService, which benchmarks call with `inject`. */
export type ClockedServer = Awaited<ReturnType<typeof startClockedService>>['server'];

/** The whole service (ROLE=all) in this process on `clock`, its API ready for `inject`; `close` stops it. */
export async function startClockedService(stack: BenchStack, clock: ManualClock) {
  const lifecycle = new Lifecycle();
  const log = createLogger('warn');
  const config = loadConfig({ ...stack.env, ROLE: 'all', LOG_LEVEL: 'warn', SCHEDULE_POLL_MS: '20' });
  const pushd = await startPushd(config, log, lifecycle, { clock });
  const server = pushd.api!.server;
  await server.ready();
  return { server, close: () => lifecycle.close(log) };
}

/**
 * Moves the clock to each wave's instant and waits (10 minutes at most) until its `due` pushes have arrived before
 * the next; returns the time that took and the process's peak RSS meanwhile.
 */
export async function sendWaves(
  clock: ManualClock,
  received: Received,
  waves: { at: Date; due: number }[],
): Promise<{ sendMs: number; peakRss: number }> {
  let due = 0;
  let peakRss = process.memoryUsage().rss;
  const sendStart = performance.now();
  for (const wave of waves) {
    clock.set(wave.at);
    due += wave.due;
    const deadline = Date.now() + 600_000;
    while (received.size < due) {
      if (Date.now() > deadline) throw new Error(`wave ${wave.at.toISOString()}: ${received.size} of ${due} pushes`);
      await new Promise((r) => setTimeout(r, 20));
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
    }
  }
  return { sendMs: performance.now() - sendStart, peakRss };
}

/** Prints a benchmark's two-column Markdown table under its title line. */
export function printMeasures(title: string, rows: [string, string][]): void {
  console.log(`\n${title}\n`);
  console.log('| measure | value |\n|---|---|');
  for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);
}
