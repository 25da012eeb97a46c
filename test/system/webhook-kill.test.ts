import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisUrl } from '../helpers/harness.js';
import { waitFor } from '../helpers/gateways.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { broadcastWorld } from './broadcast-world.js';
import { Proc } from './proc.js';

const DEVICES = 2000;
const BUNDLE = 'com.example.webhookkill';
/**
 * Small bounds so a broadcast is many webhook requests, and a short lease so a killed worker's events are taken
 * again in seconds; the queue's recovery timers shortened as the journey-kill test has them.
 */
const SETTINGS = {
  DELIVERY_BATCH_SIZE: 100,
  WEBHOOK_BATCH_SIZE: 50,
  WEBHOOK_POLL_MS: 100,
  WEBHOOK_TIMEOUT_MS: 5000,
  WEBHOOK_LEASE_MS: 10000,
  JOB_LOCK_MS: 3000,
  SWEEP_AFTER_SECONDS: 3,
};

/** The push.delivered events the receiver got of a notification: each id with how many times it came, and the devices. */
function deliveredOf(rx: Receiver, notificationId: string) {
  const times = new Map<string, number>();
  const devices = new Set<unknown>();
  for (const e of rx.events())
    if (e.type === 'push.delivered' && e.data.notification_id === notificationId) {
      times.set(e.id, (times.get(e.id) ?? 0) + 1);
      devices.add(e.data.device_id);
    }
  const duplicates = [...times.values()].reduce((sum, n) => sum + n - 1, 0);
  return { times, devices, duplicates };
}

/**
 * Webhooks on the compiled processes: an API process and worker processes (Redis queue, real PostgreSQL, the mock
 * gateways), an endpoint for every event whose receiver is in this process over HTTPS. Two workers share the
 * sending without sending an event twice; a worker SIGKILLed while its requests are at the receiver loses nothing:
 * another sends what it had claimed once the lease ends (at least once: those events come twice, and are counted).
 */
describe.skipIf(!redisUrl())('webhooks: several workers, and a worker SIGKILLed mid-send', () => {
  const procs: Proc[] = [];
  const cleanups: (() => Promise<unknown>)[] = [];
  let rx: Receiver;
  let env: Record<string, string>;
  let broadcast: () => Promise<string>;
  let finished: (id: string) => Promise<boolean>;
  /** What the sender recorded of its requests that failed, and the outbox rows of `eventIds`: what explains a duplicate. */
  let diagnosis: (eventIds?: string[]) => Promise<string>;

  const startWorker = async () => {
    const w = Proc.server({ ...env, ROLE: 'worker' });
    procs.push(w);
    await w.waitForLog('worker running', 60_000);
    return w;
  };

  beforeAll(async () => {
    const world = await broadcastWorld(BUNDLE, DEVICES, cleanups);
    rx = await startReceiver();
    cleanups.push(() => rx.close());
    env = {
      ...world.env,
      ...Object.fromEntries(Object.entries(SETTINGS).map(([k, v]) => [k, String(v)])),
      WEBHOOK_ALLOWED_ORIGINS: rx.origin,
    };
    procs.push(Proc.server({ ...env, ROLE: 'api', PORT: String(world.port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' }));
    const base = `http://127.0.0.1:${world.port}`;
    const call = async (method: string, url: string, key: string, body?: unknown) => {
      const res = await fetch(`${base}${url}`, {
        method,
        headers: { authorization: `Basic ${Buffer.from(`:${key}`).toString('base64')}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    await waitFor('the API to answer', async () => (await fetch(`${base}/ready`).catch(() => null))?.status === 200, 60_000, 100);
    const created = await call('POST', '/v6/webhooks', world.keys.write, { url: rx.url, events: ['*'] });
    expect(created.status, JSON.stringify(created.json)).toBe(201);
    broadcast = async () => {
      const res = await call('POST', '/v6/notifications', world.keys.write, { notification: { to: '*', payload: { alert: 'hooks' } } });
      expect(res.status, JSON.stringify(res.json)).toBe(201);
      return res.json.id as string;
    };
    diagnosis = async (eventIds = []) => {
      const failed = await sql`select status, error, latency_ms from webhook_attempts where status is null or status >= 300`.execute(
        world.handle.db,
      );
      const rows = await sql`
        select id, state, attempts, due_at from webhook_events
        where id = any(${[...new Set(eventIds.map((e) => e.split('.')[0]))]}::uuid[])`.execute(world.handle.db);
      const endpoint = await sql`select failures, failing_since, next_attempt_at, enabled from webhook_endpoints`.execute(world.handle.db);
      return JSON.stringify({ failed: failed.rows, rows: rows.rows, endpoint: endpoint.rows });
    };
    finished = async (id) => rx.events().some((e) => e.type === 'notification.completed' && e.data.notification_id === id);
  });
  afterAll(async () => {
    for (const p of procs) await p.stop('SIGKILL');
    for (const c of cleanups.reverse()) await c();
  });

  it('sends each event once while two workers share the sending', { timeout: 120_000 }, async () => {
    const workers = [await startWorker(), await startWorker()];
    rx.answerAlways({ status: 204, delayMs: 20 });
    const id = await broadcast();
    await waitFor(
      'every push.delivered and the completion',
      async () => (await finished(id)) && deliveredOf(rx, id).devices.size === DEVICES,
      60_000,
      200,
    );
    await new Promise((r) => setTimeout(r, 1000)); // an event sent twice would come now
    const got = deliveredOf(rx, id);
    expect(got.times.size).toBe(DEVICES);
    expect(got.duplicates, await diagnosis()).toBe(0);
    for (const w of workers) await w.stop('SIGTERM');
  });

  it('loses no event when a worker is SIGKILLed with requests at the receiver', { timeout: 120_000 }, async () => {
    rx.reset();
    // each request held 300 ms: the kill lands while some are read and not yet answered
    rx.answerAlways({ status: 204, delayMs: 300 });
    const first = await startWorker();
    const id = await broadcast();
    await waitFor('requests at the receiver', async () => (rx.requests.length > 0 && rx.pending().length > 0 ? true : null), 60_000, 1);
    first.child.kill('SIGKILL');
    const cut = rx.pending().flatMap((r) => r.events.filter((e) => e.type === 'push.delivered').map((e) => e.id));
    expect((await first.exited).signal).toBe('SIGKILL');
    expect(cut.length).toBeGreaterThan(0);

    const second = await startWorker();
    await waitFor(
      'every push.delivered and the completion',
      async () => (await finished(id)) && deliveredOf(rx, id).devices.size === DEVICES,
      90_000,
      200,
    );
    const again = await waitFor(
      'the cut requests sent again',
      async () => cut.every((e) => (deliveredOf(rx, id).times.get(e) ?? 0) >= 2) || null,
      30_000,
      200,
    ).catch(() => false);
    expect(again, await diagnosis(cut)).toBe(true);
    const got = deliveredOf(rx, id);
    console.log(
      `${got.times.size} push.delivered events for ${DEVICES} devices; ${got.duplicates} duplicates, ${cut.length} cut by the kill`,
    );
    expect(got.times.size).toBe(DEVICES);
    expect(got.duplicates).toBeGreaterThanOrEqual(cut.length);
    await second.stop('SIGTERM');
  });
});
