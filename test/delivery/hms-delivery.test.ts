import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { waitFor } from '../helpers/gateways.js';
import { HmsMock } from '../mocks/hms-mock.js';

/**
 * End to end for Huawei phones: devices registered through the API, notifications posted through the API, delivered
 * by the real workers (gateways in a thread) through the HMS gateway to a TLS HTTP/2 Push Kit mock that issues OAuth
 * tokens by the client credentials grant, checks the bearer token and the message, and answers HMS's codes.
 */
describe('huawei push kit delivery', () => {
  let h: Harness;
  let mock: HmsMock;
  let keys: { read: string; write: string; sdk: string };
  const HMS_APP_ID = '10000001';
  const devices: { id: string; token: string }[] = [];

  const hmsToken = () => `IQAAAACy0${randomBytes(48).toString('base64url')}`;
  const call = (method: 'GET' | 'POST', url: string, key: string, payload?: unknown) =>
    h.server.inject({ method, url, headers: { authorization: basic(key) }, ...(payload !== undefined && { payload: payload as object }) });
  const register = async (tags: string[] = []) => {
    const token = hmsToken();
    const res = await call('POST', '/v6/devices', keys.sdk, { device: { platform: 'huawei', token, tags } });
    expect(res.statusCode, res.body).toBe(201);
    return { id: res.json().device.id as string, token };
  };
  const post = async (notification: Record<string, unknown>) => {
    const res = await call('POST', '/v6/notifications', keys.write, { notification });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string };
  };
  const finished = (id: string) =>
    waitFor(`notification ${id} to finish`, async () => {
      const n = (await call('GET', `/v6/notifications/${id}`, keys.read)).json();
      return n.state === 'sent' || n.state === 'failed' ? n : null;
    });
  const device = (id: string) => h.db.db.selectFrom('devices').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

  beforeAll(async () => {
    mock = await HmsMock.start();
    mock.addApp(HMS_APP_ID, 'hms-client-secret');
    h = await createHarness({
      workers: true,
      env: { HMS_ORIGIN: mock.origin, HMS_TOKEN_URL: mock.tokenUrl, GATEWAY_THREADS: '1', RETRY_BASE_MS: '40', RETRY_MAX_MS: '3000' },
    });
    const created = await h.createApp('com.example.huawei');
    keys = created.keys;
    await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setHms(created.app.id, {
      hmsAppId: HMS_APP_ID,
      clientSecret: 'hms-client-secret',
    });
    for (const tags of [['vip'], ['vip'], []]) devices.push(await register(tags));
  });
  afterAll(async () => {
    await h?.close();
    await mock?.close();
  });
  beforeEach(() => mock.reset());

  it('reads back as "Huawei", refuses a token of another form, and a filtered notification reaches the matching devices in one request', async () => {
    const record = await call('GET', `/v6/devices/${devices[0]!.id}`, keys.read);
    expect(record.json().device.platform).toBe('Huawei');
    const bad = await call('POST', '/v6/devices', keys.sdk, { device: { platform: 'huawei', token: 'short' } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toMatch(/^device\.token: must be a Huawei push token/);
    // an update is held to the same form, the stored token untouched
    const update = await h.server.inject({
      method: 'PUT',
      url: `/v6/devices/${devices[0]!.id}`,
      headers: { authorization: basic(keys.sdk) },
      payload: { device: { token: 'short!' } },
    });
    expect(update.statusCode, update.body).toBe(400);
    expect(update.json().error).toMatch(/^device\.token: /);
    expect((await device(devices[0]!.id)).token).toBe(devices[0]!.token);

    const payload = {
      alert: 'Your order shipped',
      title: 'Shop',
      collapse_key: 'order-42',
      category: 'IM',
      _u: 'https://shop.example.com/orders/42',
      order: 42,
    };
    const to = [
      { name: 'platform', criteria: ['Huawei'] },
      { name: 'tags', criteria: ['vip'] },
    ];
    const { id } = await post({ to, payload, ttl: 3600, priority: 'normal' });
    const n = await finished(id);
    expect(n.state).toBe('sent');
    expect(mock.requests).toHaveLength(1);
    const request = mock.requests[0]!;
    expect(request.appId).toBe(HMS_APP_ID);
    expect(request.validateOnly).toBe(false);
    expect(request.headers.authorization).toBe(`Bearer ${request.accessToken}`);
    expect([...request.message.token].sort()).toEqual(
      devices
        .slice(0, 2)
        .map((d) => d.token)
        .sort(),
    );
    const { ttl, ...android } = request.message.android as { ttl: string };
    expect(android).toEqual({
      urgency: 'NORMAL',
      category: 'IM',
      notification: {
        title: 'Shop',
        body: 'Your order shipped',
        tag: 'order-42',
        click_action: { type: 2, url: 'https://shop.example.com/orders/42' },
      },
    });
    expect(Number.parseInt(ttl, 10)).toBeGreaterThan(3500);
    expect(Number.parseInt(ttl, 10)).toBeLessThanOrEqual(3600);
    expect(JSON.parse(request.message.data!)).toEqual({
      alert: 'Your order shipped',
      title: 'Shop',
      category: 'IM',
      _u: 'https://shop.example.com/orders/42',
      order: 42,
      _nid: id,
    });
    expect(mock.tokenRequests).toBe(1);
  });

  it('a transactional send answers once HMS accepted it, with the documented body', async () => {
    const target = devices[2]!;
    const res = await call('POST', '/v6/transactional/notifications', keys.write, {
      to: { field: 'device_id', value: target.id },
      group: 'receipts',
      notification: { payload: { alert: 'Receipt', receipt: 'r-1' } },
    });
    expect(res.statusCode, res.body).toBe(200);
    const answer = res.json();
    expect(answer.results).toEqual({ success: 1, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 });
    expect(mock.requests.map((r) => r.message)).toEqual([
      {
        data: JSON.stringify({ alert: 'Receipt', receipt: 'r-1', _nid: answer.id }),
        android: { urgency: 'HIGH', notification: { body: 'Receipt', click_action: { type: 3 } } },
        token: [target.token],
      },
    ]);
  });

  it('a partial failure (80100000) invalidates exactly the illegal tokens; the others count as sent', async () => {
    const batch = [await register(['partial']), await register(['partial']), await register(['partial'])];
    mock.markIllegal(batch[1]!.token);
    const { id } = await post({ to: [{ name: 'tags', criteria: ['partial'] }], payload: { alert: 'hello' } });
    const n = await finished(id);
    expect(mock.answers.map((a) => a.code)).toEqual(['80100000']);
    const rows = await Promise.all(batch.map((d) => device(d.id)));
    expect(rows.map((r) => r.token_invalidated_at !== null)).toEqual([false, true, false]);
    expect(rows[1]!.token_invalid_reason).toMatch(/^80100000/);
    expect(n.state).toBe('sent');
    expect(mock.delivered.sort()).toEqual([batch[0]!.token, batch[2]!.token].sort());
  });

  it('an expired access token (80200003) is renewed and the request sent again', async () => {
    await post({ to: [{ name: 'device_id', criteria: [devices[0]!.id] }], payload: { alert: 'warm up' } }).then(({ id }) => finished(id));
    mock.reset();
    mock.expireAccessTokens();
    const { id } = await post({ to: [{ name: 'device_id', criteria: [devices[0]!.id] }], payload: { alert: 'after expiry' } });
    const n = await finished(id);
    expect(n.state).toBe('sent');
    expect(mock.answers.map((a) => [a.status, a.code])).toEqual([
      [401, '80200003'],
      [200, '80000000'],
    ]);
    expect(mock.tokenRequests).toBe(1);
    expect(mock.answers[1]!.accessToken).not.toBe(mock.answers[0]!.accessToken);
  });

  it('81000001 (HMS internal error) is retried until accepted', async () => {
    mock.faults.next(2, { type: 'status', status: 500, reason: '81000001' });
    const { id } = await post({ to: [{ name: 'device_id', criteria: [devices[1]!.id] }], payload: { alert: 'again' } });
    const n = await finished(id);
    expect(n.state).toBe('sent');
    expect(mock.answers.map((a) => a.code)).toEqual(['81000001', '81000001', '80000000']);
    expect((await device(devices[1]!.id)).token_invalidated_at).toBeNull();
  });

  it('refuses at POST a payload whose HMS message would pass 4,096 bytes', async () => {
    const res = await call('POST', '/v6/notifications', keys.write, {
      notification: { to: '*', payload: { alert: 'big', blob: 'x'.repeat(4000) } },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/an HMS message of \d+ bytes \(Huawei Push Kit accepts at most 4096\)/);
  });
});
