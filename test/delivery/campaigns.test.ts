import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Lifecycle, startPushd } from '../../src/app/start.js';
import { loadConfig } from '../../src/platform/config.js';
import { createLogger } from '../../src/platform/logger.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { basic, createHarness, ManualClock, type Harness } from '../helpers/harness.js';
import { TEST_SECRETS_KEY } from '../engines/secrets-key.js';

/**
 * Campaign control end to end, API and workers on the mock gateways: send later, at each device's local time,
 * at a pace; cancel. Schedules run on a clock the test moves (no waiting for the calendar); pacing is measured in
 * real time at the gateways.
 */
const POLL = { SCHEDULE_POLL_MS: '20', RATE_LIMIT_SDK_PER_SECOND: '0' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('campaign control', () => {
  const clock = new ManualClock(new Date('2026-03-07T12:45:00Z'));
  let h: Harness;
  let gw: Gateways;
  let appId: string;
  let keys: { read: string; write: string; sdk: string };
  const received: { token: string; at: number }[] = [];

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, clock, env: { ...gw.env, ...POLL } });
    const created = await h.createApp('com.example.campaigns');
    appId = created.app.id;
    keys = created.keys;
    await setCredentials(h, appId, gw);
    gw.apns.onAccept = gw.fcm.onAccept = (token) => received.push({ token, at: Date.now() });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });
  beforeEach(() => {
    received.length = 0;
    clock.set('2026-03-07T12:45:00Z');
  });

  const post = (notification: Record<string, unknown>) =>
    h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      payload: { notification: { payload: { alert: 'campaign' }, ...notification } },
    });
  const read = async (id: string) =>
    (await h.server.inject({ method: 'GET', url: `/v6/notifications/${id}`, headers: { authorization: basic(keys.read) } })).json();
  const cancel = (id: string, key = keys.write) =>
    h.server.inject({ method: 'DELETE', url: `/v6/notifications/${id}`, headers: { authorization: basic(key) } });
  const tagged = async (tag: string, count: number, extra: Record<string, unknown> = {}) => {
    const devices: RegisteredDevice[] = [];
    for (let i = 0; i < count; i++)
      devices.push(await registerDevice(h, keys.sdk, { platform: i % 2 ? 'android' : 'ios', tags: [tag], ...extra }));
    return devices;
  };
  const tokens = () => received.map((r) => r.token).sort();
  const settled = (id: string, state = 'sent') => waitFor(`notification ${state}`, async () => (await read(id)).state === state, 20_000);

  it('refuses a send time in the past, beyond a year, or of the wrong form, naming the field', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ send_at: '2026-03-07T12:00:00Z' }, /^notification\.send_at: is in the past/],
      [{ send_at: '2027-06-01T00:00:00Z' }, /^notification\.send_at: is more than a year ahead/],
      [{ send_at: '2026-03-08T09:00' }, /^notification\.send_at: must be an ISO 8601 date-time with an offset/],
      [{ send_at: '2026-03-08T09:00:00+01:00', local_time: true }, /^notification\.send_at: with local_time must be a wall time/],
      [{ local_time: true }, /^notification\.send_at: is required with local_time/],
      [{ send_at: 'tomorrow' }, /^notification\.send_at/],
      [{ send_at: 12 }, /^notification\.send_at/],
      [{ throttle: { per_minute: 0 } }, /^notification\.throttle\.per_minute/],
      [{ throttle: 10 }, /^notification\.throttle/],
      [{ send_at: '2026-03-08T09:00', local_time: true, ttl: 3600 }, /^notification\.ttl: cannot be combined with local_time/],
    ];
    for (const [fields, error] of cases) {
      const res = await post({ to: '*', ...fields });
      expect(res.statusCode, JSON.stringify(fields)).toBe(400);
      expect(res.json().error).toMatch(error);
    }
    const list = await h.server.inject({ method: 'GET', url: '/v6/notifications', headers: { authorization: basic(keys.read) } });
    expect(list.json().notifications).toEqual([]); // nothing stored
  });

  it('sends later: stored scheduled, listed by state, and delivered when the clock reaches send_at', async () => {
    const devices = await tagged('later', 2);
    const res = await post({ to: [{ name: 'tags', criteria: ['later'] }], send_at: '2026-03-07T14:00:00+01:00' });
    expect(res.statusCode, res.body).toBe(201);
    const { id } = res.json();
    expect(res.json().state).toBe('scheduled');
    expect(await read(id)).toMatchObject({
      state: 'scheduled',
      send_at: '2026-03-07T13:00:00.000Z',
      estimated_finish_at: '2026-03-07T13:00:00.000Z',
    });
    const scheduled = await h.server.inject({
      method: 'GET',
      url: '/v6/notifications?state=scheduled',
      headers: { authorization: basic(keys.read) },
    });
    expect(scheduled.json().notifications.map((n: { id: string }) => n.id)).toEqual([id]);

    await sleep(300); // many polls: not due yet
    expect(received).toEqual([]);
    clock.set('2026-03-07T12:59:59Z');
    await sleep(200);
    expect(received).toEqual([]);
    clock.set('2026-03-07T13:00:00Z');
    await settled(id);
    expect(tokens()).toEqual(devices.map((d) => d.token).sort());
    expect(await read(id)).toMatchObject({ state: 'sent', devices_targeted: 2, pushes_succeeded: 2, estimated_finish_at: null });
    clock.set('2026-03-07T12:45:00Z');
  });

  it('counts a ttl from send_at for a scheduled notification', async () => {
    const res = await post({ to: '*', send_at: '2026-03-07T15:00:00Z', ttl: 600 });
    expect(res.statusCode, res.body).toBe(201);
    expect(await read(res.json().id)).toMatchObject({ send_at: '2026-03-07T15:00:00.000Z', expires_at: '2026-03-07T15:10:00.000Z' });
    expect((await cancel(res.json().id)).statusCode).toBe(200);
  });

  it('cancels a scheduled notification: it never goes out; a finished one answers 409', async () => {
    await tagged('canceled', 1);
    const { id } = (await post({ to: [{ name: 'tags', criteria: ['canceled'] }], send_at: '2026-03-07T13:30:00Z' })).json();
    expect((await cancel(id, keys.read)).statusCode).toBe(403);
    const res = await cancel(id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ id, state: 'canceled', canceled_at: expect.any(String) });
    clock.set('2026-03-07T14:00:00Z');
    await sleep(300);
    expect(received).toEqual([]);
    expect(await read(id)).toMatchObject({ state: 'canceled', pushes_succeeded: 0 });
    const again = await cancel(id);
    expect(again.statusCode).toBe(409);
    expect(again.json().error).toMatch(/^notification: it is canceled/);
    expect((await cancel('00000000-0000-4000-8000-000000000000')).statusCode).toBe(404);
    clock.set('2026-03-07T12:45:00Z');

    const sent = (await post({ to: [{ name: 'tags', criteria: ['canceled'] }] })).json();
    await settled(sent.id);
    expect((await cancel(sent.id)).statusCode).toBe(409);
  });

  it('paces a notification: its pushes spread evenly at per_minute, within 10 %', async () => {
    clock.run(); // pacing is real time
    const devices = await tagged('paced', 200);
    const tokenOf = new Map(devices.map((d) => [d.id, d.token]));
    // 3,000 a minute (50 a second): batches of at most 50, each starting when the ones before it have had their time
    const { id } = (await post({ to: [{ name: 'tags', criteria: ['paced'] }], throttle: { per_minute: 3000 } })).json();
    await settled(id);
    expect(received).toHaveLength(devices.length);
    const arrival = new Map(received.map((r) => [r.token, r.at]));
    const batches = await h.db.db
      .selectFrom('delivery_batches')
      .select(['device_ids', 'not_before'])
      .where('notification_id', '=', id)
      .orderBy('seq')
      .execute();
    expect(Math.max(...batches.map((b) => b.device_ids.length))).toBeLessThanOrEqual(50);
    // when each batch's first push reached the gateway, in the order their starts were reserved
    const starts = batches.map((b) => Math.min(...b.device_ids.map((d) => arrival.get(tokenOf.get(d)!)!)));
    const last = batches.length - 1;
    const reserved = batches.map((b) => b.not_before!.getTime());
    const clockAhead = clock.now().getTime() - Date.now(); // the test clock runs at real speed from its own start
    // the pushes before the last batch, from the first one's reserved start to the last one's start: the rate asked,
    // within 10 % (a first batch a busy machine started late does not make the rate look faster)
    const rate = ((200 - batches[last]!.device_ids.length) / (starts[last]! + clockAhead - reserved[0]!)) * 60_000;
    expect(rate).toBeGreaterThanOrEqual(3000 * 0.9);
    expect(rate).toBeLessThanOrEqual(3000 * 1.1);
    // and evenly: each batch's start is reserved its predecessor's share of time after it (20 ms a push), and no
    // batch goes before its reserved start (one a busy machine started late does not make the next one early)
    for (let i = 1; i <= last; i++) expect(reserved[i]! - reserved[i - 1]!).toBe(batches[i - 1]!.device_ids.length * 20);
    for (let i = 0; i <= last; i++) expect(starts[i]! + clockAhead).toBeGreaterThanOrEqual(reserved[i]! - 5);
    expect(await read(id)).toMatchObject({ throttle: { per_minute: 3000 }, pushes_succeeded: 200 });
  });

  it("holds the app's ceiling across its notifications", async () => {
    clock.run(); // pacing is real time
    await tagged('ceiling-a', 50);
    await tagged('ceiling-b', 50);
    await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setLimits(appId, { maxPerMinute: 3000 });
    try {
      const a = (await post({ to: [{ name: 'tags', criteria: ['ceiling-a'] }] })).json();
      const b = (await post({ to: [{ name: 'tags', criteria: ['ceiling-b'] }] })).json();
      await settled(a.id);
      await settled(b.id);
      const at = received.map((r) => r.at).sort((x, y) => x - y);
      expect(at).toHaveLength(100);
      // 100 pushes at 50 a second: the second batch of 50 starts a second after the first
      expect(at.at(-1)! - at[0]!).toBeGreaterThanOrEqual(900);
    } finally {
      await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setLimits(appId, { maxPerMinute: null });
    }
  });

  it('cancels mid-send: no batch starts after, what went out is counted, it ends canceled', async () => {
    clock.run(); // pacing is real time
    await tagged('midsend', 40);
    // 600 a minute: batches of 10, one a second
    const { id } = (await post({ to: [{ name: 'tags', criteria: ['midsend'] }], throttle: { per_minute: 600 } })).json();
    await waitFor('the first batch', async () => received.length >= 10, 10_000, 10);
    const res = await cancel(id);
    expect(res.statusCode).toBe(200);
    await sleep(3500); // the batches paced after the cancel come due meanwhile
    const n = await read(id);
    expect(n.state).toBe('canceled');
    expect(received.length).toBeLessThan(40);
    expect(n.pushes_succeeded).toBe(received.length);
    expect(n.devices_targeted).toBe(40);
  });

  it("sends at each device's local time, one wave per instant, across a DST change; zones already past are skipped", async () => {
    // 2026-03-08 02:30 does not exist in New York (clocks go 02:00 -> 03:00): it goes out at 03:30 EDT (07:30Z)
    const zoned = {
      sydney: await tagged('local', 1, { time_zone: 'Australia/Sydney' }), // AEDT +11: 2026-03-07T15:30Z
      berlin: await tagged('local', 1, { time_zone: 'Europe/Berlin' }), // CET +1: 2026-03-08T01:30Z
      none: await tagged('local', 1), // the app's default zone: UTC, 02:30Z
      newYork: await tagged('local', 1, { time_zone: 'America/New_York' }), // the gap: 07:30Z
      kiritimati: await tagged('local', 1, { time_zone: 'Pacific/Kiritimati' }), // +14: 12:30Z on the 7th, already past
    };
    const res = await post({ to: [{ name: 'tags', criteria: ['local'] }], send_at: '2026-03-08T02:30', local_time: true });
    expect(res.statusCode, res.body).toBe(201);
    const { id } = res.json();
    // planned over every zone: the first wave is the first zone to reach 02:30 (+13, Auckland), devices there or not
    expect(await read(id)).toMatchObject({ state: 'scheduled', local_time: true, send_at: '2026-03-07T13:30:00.000Z' });

    const step = async (at: string, expected: RegisteredDevice[]) => {
      clock.set(at);
      const want = expected.map((d) => d.token).sort();
      await waitFor(`the pushes due at ${at}`, async () => received.length >= want.length, 10_000, 20);
      await sleep(150);
      expect(tokens()).toEqual(want);
    };
    await step('2026-03-07T15:29:00Z', []);
    await step('2026-03-07T15:30:00Z', [...zoned.sydney]);
    await step('2026-03-08T01:29:59Z', [...zoned.sydney]);
    await step('2026-03-08T01:30:00Z', [...zoned.sydney, ...zoned.berlin]);
    await step('2026-03-08T02:30:00Z', [...zoned.sydney, ...zoned.berlin, ...zoned.none]);
    expect((await read(id)).state).toBe('sending');
    await step('2026-03-08T07:29:00Z', [...zoned.sydney, ...zoned.berlin, ...zoned.none]);
    await step('2026-03-08T07:30:00Z', [...zoned.sydney, ...zoned.berlin, ...zoned.none, ...zoned.newYork]);
    expect((await read(id)).state).toBe('sending'); // zones further west (-11, -12) are still to come
    clock.set('2026-03-08T14:30:00Z'); // past the last zone's 02:30
    await settled(id);
    expect(tokens()).toHaveLength(4);
    expect(await read(id)).toMatchObject({ state: 'sent', devices_targeted: 4, pushes_succeeded: 4, skipped_past_local_time: 1 });
    clock.set('2026-03-07T12:45:00Z');
  });
});

describe('a scheduled notification due while no worker ran', () => {
  const clock = new ManualClock(new Date('2026-05-01T08:00:00Z'));
  let gw: Gateways;
  let h: Harness;
  const lifecycle = new Lifecycle();
  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: false, clock, env: { ...gw.env, ...POLL } }); // the API alone
  });
  afterAll(async () => {
    await lifecycle.close(createLogger('silent'));
    await h?.close();
    await gw?.close();
  });

  it('goes out when a worker comes back', async () => {
    const { app, keys } = await h.createApp('com.example.downtime');
    await setCredentials(h, app.id, gw);
    const device = await registerDevice(h, keys.sdk, { platform: 'ios' });
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      payload: { notification: { to: '*', payload: { alert: 'morning' }, send_at: '2026-05-01T09:00:00Z' } },
    });
    expect(res.statusCode).toBe(201);
    clock.set('2026-05-01T11:00:00Z'); // due two hours ago, nobody was there

    const config = loadConfig({
      ...gw.env,
      ...POLL,
      ROLE: 'worker',
      DATABASE_URL: h.databaseUrl,
      SECRETS_KEY: TEST_SECRETS_KEY,
      QUEUE_PREFIX: h.queuePrefix,
      LOG_LEVEL: 'silent',
    });
    await startPushd(config, createLogger('silent'), lifecycle, { clock });
    await waitFor('the push', async () => gw.apns.pushes.length > 0, 20_000);
    expect(gw.apns.pushes.map((p) => p.token)).toEqual([device.token]);
  });
});
