import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { basic, createHarness, ManualClock, type Harness } from '../helpers/harness.js';

/**
 * Devices that reported `notifications_allowed: Disabled` get no visible push (alert, title, subtitle, badge or
 * sound) on any delivery path, and are counted in `devices_not_allowed`; a background push (content_available,
 * nothing shown) still reaches them; devices that said Enabled or never said (Unknown) get both. API and workers
 * on the mock gateways; fan-out pages of one device, so that pages holding only a Disabled device come up.
 */
describe('devices whose notifications are Disabled', () => {
  const clock = new ManualClock(new Date('2026-03-07T12:45:00Z'));
  let h: Harness;
  let gw: Gateways;
  let keys: { read: string; write: string; sdk: string };
  const received: string[] = [];

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({
      workers: true,
      clock,
      env: { ...gw.env, SCHEDULE_POLL_MS: '20', RATE_LIMIT_SDK_PER_SECOND: '0', FANOUT_PAGE_SIZE: '1', DELIVERY_BATCH_SIZE: '1' },
    });
    const created = await h.createApp('com.example.not-allowed');
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
    clock.set('2026-03-07T12:45:00Z');
  });

  let group = 0;
  /** Devices of one user and tag: four Disabled (one said `false`), one Enabled, one Unknown, one that never said. */
  const devices = async (extra: Record<string, unknown> = {}) => {
    const tag = `t${++group}`;
    const one = (platform: 'ios' | 'android', allowed?: unknown) =>
      registerDevice(h, keys.sdk, {
        platform,
        tags: [tag],
        user_id: tag,
        ...(allowed === undefined ? {} : { notifications_allowed: allowed }),
        ...extra,
      });
    const disabled = [
      await one('ios', 'Disabled'),
      await one('android', 'Disabled'),
      await one('ios', false),
      await one('android', 'Disabled'),
    ];
    const allowed = [await one('ios', 'Enabled'), await one('android', 'Unknown'), await one('android')];
    return { tag, disabled, allowed, all: [...disabled, ...allowed] };
  };
  const tokens = (list: RegisteredDevice[]) => list.map((d) => d.token).sort();
  const get = async (url: string) => (await h.server.inject({ method: 'GET', url, headers: { authorization: basic(keys.read) } })).json();
  const post = (url: string, payload: Record<string, unknown>, headers: Record<string, string> = {}) =>
    h.server.inject({ method: 'POST', url, headers: { authorization: basic(keys.write), ...headers }, payload });
  const finished = (id: string) =>
    waitFor(`notification ${id} finished`, async () => {
      const n = await get(`/v6/notifications/${id}`);
      return n.state === 'sent' || n.state === 'failed' ? n : null;
    });
  /** The tokens that received pushes once the notification finished (and a moment for stray ones). */
  const deliveredBy = async (id: string) => {
    const n = await finished(id);
    await new Promise((r) => setTimeout(r, 100));
    return { n, tokens: [...received].sort() };
  };

  const ALERT = { alert: 'Your order has shipped' };
  const BACKGROUND = { content_available: true, order: 'o-1' };

  it('a broadcast (fan-out): Disabled devices get no alert and are counted; a background push reaches them', async () => {
    const d = await devices();
    const res = await post('/v6/notifications', { notification: { to: [{ name: 'tags', criteria: [d.tag] }], payload: ALERT } });
    expect(res.statusCode, res.body).toBe(201);
    const { id, to } = res.json();
    const alert = await deliveredBy(id);
    expect(alert.tokens).toEqual(tokens(d.allowed));
    expect(alert.n).toMatchObject({ state: 'sent', devices_targeted: 3, devices_not_allowed: 4, pushes_succeeded: 3 });
    expect(await get(`/v6/stats/notifications/${id}/events`)).toMatchObject({ pushes_succeeded: 3, devices_not_allowed: 4 });
    // the audience counts every device it matches, whatever they allow
    expect((await get(`/v6/audiences/${to.id}`)).audience.device_count).toBe(7);

    received.length = 0;
    const again = await post('/v6/notifications', { notification: { to: [{ name: 'tags', criteria: [d.tag] }], payload: BACKGROUND } });
    const background = await deliveredBy(again.json().id);
    expect(background.tokens).toEqual(tokens(d.all));
    expect(background.n).toMatchObject({ devices_targeted: 7, devices_not_allowed: 0, pushes_succeeded: 7 });
  });

  it.each([
    ['a badge', { badge: 3 }],
    ['a sound', { sound: 'default', content_available: true }],
    ['a title', { title: 'Hello' }],
  ])('a push that shows %s is visible', async (_what, payload) => {
    const d = await devices();
    const res = await post('/v6/notifications', { notification: { to: [{ name: 'tags', criteria: [d.tag] }], payload } });
    const { n, tokens: got } = await deliveredBy(res.json().id);
    expect(got).toEqual(tokens(d.allowed));
    expect(n).toMatchObject({ devices_targeted: 3, devices_not_allowed: 4 });
  });

  it('a paced broadcast (fan-out with reservations) leaves them out too', async () => {
    const d = await devices();
    const res = await post('/v6/notifications', {
      notification: { to: [{ name: 'tags', criteria: [d.tag] }], payload: ALERT, throttle: { per_minute: 600_000 } },
    });
    const { n, tokens: got } = await deliveredBy(res.json().id);
    expect(got).toEqual(tokens(d.allowed));
    expect(n).toMatchObject({ devices_targeted: 3, devices_not_allowed: 4 });
  });

  it('a small audience sent directly (a unicast group, and one created alone with an Idempotency-Key)', async () => {
    for (const idempotent of [false, true]) {
      const key = (name: string): Record<string, string> => (idempotent ? { 'idempotency-key': `${name}-${group}` } : {});
      const d = await devices();
      received.length = 0;
      const res = await post(
        '/v6/notifications',
        { notification: { to: [{ name: 'user_id', criteria: [d.tag] }], payload: ALERT } },
        key('alert'),
      );
      expect(res.statusCode, res.body).toBe(201);
      const { n, tokens: got } = await deliveredBy(res.json().id);
      expect(got).toEqual(tokens(d.allowed));
      expect(n).toMatchObject({ devices_targeted: 3, devices_not_allowed: 4, pushes_succeeded: 3 });

      received.length = 0;
      const bg = await post(
        '/v6/notifications',
        { notification: { to: [{ name: 'user_id', criteria: [d.tag] }], payload: BACKGROUND } },
        key('bg'),
      );
      const background = await deliveredBy(bg.json().id);
      expect(background.tokens).toEqual(tokens(d.all));
      expect(background.n).toMatchObject({ devices_targeted: 7, devices_not_allowed: 0 });
    }
  });

  it('a transactional send (grouped, with an Idempotency-Key, with a collapse_key) answers them as not_allowed', async () => {
    const d = await devices();
    const cases: [Record<string, unknown>, Record<string, string>][] = [
      [ALERT, {}],
      [ALERT, { 'idempotency-key': `tx-${group}` }],
      [{ ...ALERT, collapse_key: 'order' }, {}],
    ];
    for (const [payload, headers] of cases) {
      received.length = 0;
      const res = await post(
        '/v6/transactional/notifications',
        { to: { field: 'user_id', value: d.tag }, group: 'order-shipped', notification: { payload } },
        headers,
      );
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().results).toEqual({ success: 3, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 4 });
      expect([...received].sort()).toEqual(tokens(d.allowed));
      expect(await get(`/v6/notifications/${res.json().id}`)).toMatchObject({ devices_not_allowed: expect.any(Number) });
    }
    const first = await post('/v6/transactional/notifications', {
      to: { field: 'device_id', value: d.disabled[0]!.id },
      group: 'order-shipped',
      notification: { payload: ALERT },
    });
    expect(first.json().results).toEqual({ success: 0, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 1 });
    expect(await get(`/v6/notifications/${first.json().id}`)).toMatchObject({ state: 'sent', devices_targeted: 0, devices_not_allowed: 1 });

    received.length = 0;
    const bg = await post('/v6/transactional/notifications', {
      to: { field: 'user_id', value: d.tag },
      group: 'order-shipped',
      notification: { payload: BACKGROUND },
    });
    expect(bg.json().results).toEqual({ success: 7, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 });
    expect([...received].sort()).toEqual(tokens(d.all));
  });

  it('a local-time send: each wave leaves them out; those in zones already past count as skipped, once', async () => {
    const berlin = await devices({ time_zone: 'Europe/Berlin' }); // 02:30 CET: 01:30Z on the 8th
    await devices({ time_zone: 'Pacific/Kiritimati', tags: [berlin.tag] }); // +14: 02:30 was 12:30Z on the 7th, past
    const res = await post('/v6/notifications', {
      notification: { to: [{ name: 'tags', criteria: [berlin.tag] }], payload: ALERT, send_at: '2026-03-08T02:30', local_time: true },
    });
    expect(res.statusCode, res.body).toBe(201);
    const { id } = res.json();
    clock.set('2026-03-08T01:30:00Z');
    await waitFor('the Berlin wave', async () => received.length >= 3, 10_000, 20);
    await new Promise((r) => setTimeout(r, 150));
    expect([...received].sort()).toEqual(tokens(berlin.allowed));
    clock.set('2026-03-08T14:30:00Z'); // past the last zone's 02:30
    const { n } = await deliveredBy(id);
    expect(n).toMatchObject({ devices_targeted: 3, devices_not_allowed: 4, skipped_past_local_time: 7 });
  });

  it('the push of an in-app message leaves them out', async () => {
    const d = await devices();
    const res = await post('/v6/messages', {
      message: { to: [{ name: 'tags', criteria: [d.tag] }], title: 'Your offer', notification: { payload: ALERT } },
    });
    expect(res.statusCode, res.body).toBe(201);
    const { n, tokens: got } = await deliveredBy(res.json().notification_id);
    expect(got).toEqual(tokens(d.allowed));
    expect(n).toMatchObject({ devices_targeted: 3, devices_not_allowed: 4 });
  });
});
