import { sql } from 'kysely';
import { createRepositories } from '../../src/services/deps.js';
import { releaseBestTimeWaves } from '../../src/delivery/best-time.js';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Lifecycle, startPushd } from '../../src/app/start.js';
import { loadConfig } from '../../src/platform/config.js';
import { createLogger } from '../../src/platform/logger.js';
import { TEST_SECRETS_KEY } from '../engines/secrets-key.js';
import { AppService } from '../../src/services/apps.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { basic, createHarness, ManualClock, type Harness } from '../helpers/harness.js';

/**
 * A notification sent at each device's best time (`send_at: "best_time"`), end to end: API, workers, the mock
 * gateways. Each device's hour comes from its own sessions (stored at chosen times), as a journey's delay until the
 * best time takes it; the waves are released on a clock the test moves.
 */
const POLL = { SCHEDULE_POLL_MS: '20', RATE_LIMIT_SDK_PER_SECOND: '0' };
const T0 = '2026-06-10T10:30:00Z';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('best-time sends', () => {
  const clock = new ManualClock(new Date(T0));
  let h: Harness;
  let gw: Gateways;
  let appId: string;
  let keys: { read: string; write: string; sdk: string };
  const received: string[] = [];
  /** when each push reached a gateway, in real time */
  const arrivals: number[] = [];

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, clock, env: { ...gw.env, ...POLL } });
    const created = await h.createApp('com.example.besttime');
    appId = created.app.id;
    keys = created.keys;
    await setCredentials(h, appId, gw);
    gw.apns.onAccept = gw.fcm.onAccept = (token) => {
      received.push(token);
      arrivals.push(Date.now());
    };
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });
  beforeEach(() => {
    received.length = arrivals.length = 0;
    clock.set(T0);
  });

  const post = (notification: Record<string, unknown>) =>
    h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      payload: { notification: { payload: { alert: 'at your hour' }, ...notification } },
    });
  const read = async (id: string) =>
    (await h.server.inject({ method: 'GET', url: `/v6/notifications/${id}`, headers: { authorization: basic(keys.read) } })).json();
  const device = (tag: string, extra: Record<string, unknown> = {}) =>
    registerDevice(h, keys.sdk, { platform: Math.random() < 0.5 ? 'ios' : 'android', tags: [tag], ...extra });
  /** A session as a report stores it, at a chosen instant. */
  const sessions = async (d: RegisteredDevice, ...at: string[]) => {
    for (const startedAt of at)
      await h.db.db
        .insertInto('app_sessions')
        .values({ device_id: d.id, id: randomUUID(), app_id: appId, started_at: new Date(startedAt) })
        .execute();
  };
  /** Moves the clock to `at` and checks what the gateways have received by then. */
  const step = async (at: string, expected: RegisteredDevice[]) => {
    clock.set(at);
    const want = expected.map((d) => d.token).sort();
    await waitFor(`the pushes due at ${at}`, async () => received.length >= want.length, 10_000, 20);
    await sleep(200); // many polls: nothing more comes
    expect([...received].sort()).toEqual(want);
  };

  it('sends each device at its own best hour, one wave per hour, the device without history at the default hour', async () => {
    // mostly at 19:xx UTC, once at 08:xx
    const evening = await device('best');
    await sessions(evening, '2026-06-05T19:10:00Z', '2026-06-07T19:40:00Z', '2026-06-08T19:05:00Z', '2026-06-09T08:15:00Z');
    // in Berlin (UTC+2 in June), mornings at 07:xx local
    const morning = await device('best', { time_zone: 'Europe/Berlin' });
    await sessions(morning, '2026-06-06T05:20:00Z', '2026-06-08T05:45:00Z');
    // none in the last four weeks: 10:00 in its zone (UTC), and T0 is past today's
    const fresh = await device('best');
    await sessions(fresh, '2026-05-01T15:00:00Z');

    const res = await post({ to: [{ name: 'tags', criteria: ['best'] }], send_at: 'best_time' });
    expect(res.statusCode, res.body).toBe(201);
    const { id } = res.json();
    await waitFor('its waves cut', async () => (await read(id)).estimated_finish_at !== null, 10_000, 20);
    // its record: the submitted "best_time", and the first and last wave it was cut into
    expect(await read(id)).toMatchObject({
      state: 'scheduled',
      devices_targeted: 3,
      pushes_succeeded: 0,
      notification: { send_at: 'best_time' },
      send_at: '2026-06-10T19:00:00.000Z',
      estimated_finish_at: '2026-06-11T10:00:00.000Z',
    });
    // the waves are stored with the batches: one instant each, whatever a restart does
    const waves = await h.db.db
      .selectFrom('delivery_batches')
      .select(['not_before', 'device_ids'])
      .where('notification_id', '=', id)
      .orderBy('not_before')
      .execute();
    expect(waves.map((w) => [w.not_before?.toISOString(), w.device_ids])).toEqual([
      ['2026-06-10T19:00:00.000Z', [evening.id]],
      ['2026-06-11T05:00:00.000Z', [morning.id]],
      ['2026-06-11T10:00:00.000Z', [fresh.id]],
    ]);

    await step('2026-06-10T18:59:59Z', []);
    await step('2026-06-10T19:00:00Z', [evening]);
    expect((await read(id)).state).toBe('sending');
    await step('2026-06-11T04:59:00Z', [evening]);
    await step('2026-06-11T05:00:00Z', [evening, morning]);
    await step('2026-06-11T10:00:00Z', [evening, morning, fresh]);
    await waitFor('sent', async () => (await read(id)).state === 'sent', 10_000, 20);
    expect(await read(id)).toMatchObject({ state: 'sent', devices_targeted: 3, pushes_succeeded: 3, estimated_finish_at: null });
  });

  it('a cancel between waves stops the waves not yet sent', async () => {
    const early = await device('cancel');
    await sessions(early, '2026-06-08T12:10:00Z', '2026-06-09T12:50:00Z');
    const late = await device('cancel'); // no history: 10:00 tomorrow
    // to devices named by id: not cut at creation as a unicast is, but waved as a broadcast
    const res = await post({ to: [{ name: 'device_id', criteria: [early.id, late.id] }], send_at: 'best_time' });
    expect(res.statusCode, res.body).toBe(201);
    const { id } = res.json();
    await waitFor('its waves cut', async () => (await read(id)).devices_targeted === 2, 10_000, 20);
    await step('2026-06-10T12:00:00Z', [early]);
    const canceled = await h.server.inject({
      method: 'DELETE',
      url: `/v6/notifications/${id}`,
      headers: { authorization: basic(keys.write) },
    });
    expect(canceled.statusCode, canceled.body).toBe(200);
    await step('2026-06-11T10:00:00Z', [early]);
    await step('2026-06-11T12:00:00Z', [early]);
    expect(await read(id)).toMatchObject({ state: 'canceled', pushes_succeeded: 1 });
    // the wave never released is closed with the notification, not left pending
    const batches = await sql<{ state: string }>`
      select state from delivery_batches where notification_id = ${id}::uuid order by seq`.execute(h.db.db);
    expect(batches.rows.map((b) => b.state)).toEqual(['done', 'canceled']);
  });

  it('a release takes only the batches still held: one released before is not paced or queued again', async () => {
    const devices = await Promise.all(Array.from({ length: 3 }, () => device('again'))); // no history: 10:00 tomorrow
    const { id } = (await post({ to: [{ name: 'tags', criteria: ['again'] }], send_at: 'best_time' })).json();
    await waitFor('its waves cut', async () => (await read(id)).devices_targeted === devices.length, 10_000, 20);
    const n = await h.db.db.selectFrom('notifications').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    const repos = createRepositories();
    const deps = {
      db: h.db.db,
      batches: repos.batches,
      notifications: repos.notifications,
      fanout: repos.fanout,
      log: createLogger('silent'),
    };
    const wave = { now: new Date('2026-06-11T10:00:00Z'), appPerMinute: 600 };
    const enqueued: string[] = [];
    // this test's own release, as the due poller's fan-out job would run it, with a queue that only records
    await releaseBestTimeWaves(deps, n, wave, async (b) => enqueued.push(b.id));
    const first = enqueued.length;
    expect(first).toBeGreaterThan(0);
    // again, its batches still pending (not sent): nothing is queued or paced a second time
    await releaseBestTimeWaves(deps, { ...n, wave: n.wave + 1 }, wave, async (b) => enqueued.push(b.id));
    expect(enqueued).toHaveLength(first);
    const held = await sql<{ held: boolean }>`select held from delivery_batches where notification_id = ${id}::uuid`.execute(h.db.db);
    expect(held.rows.every((b) => !b.held)).toBe(true);
    await h.server.inject({ method: 'DELETE', url: `/v6/notifications/${id}`, headers: { authorization: basic(keys.write) } });
  });

  it("holds the app's ceiling within a wave: its batches start at the app's pace from their hour", async () => {
    const devices = await Promise.all(Array.from({ length: 6 }, () => device('ceiling'))); // no history: 10:00 tomorrow
    await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setLimits(appId, { maxPerMinute: 120 }); // 2 a second: batches of 2
    try {
      const { id } = (await post({ to: [{ name: 'tags', criteria: ['ceiling'] }], send_at: 'best_time' })).json();
      await waitFor('its waves cut', async () => (await read(id)).devices_targeted === 6, 10_000, 20);
      clock.set('2026-06-11T10:00:00Z');
      clock.run(); // pacing is real time
      await waitFor('the wave', async () => received.length === 6, 15_000, 20);
      expect([...received].sort()).toEqual(devices.map((d) => d.token).sort());
      const at = [...arrivals].sort((x, y) => x - y);
      // three batches a second apart: the last starts two seconds after the first
      expect(at.at(-1)! - at[0]!).toBeGreaterThanOrEqual(1800);
    } finally {
      await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setLimits(appId, { maxPerMinute: null });
    }
  });

  it('refuses best_time with another timing, a pace, an A/B test or one expiry, naming the field', async () => {
    const to = [{ name: 'tags', criteria: ['nobody'] }];
    for (const [extra, error] of [
      [{ local_time: true }, 'notification.local_time: cannot be combined with send_at: "best_time"'],
      [{ throttle: { per_minute: 100 } }, 'notification.throttle: cannot be combined with send_at: "best_time"'],
      [{ ttl: 3600 }, 'notification.ttl: cannot be combined with send_at: "best_time"'],
      [{ expires_at: '2026-06-12T00:00:00Z' }, 'notification.expires_at: cannot be combined with send_at: "best_time"'],
      [
        { payload: undefined, variants: [{ payload: { alert: 'a' } }, { payload: { alert: 'b' } }], test_fraction: 0.5, winner: 'manual' },
        'notification.variants: cannot be combined with send_at: "best_time"',
      ],
    ] as const) {
      const res = await post({ to, send_at: 'best_time', ...extra });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ error: error });
    }
    const message = await h.server.inject({
      method: 'POST',
      url: '/v6/messages',
      headers: { authorization: basic(keys.write) },
      payload: { message: { to, title: 'hi', send_at: 'best_time' } },
    });
    expect(message.statusCode, message.body).toBe(400);
    expect(message.json().error).toMatch(/^message\.send_at: /);
    const transactional = await h.server.inject({
      method: 'POST',
      url: '/v6/transactional/notifications',
      headers: { authorization: basic(keys.write) },
      payload: {
        to: { field: 'device_id', value: randomUUID() },
        group: 'otp',
        notification: { payload: { alert: 'x' }, send_at: 'best_time' },
      },
    });
    expect(transactional.statusCode, transactional.body).toBe(400);
    expect(transactional.json().error).toMatch(/send_at/);
  });
});

describe('a best-time send across a restart of its workers', () => {
  const clock = new ManualClock(new Date(T0));
  let gw: Gateways;
  let h: Harness;
  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: false, clock, env: { ...gw.env, ...POLL } }); // the API alone
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });
  const worker = async () => {
    const lifecycle = new Lifecycle();
    const env = { ...gw.env, ...POLL, ROLE: 'worker', DATABASE_URL: h.databaseUrl, SECRETS_KEY: TEST_SECRETS_KEY };
    await startPushd(loadConfig({ ...env, QUEUE_PREFIX: h.queuePrefix, LOG_LEVEL: 'silent' }), createLogger('silent'), lifecycle, {
      clock,
    });
    return lifecycle;
  };

  it('keeps its waves: a worker started after one stopped sends each device at the hour cut before', async () => {
    const { app, keys } = await h.createApp('com.example.besttime-restart');
    await setCredentials(h, app.id, gw);
    const d = await registerDevice(h, keys.sdk, { platform: 'ios' });
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      payload: { notification: { to: '*', payload: { alert: 'later' }, send_at: 'best_time' } },
    });
    expect(res.statusCode, res.body).toBe(201);
    const { id } = res.json();
    const first = await worker();
    const batch = () => h.db.db.selectFrom('delivery_batches').select('not_before').where('notification_id', '=', id).execute();
    await waitFor('its waves cut', async () => (await batch()).length === 1, 10_000, 20);
    await first.close(createLogger('silent'));
    // no history: 10:00 tomorrow; a session after the cut moves nothing, the wave is stored
    expect((await batch())[0]!.not_before?.toISOString()).toBe('2026-06-11T10:00:00.000Z');
    await h.db.db
      .insertInto('app_sessions')
      .values({ device_id: d.id, id: randomUUID(), app_id: app.id, started_at: new Date('2026-06-10T09:00:00Z') })
      .execute();
    clock.set('2026-06-11T11:00:00Z'); // due an hour ago, no worker was there
    const second = await worker();
    try {
      await waitFor('the push', async () => gw.apns.pushes.length > 0, 20_000);
      expect(gw.apns.pushes.map((p) => p.token)).toEqual([d.token]);
      await waitFor('sent', async () => (await batch()).length === 1 && (await storedState(h, id)) === 'sent', 10_000, 20);
    } finally {
      await second.close(createLogger('silent'));
    }
  });
});

async function storedState(h: Harness, id: string): Promise<string | undefined> {
  return (await h.db.db.selectFrom('notifications').select('state').where('id', '=', id).executeTakeFirst())?.state;
}
