import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { oneFailure } from './support.js';
import { registerDevice, setCredentials, startGateways, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';

/**
 * POST /v6/transactional/notifications, from an API-only process (ROLE=api: no workers), through the real gateway
 * clients to the TLS HTTP/2 mocks: the answer carries the gateways' outcome.
 */
describe('transactional notifications', () => {
  let h: Harness;
  let gw: Gateways;
  let keys: { read: string; write: string; sdk: string };
  let ios: RegisteredDevice;
  let android: RegisteredDevice;
  let other: RegisteredDevice;

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({
      env: { ...gw.env, RETRY_BASE_MS: '20', RETRY_MAX_MS: '100', DELIVERY_MAX_ATTEMPTS: '50', TRANSACTIONAL_TIMEOUT_MS: '1500' },
    });
    const created = await h.createApp('com.example.transactional');
    keys = created.keys;
    await setCredentials(h, created.app.id, gw);
    ios = await registerDevice(h, keys.sdk, { platform: 'ios', user_id: 'ana', locale: 'fr_FR' });
    android = await registerDevice(h, keys.sdk, { platform: 'android', user_id: 'ana', locale: 'en_US' });
    other = await registerDevice(h, keys.sdk, { platform: 'android', user_id: 'bob' });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });
  beforeEach(() => {
    gw.reset();
    gw.apns.faults.clear();
    gw.fcm.faults.clear();
  });

  const send = (body: unknown, key = keys.write) =>
    h.server.inject({
      method: 'POST',
      url: '/v6/transactional/notifications',
      headers: { authorization: basic(key) },
      payload: body as Record<string, unknown>,
    });
  const body = (to: { field: string; value: string }, extra: Record<string, unknown> = {}) => ({
    to,
    group: 'order-shipped',
    notification: { payload: { alert: 'Your order has shipped' } },
    ...extra,
  });
  const tokens = () => [...gw.apns.pushes, ...gw.fcm.pushes].map((p) => p.token).sort();

  it('sends to one device and answers with the outcome; the notification is stored with its group', async () => {
    const res = await send(body({ field: 'device_id', value: ios.id }));
    expect(res.statusCode, res.body).toBe(200);
    const answer = res.json();
    expect(answer).toEqual({
      id: expect.any(String),
      results: { success: 1, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 },
    });
    // a time-ordered id (version 7) of the moment it was sent: its day is a range of ids (migration 033)
    expect(answer.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(Math.abs(parseInt(answer.id.replaceAll('-', '').slice(0, 12), 16) - Date.now())).toBeLessThan(60_000);
    expect(tokens()).toEqual([ios.token]);
    expect(gw.apns.pushes[0]!.payload).toMatchObject({ aps: { alert: 'Your order has shipped' }, _nid: answer.id });

    const stored = await h.server.inject({
      method: 'GET',
      url: `/v6/notifications/${answer.id}`,
      headers: { authorization: basic(keys.read) },
    });
    expect(stored.statusCode).toBe(200);
    expect(stored.json()).toMatchObject({
      id: answer.id,
      state: 'sent',
      group: 'order-shipped',
      to: { id: null, type: 'Audience' },
      // what was submitted, in the shape of every notification record: its payload beside its to
      notification: { to: { field: 'device_id', value: ios.id }, payload: { alert: 'Your order has shipped' } },
      devices_targeted: 1,
      pushes_succeeded: 1,
    });
  });

  it("sends to a user's devices that match the extra filters", async () => {
    const extra_filters = [{ name: 'locale', criteria: ['en_US'] }];
    const notification = { payload: { alert: 'Your order has shipped' }, priority: 'high', ttl: 600 };
    const res = await send(body({ field: 'user_id', value: 'ana' }, { extra_filters, notification }));
    expect(res.json().results).toEqual({ success: 1, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 });
    expect(tokens()).toEqual([android.token]);
    const one = await h.server.inject({
      method: 'GET',
      url: `/v6/notifications/${res.json().id}`,
      headers: { authorization: basic(keys.read) },
    });
    expect(one.json()).toMatchObject({
      notification: { to: { field: 'user_id', value: 'ana' }, extra_filters, ...notification },
      priority: 'high',
    });

    gw.reset();
    const all = await send(body({ field: 'user_id', value: 'ana' }));
    expect(all.json().results).toEqual({ success: 2, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 });
    expect(tokens()).toEqual([ios.token, android.token].sort());
    // two batches (one per platform): sent once both are recorded
    const stored = await h.server.inject({
      method: 'GET',
      url: `/v6/notifications/${all.json().id}`,
      headers: { authorization: basic(keys.read) },
    });
    expect(stored.json()).toMatchObject({ state: 'sent', devices_targeted: 2, pushes_succeeded: 2 });
  });

  it('a device or user that does not exist: 200, nothing sent', async () => {
    const res = await send(body({ field: 'user_id', value: 'nobody' }));
    expect(res.statusCode).toBe(200);
    expect(res.json().results).toEqual({ success: 0, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 });
    expect(gw.apns.requestCount + gw.fcm.requestCount).toBe(0);
  });

  it('retries a temporary gateway error within the deadline: delivered once', async () => {
    gw.fcm.faults.next(2, { type: 'status', status: 503, reason: 'UNAVAILABLE' });
    const res = await send(body({ field: 'device_id', value: other.id }));
    expect(res.json().results).toEqual({ success: 1, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 });
    expect(tokens()).toEqual([other.token]);
  });

  it('a gateway that keeps failing: the device is reported in failures when the deadline comes', async () => {
    gw.fcm.faults.forToken(other.token, { type: 'status', status: 503, reason: 'UNAVAILABLE' });
    const started = Date.now();
    const res = await send(body({ field: 'device_id', value: other.id }));
    expect(res.json().results).toEqual(oneFailure(other.id, 'deadline exceeded (last answer: UNAVAILABLE)'));
    // retried until TRANSACTIONAL_TIMEOUT_MS=1500 (50 attempts would take longer), then answered
    expect(Date.now() - started).toBeGreaterThan(1000);
    expect(Date.now() - started).toBeLessThan(3000);
    const stored = await h.server.inject({
      method: 'GET',
      url: `/v6/notifications/${res.json().id}`,
      headers: { authorization: basic(keys.read) },
    });
    expect(stored.json()).toMatchObject({ state: 'failed', pushes_failed: 1 });
    expect(gw.fcm.pushes).toHaveLength(0);
  });

  it("each failure says why: the gateway's code, no credentials, the deadline; `failures` stays the list of ids", async () => {
    gw.apns.faults.forToken(ios.token, { type: 'status', status: 400, reason: 'BadTopic' });
    gw.fcm.faults.forToken(android.token, { type: 'status', status: 503, reason: 'UNAVAILABLE' });
    const res = await send(body({ field: 'user_id', value: 'ana' }));
    expect(res.statusCode, res.body).toBe(200);
    const { results } = res.json();
    expect(results).toMatchObject({ success: 0, uninstalled: 0, not_allowed: 0 });
    expect([...results.failures].sort()).toEqual([ios.id, android.id].sort());
    expect(results.failure_reasons).toHaveLength(2);
    expect(results.failure_reasons).toEqual(
      expect.arrayContaining([
        { device_id: ios.id, reason: 'BadTopic' },
        { device_id: android.id, reason: 'deadline exceeded (last answer: UNAVAILABLE)' },
      ]),
    );

    // an app with no credentials for the device's gateway
    const bare = await h.createApp('com.example.transactional.bare');
    const phone = await registerDevice(h, bare.keys.sdk, { platform: 'ios' });
    const none = await send(body({ field: 'device_id', value: phone.id }), bare.keys.write);
    expect(none.json().results).toEqual(oneFailure(phone.id, 'no credentials for APNs'));
  });

  it('an uninstalled token is counted and invalidated', async () => {
    const gone = await registerDevice(h, keys.sdk, { platform: 'ios', user_id: 'carl' });
    gw.apns.markUnregistered(gone.token);
    const res = await send(body({ field: 'device_id', value: gone.id }));
    expect(res.json().results).toEqual({ success: 0, uninstalled: 1, failures: [], failure_reasons: [], not_allowed: 0 });
    const again = await send(body({ field: 'device_id', value: gone.id }));
    // no longer targeted
    expect(again.json().results).toEqual({ success: 0, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 });
  });

  it('20 concurrent sends to 20 devices: each device gets exactly one push; one to too many devices is refused alone', async () => {
    const many = await Promise.all(
      Array.from({ length: 20 }, (_, i) => registerDevice(h, keys.sdk, { platform: i % 2 ? 'ios' : 'android' })),
    );
    // sent together with them, one that matches too many devices is refused alone
    for (let i = 0; i < 101; i++) await registerDevice(h, keys.sdk, { platform: 'android', user_id: 'crowd' });
    gw.reset();
    const [crowd, ...answers] = await Promise.all([
      send(body({ field: 'user_id', value: 'crowd' })),
      ...many.map((d) => send(body({ field: 'device_id', value: d.id }))),
    ]);
    expect(crowd!.statusCode).toBe(400);
    expect(crowd!.json().error).toContain('to: matches more than 100 devices');
    for (const a of answers)
      expect(a.json().results).toEqual({ success: 1, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 });
    expect(new Set(answers.map((a) => a.json().id)).size).toBe(many.length);
    expect(tokens()).toEqual(many.map((d) => d.token).sort());
  });

  it.each([
    ['group too short', body({ field: 'device_id', value: 'x' }, { group: 'ab' }), 'group'],
    ['group with another character', body({ field: 'device_id', value: 'x' }, { group: 'order_shipped' }), 'group'],
    [
      'group missing',
      { to: { field: 'device_id', value: 'x' }, notification: { payload: { alert: 'a' } } },
      'group: is required (3 to 64 letters, digits or "-")',
    ],
    ['group not a string', body({ field: 'device_id', value: 'x' }, { group: 7 }), 'group: must be a string'],
    ['to.field unknown', body({ field: 'email', value: 'a@b.c' }), 'to.field'],
    ['to.value empty', body({ field: 'user_id', value: '' }), 'to.value'],
    ['payload breaks a rule', body({ field: 'device_id', value: 'x' }, { notification: { payload: { alert: 'a', badge: -1 } } }), 'badge'],
    [
      'an unknown filter',
      body({ field: 'user_id', value: 'ana' }, { extra_filters: [{ name: 'nope', criteria: ['x'] }] }),
      'extra_filters',
    ],
    ['an unknown key', body({ field: 'user_id', value: 'ana' }, { audience: 'x' }), 'audience'],
    [
      '51 extra filters',
      body(
        { field: 'user_id', value: 'ana' },
        { extra_filters: Array.from({ length: 51 }, (_, i) => ({ name: `custom.string.a${i}`, criteria: ['x'] })) },
      ),
      'extra_filters: must hold at most 50 filters',
    ],
  ])('%s -> 400 naming the field', async (_name, bad, field) => {
    const res = await send(bad);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toContain(field);
    expect(gw.apns.requestCount + gw.fcm.requestCount).toBe(0);
  });

  it('needs a write key', async () => {
    expect((await send(body({ field: 'device_id', value: ios.id }), keys.read)).statusCode).toBe(403);
    expect((await send(body({ field: 'device_id', value: ios.id }), keys.sdk)).statusCode).toBe(403);
    expect(gw.apns.requestCount).toBe(0);
  });
});
