import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { basic, createHarness, ManualClock, type Harness } from '../helpers/harness.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';

/**
 * Quiet hours end to end, API and workers on the mock gateways, on a clock the test moves: a push due inside a
 * device's quiet hours (its own zone, else the app's default, else UTC) is held to their end, or dropped and counted.
 */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
// 22:00 UTC: 23:00 in Paris, 07:00 the next day in Tokyo, 17:00 in New York
const NOW = '2026-03-07T22:00:00Z';
const QUIET = { start: '22:00', end: '08:00' };

describe('quiet hours', () => {
  const clock = new ManualClock(new Date(NOW));
  let h: Harness;
  let gw: Gateways;
  let keys: { read: string; write: string; sdk: string };
  const received: string[] = [];

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, clock, env: { ...gw.env, SCHEDULE_POLL_MS: '20', RATE_LIMIT_SDK_PER_SECOND: '0' } });
    const created = await h.createApp('com.example.quiet');
    keys = created.keys;
    await setCredentials(h, created.app.id, gw);
    gw.apns.onAccept = gw.fcm.onAccept = (token) => received.push(token);
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });
  beforeEach(() => {
    received.length = 0;
    clock.set(NOW);
  });

  const post = (notification: Record<string, unknown>) =>
    h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      payload: { notification: { payload: { alert: 'quiet' }, ...notification } },
    });
  const read = async (id: string) =>
    (await h.server.inject({ method: 'GET', url: `/v6/notifications/${id}`, headers: { authorization: basic(keys.read) } })).json();
  const settled = (id: string) => waitFor('notification sent', async () => (await read(id)).state === 'sent', 20_000);
  const got = (...ds: RegisteredDevice[]) => waitFor('pushes', async () => ds.every((d) => received.includes(d.token)), 20_000);
  /** One device in each of Paris, Tokyo and New York, and one without a zone, all tagged `tag`. */
  const world = async (tag: string) => ({
    paris: await registerDevice(h, keys.sdk, { platform: 'ios', tags: [tag], time_zone: 'Europe/Paris' }),
    tokyo: await registerDevice(h, keys.sdk, { platform: 'android', tags: [tag], time_zone: 'Asia/Tokyo' }),
    newYork: await registerDevice(h, keys.sdk, { platform: 'ios', tags: [tag], time_zone: 'America/New_York' }),
    none: await registerDevice(h, keys.sdk, { platform: 'android', tags: [tag] }),
  });

  it('holds a push due at 23:00 in Paris to 08:00 Paris time; each zone at the end of its own night', async () => {
    const d = await world('hold');
    const res = await post({ to: [{ name: 'tags', criteria: ['hold'] }], quiet_hours: QUIET });
    expect(res.statusCode, res.body).toBe(201);
    const { id } = res.json();
    expect(res.json().notification.quiet_hours).toEqual({ ...QUIET, then: 'hold' });
    await got(d.newYork); // 17:00 there: not quiet
    await sleep(300);
    expect(received).toEqual([d.newYork.token]);
    expect(await read(id)).toMatchObject({ state: 'sending', local_time: false });

    clock.set('2026-03-07T22:59:59Z'); // 07:59:59 in Tokyo
    await sleep(300);
    expect(received).toEqual([d.newYork.token]);
    clock.set('2026-03-07T23:00:00Z'); // 08:00 in Tokyo
    await got(d.tokyo);
    clock.set('2026-03-08T06:59:00Z'); // 07:59 in Paris
    await sleep(300);
    expect(received).toHaveLength(2);
    clock.set('2026-03-08T07:00:00Z'); // 08:00 in Paris
    await got(d.paris);
    expect(received).toHaveLength(3);
    clock.set('2026-03-08T08:00:00Z'); // 08:00 UTC, the zone of a device without one (the app has no default)
    await settled(id);
    expect([...received].sort()).toEqual([d.newYork.token, d.tokyo.token, d.paris.token, d.none.token].sort());
    expect(await read(id)).toMatchObject({ devices_targeted: 4, pushes_succeeded: 4, skipped_quiet_hours: 0 });
  });

  it('drops the pushes due inside quiet hours and counts them', async () => {
    const d = await world('drop');
    const { id } = (await post({ to: [{ name: 'tags', criteria: ['drop'] }], quiet_hours: { ...QUIET, then: 'drop' } })).json();
    await settled(id);
    expect(received).toEqual([d.newYork.token]);
    expect(await read(id)).toMatchObject({ devices_targeted: 1, pushes_succeeded: 1, skipped_quiet_hours: 3 });
  });

  it('holds a local-time send due at 23:00 to 08:00 local time', async () => {
    const paris = await registerDevice(h, keys.sdk, { platform: 'ios', tags: ['local'], time_zone: 'Europe/Paris' });
    const res = await post({
      to: [{ name: 'tags', criteria: ['local'] }],
      send_at: '2026-03-08T23:00',
      local_time: true,
      quiet_hours: QUIET,
    });
    expect(res.statusCode, res.body).toBe(201);
    const { id } = res.json();
    clock.set('2026-03-08T22:00:00Z'); // 23:00 in Paris: its local time, inside its quiet hours
    await sleep(300);
    expect(received).toEqual([]);
    clock.set('2026-03-09T07:00:00Z'); // 08:00 in Paris
    await got(paris);
    clock.set('2026-03-09T20:00:00Z'); // 08:00 in the last zone (UTC-12), whose 23:00 came at 11:00 UTC
    await settled(id);
    expect(await read(id)).toMatchObject({ local_time: true, pushes_succeeded: 1, skipped_quiet_hours: 0 });
  });

  it('does not send a held push past its expiry: it is counted expired', async () => {
    const d = await world('expiry');
    const { id } = (
      await post({ to: [{ name: 'tags', criteria: ['expiry'] }], quiet_hours: QUIET, expires_at: '2026-03-07T23:30:00Z' })
    ).json();
    await got(d.newYork);
    clock.set('2026-03-07T23:00:00Z'); // Tokyo's night ends before the expiry
    await got(d.tokyo);
    clock.set('2026-03-08T08:00:00Z'); // Paris and no zone: after it
    await settled(id);
    expect([...received].sort()).toEqual([d.newYork.token, d.tokyo.token].sort());
    expect(await read(id)).toMatchObject({ pushes_succeeded: 2, pushes_expired: 2 });
  });

  it('can be canceled while it holds pushes', async () => {
    const d = await world('cancel');
    const { id } = (await post({ to: [{ name: 'tags', criteria: ['cancel'] }], quiet_hours: QUIET })).json();
    await got(d.newYork);
    const res = await h.server.inject({ method: 'DELETE', url: `/v6/notifications/${id}`, headers: { authorization: basic(keys.write) } });
    expect(res.statusCode, res.body).toBe(200);
    clock.set('2026-03-08T08:00:00Z');
    await sleep(400);
    expect(received).toEqual([d.newYork.token]);
  });

  it("applies the app's quiet hours in its default zone, to unicasts too; false and transactional sends go now", async () => {
    const app = await h.createApp('com.example.quiet-app');
    await setCredentials(h, app.app.id, gw);
    // set before the app's first notification: every process reads it then (later changes reach caches by NOTIFY)
    const set = await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setLimits(app.app.id, {
      quietHours: { ...QUIET, then: 'hold' },
      defaultTimeZone: 'Europe/Paris',
    });
    expect(set).toMatchObject({ quiet_hours: { ...QUIET, then: 'hold' }, default_time_zone: 'Europe/Paris' });
    const phone = await registerDevice(h, app.keys.sdk, { platform: 'ios' }); // no zone: Paris, 23:00
    const send = (body: Record<string, unknown>) =>
      h.server.inject({ method: 'POST', url: '/v6/notifications', headers: { authorization: basic(app.keys.write) }, payload: body });
    const to = [{ name: 'device_id', criteria: [phone.id] }];
    const held = await send({ notification: { to, payload: { alert: 'held' } } });
    expect(held.statusCode, held.body).toBe(201);
    await sleep(400);
    expect(received).toEqual([]);
    expect((await send({ notification: { to, payload: { alert: 'now' }, quiet_hours: false } })).statusCode).toBe(201);
    await waitFor('the push without quiet hours', async () => received.length === 1);
    const tx = await h.server.inject({
      method: 'POST',
      url: '/v6/transactional/notifications',
      headers: { authorization: basic(app.keys.write) },
      payload: { to: { field: 'device_id', value: phone.id }, group: 'login-code', notification: { payload: { alert: '123456' } } },
    });
    expect(tx.json().results).toMatchObject({ success: 1 });
    expect(received).toEqual([phone.token, phone.token]);
    clock.set('2026-03-08T07:00:00Z'); // 08:00 in Paris
    await waitFor('the held push', async () => received.length === 3);
    expect(received).toEqual([phone.token, phone.token, phone.token]);
  });

  it("holds a unicast by the app's quiet hours in the device's own zone, also one Intl lists under another name", async () => {
    const app = await h.createApp('com.example.quiet-zones');
    await setCredentials(h, app.app.id, gw);
    // the default zone is at 17:00, out of quiet hours: only the device's own zone holds the push
    await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setLimits(app.app.id, {
      quietHours: { ...QUIET, then: 'hold' },
      defaultTimeZone: 'America/New_York',
    });
    const kolkata = await registerDevice(h, app.keys.sdk, { platform: 'ios', time_zone: 'Asia/Kolkata' }); // 03:30
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(app.keys.write) },
      payload: { notification: { to: [{ name: 'device_id', criteria: [kolkata.id] }], payload: { alert: 'held' } } },
    });
    expect(res.statusCode, res.body).toBe(201);
    await sleep(400);
    clock.set('2026-03-08T02:29:00Z');
    await sleep(400);
    expect(received).toEqual([]);
    clock.set('2026-03-08T02:31:00Z'); // 08:01 in Kolkata
    await waitFor('the held push', async () => received.includes(kolkata.token));
  });

  it('refuses a malformed window, naming the field', async () => {
    for (const [quiet, error] of [
      [{ start: '22:00' }, /^notification\.quiet_hours\.end: must be a time of day/],
      [{ start: '24:00', end: '08:00' }, /^notification\.quiet_hours\.start: must be a time of day, HH:MM/],
      [{ start: '22:00', end: '22:00' }, /^notification\.quiet_hours\.end: must differ from start/],
      [{ ...QUIET, then: 'later' }, /^notification\.quiet_hours\.then: must be "hold" or "drop"/],
      ['22-08', /^notification\.quiet_hours: must be \{"start"/],
    ] as const) {
      const res = await post({ to: '*', quiet_hours: quiet });
      expect(res.statusCode, JSON.stringify(quiet)).toBe(400);
      expect(res.json().error).toMatch(error);
    }
  });
});
