import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MAX_TTL_SECONDS } from '../../src/domain/delivery-options.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { countRows, get, oneFailure, postNotification, type AppWithKeys } from './support.js';

/**
 * `expires_at`, `ttl` and `priority` of the notification object through the HTTP API: one refusal per rule on
 * create (every version), preview and transactional, each a 400 naming the field with nothing stored; the
 * preview's mapped headers; the transactional answer of a push that expires while the gateway asks to retry.
 */

const INSTANT = 'must be an ISO 8601 date-time with a time zone offset or Z, e.g. 2026-05-01T12:00:00Z';
const TTL_RANGE = `must be an integer number of seconds from 1 to ${MAX_TTL_SECONDS}`;
const inHours = (hours: number) => new Date(Date.now() + hours * 3_600_000).toISOString();

type Row = [rule: string, options: Record<string, unknown>, error: string];
const ROWS: Row[] = [
  ['expires_at without a zone', { expires_at: '2030-01-01T10:00:00' }, `expires_at: ${INSTANT}`],
  ['expires_at a date only', { expires_at: '2030-01-01' }, `expires_at: ${INSTANT}`],
  ['expires_at not a date', { expires_at: 'tomorrow' }, `expires_at: ${INSTANT}`],
  ['expires_at a number', { expires_at: 1893456000 }, `expires_at: ${INSTANT}`],
  ['expires_at null', { expires_at: null }, `expires_at: ${INSTANT}`],
  ['expires_at in the past', { expires_at: '2020-01-01T00:00:00Z' }, 'expires_at: must be in the future'],
  ['expires_at in the past, in another zone', { expires_at: '2020-01-01T01:00:00+01:00' }, 'expires_at: must be in the future'],
  [
    'expires_at 29 days ahead',
    { expires_at: inHours(29 * 24) },
    'expires_at: must be at most 28 days ahead (FCM keeps a message at most 28 days)',
  ],
  ['ttl a string', { ttl: '60' }, `ttl: ${TTL_RANGE}`],
  ['ttl fractional', { ttl: 0.5 }, `ttl: ${TTL_RANGE}`],
  ['ttl 0', { ttl: 0 }, `ttl: ${TTL_RANGE}`],
  ['ttl negative', { ttl: -60 }, `ttl: ${TTL_RANGE}`],
  ['ttl over 28 days', { ttl: MAX_TTL_SECONDS + 1 }, `ttl: must be at most ${MAX_TTL_SECONDS} seconds (28 days, FCM's limit)`],
  ['expires_at and ttl together', { expires_at: inHours(1), ttl: 60 }, 'ttl: cannot be given with expires_at; give one of them'],
  ['priority unknown', { priority: 'urgent' }, 'priority: must be "high" or "normal"'],
  ['priority as an APNs number', { priority: 10 }, 'priority: must be "high" or "normal"'],
  ['priority null', { priority: null }, 'priority: must be "high" or "normal"'],
];

describe('delivery options through the HTTP API', () => {
  let h: Harness;
  let gw: Gateways;
  let app: AppWithKeys;
  let android: RegisteredDevice;

  beforeAll(async () => {
    gw = await startGateways();
    // An API process (no workers): the transactional endpoint sends by itself.
    h = await createHarness({
      env: { ...gw.env, RETRY_BASE_MS: '20', RETRY_MAX_MS: '30000', DELIVERY_MAX_ATTEMPTS: '50', TRANSACTIONAL_TIMEOUT_MS: '10000' },
    });
    app = await h.createApp('com.example.options');
    await setCredentials(h, app.app.id, gw);
    android = await registerDevice(h, app.keys.sdk, { platform: 'android', user_id: 'ana' });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });
  beforeEach(() => {
    gw.reset();
  });

  const create = (options: Record<string, unknown>, version: 'v3' | 'v5' | 'v6' = 'v6') =>
    postNotification(h, app.keys.write, { notification: { to: '*', payload: { alert: 'x' }, ...options } }, { version });
  const preview = (options: Record<string, unknown>) =>
    h.server.inject({
      method: 'POST',
      url: '/v6/notifications/preview',
      headers: { authorization: basic(app.keys.read) },
      payload: { notification: { to: '*', payload: { alert: 'x' }, ...options } },
    });
  const transactional = (options: Record<string, unknown>) =>
    h.server.inject({
      method: 'POST',
      url: '/v6/transactional/notifications',
      headers: { authorization: basic(app.keys.write) },
      payload: { to: { field: 'device_id', value: android.id }, group: 'otp-codes', notification: { payload: { alert: 'x' }, ...options } },
    });

  describe.each(['v3', 'v5', 'v6'] as const)('POST /%s/notifications', (version) => {
    it.each(ROWS)('%s -> 400 naming the field', async (_rule, options, error) => {
      const res = await create(options, version);
      expect(res.json()).toEqual({ error: `notification.${error}` });
      expect(res.statusCode).toBe(400);
    });
  });

  it.each(ROWS)('preview and transactional refuse %s the same way', async (_rule, options, error) => {
    for (const res of [await preview(options), await transactional(options)]) {
      expect(res.json()).toEqual({ error: `notification.${error}` });
      expect(res.statusCode).toBe(400);
    }
  });

  it('stored and sent nothing for any refused body', async () => {
    expect(await countRows(h, 'notifications', app.app.id)).toBe(0);
    expect(gw.apns.requestCount + gw.fcm.requestCount).toBe(0);
  });

  it('accepts the boundaries: ttl 1 and 28 days, expires_at just ahead and 28 days ahead in any zone', async () => {
    const almost28Days = new Date(Date.now() + MAX_TTL_SECONDS * 1000 - 60_000);
    const plusTwo = almost28Days.toISOString().replace('Z', '+00:00');
    for (const options of [
      { ttl: 1 },
      { ttl: MAX_TTL_SECONDS, priority: 'high' },
      { expires_at: inHours(0.01), priority: 'normal' },
      { expires_at: plusTwo },
    ]) {
      const res = await create(options);
      expect(res.statusCode, `${JSON.stringify(options)}: ${res.body}`).toBe(201);
      expect(res.json().notification).toMatchObject(options);
    }
  });

  it('a collapse_key update replaces the options: its ttl counts from the update, and giving none clears them', async () => {
    const post = async (options: Record<string, unknown>) => {
      const payload = { alert: 'score', collapse_key: 'match-7' };
      const res = await postNotification(h, app.keys.write, { notification: { to: '*', payload, ...options } });
      expect(res.statusCode, res.body).toBe(201);
      return (await get(h, app.keys.read, `/v6/notifications/${res.json().id}`)).json();
    };
    const first = await post({ ttl: 60, priority: 'normal' });
    expect(Date.parse(first.expires_at) - Date.parse(first.created_at)).toBe(60_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const second = await post({ ttl: 60, priority: 'high' });
    expect(second.id).toBe(first.id);
    expect(second.priority).toBe('high');
    expect(Date.parse(second.expires_at) - Date.parse(second.updated_at)).toBe(60_000);
    expect(Date.parse(second.expires_at)).toBeGreaterThan(Date.parse(first.expires_at));
    const third = await post({});
    expect(third).toMatchObject({ id: first.id, expires_at: null, priority: null });
  });

  it('the preview shows the headers and fields a send would carry', async () => {
    const expiresAt = inHours(2);
    const res = await preview({ expires_at: expiresAt, priority: 'normal' });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.apns.headers).toEqual({
      'apns-push-type': 'alert',
      'apns-priority': 5,
      'apns-expiration': Math.floor(Date.parse(expiresAt) / 1000),
    });
    expect(body.fcm.body.message.android.priority).toBe('NORMAL');
    expect(body.fcm.body.message.android.ttl).toMatch(/^7(1\d\d|200)s$/); // about 7200 s left

    const ttl = (await preview({ ttl: 90, priority: 'high' })).json();
    expect(ttl.apns.headers['apns-priority']).toBe(10);
    expect(ttl.apns.headers['apns-expiration']).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000) + 88);
    expect(ttl.fcm.body.message.android).toMatchObject({ priority: 'HIGH', ttl: '90s' });

    const plain = (await preview({})).json();
    expect(plain.apns.headers).toEqual({ 'apns-push-type': 'alert', 'apns-priority': 10 });
    expect(plain.fcm.body.message.android).not.toHaveProperty('ttl');
  });

  it('transactional: a push sent in time carries its ttl and priority', async () => {
    const res = await transactional({ ttl: 300, priority: 'normal' });
    expect(res.json().results).toEqual({ success: 1, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 });
    const message = gw.fcm.pushes[0]!.message as { android: { priority: string; ttl: string } };
    expect(message.android.priority).toBe('NORMAL');
    expect(parseInt(message.android.ttl, 10)).toBeGreaterThan(290);
    const stored = await get(h, app.keys.read, `/v6/notifications/${res.json().id}`);
    expect(stored.json()).toMatchObject({ state: 'sent', priority: 'normal', pushes_expired: 0, expires_at: expect.any(String) });
  });

  it('transactional: a push that expires while the gateway asks to retry is reported in failures and counted expired', async () => {
    gw.fcm.faults.forToken(android.token, { type: 'status', status: 429, reason: 'QUOTA_EXCEEDED', retryAfter: '20' });
    const started = Date.now();
    // 3 s: the first attempt reaches the gateway before the expiry on a busy machine too
    const res = await transactional({ ttl: 3 });
    // answered at the expiry, well before TRANSACTIONAL_TIMEOUT_MS and the 20 s Retry-After
    expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
    expect(Date.now() - started).toBeLessThan(8000);
    expect(res.json().results).toEqual(oneFailure(android.id, 'expired before it could be sent'));
    expect(gw.fcm.answers.map((a) => a.status)).toEqual([429]);
    const stored = await get(h, app.keys.read, `/v6/notifications/${res.json().id}`);
    expect(stored.json()).toMatchObject({ state: 'failed', failure_reason: 'expired', pushes_failed: 0, pushes_expired: 1 });
    gw.fcm.faults.clear();
  });
});
