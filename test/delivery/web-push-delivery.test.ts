import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { webPushTopic } from '../../src/domain/push-mapping.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { waitFor } from '../helpers/gateways.js';
import { WebPushMock, type MockSubscription } from '../mocks/web-push-mock.js';

/**
 * End to end for browsers: subscriptions registered through the API, notifications posted through the API,
 * delivered by the real workers (gateways in a thread) through the Web Push gateway to a TLS HTTP/2 push service
 * that checks the VAPID JWT and decrypts every payload with the browser's private key.
 */
describe('web push delivery', () => {
  let h: Harness;
  let mock: WebPushMock;
  let keys: { read: string; write: string; sdk: string };
  let appId: string;
  let vapidKey: string;
  const devices: { id: string; sub: MockSubscription }[] = [];

  beforeAll(async () => {
    mock = await WebPushMock.start();
    h = await createHarness({
      workers: true,
      env: { WEB_PUSH_ALLOWED_ORIGINS: mock.origin, GATEWAY_THREADS: '1', RETRY_BASE_MS: '40', RETRY_MAX_MS: '3000' },
    });
    const created = await h.createApp('com.example.web');
    keys = created.keys;
    appId = created.app.id;
    vapidKey = (
      await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setWebPush(appId, {
        subject: 'mailto:ops@example.com',
      })
    ).public_key;
    for (const tags of [['vip'], ['vip'], []]) {
      const sub = mock.subscribe(vapidKey);
      const res = await call('POST', '/v6/devices', keys.sdk, { device: { platform: 'web', subscription: sub, tags } });
      expect(res.statusCode, res.body).toBe(201);
      devices.push({ id: res.json().device.id, sub });
    }
  });
  afterAll(async () => {
    await h?.close();
    await mock?.close();
  });
  beforeEach(() => mock.reset());

  const call = (method: 'GET' | 'POST', url: string, key: string, payload?: unknown) =>
    h.server.inject({ method, url, headers: { authorization: basic(key) }, ...(payload !== undefined && { payload: payload as object }) });
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
  const endpoints = (list: { endpoint: string }[]) => list.map((p) => p.endpoint).sort();

  it('a broadcast reaches every subscription: the documents decrypt to the mapped payload, with VAPID and headers', async () => {
    const payload = {
      alert: 'Your order shipped',
      title: 'Shop',
      collapse_key: 'order-42',
      order: 42,
      web: { icon: '/icon.png', url: 'https://shop.example.com/orders/42', actions: [{ action: 'track', title: 'Track' }], renotify: true },
    };
    const { id } = await post({ to: '*', payload, ttl: 3600, priority: 'normal' });
    const n = await finished(id);
    expect(n.state).toBe('sent');
    expect(endpoints(mock.pushes)).toEqual(endpoints(devices.map((d) => d.sub)));
    for (const push of mock.pushes) {
      expect(push.document).toEqual({
        title: 'Shop',
        body: 'Your order shipped',
        tag: 'order-42',
        icon: '/icon.png',
        url: 'https://shop.example.com/orders/42',
        actions: [{ action: 'track', title: 'Track' }],
        renotify: true,
        data: { order: 42, _nid: id },
      });
      expect(push.claims).toMatchObject({ aud: mock.origin, sub: 'mailto:ops@example.com' });
      expect(push.headers.urgency).toBe('normal');
      expect(push.headers.topic).toBe(webPushTopic('order-42'));
      expect(Number(push.headers.ttl)).toBeGreaterThan(3500);
      expect(Number(push.headers.ttl)).toBeLessThanOrEqual(3600);
    }
    // one JWT for the push service, reused across its pushes
    expect(new Set(mock.pushes.map((p) => p.jwt)).size).toBe(1);
  });

  it('a filtered notification reaches the matching subscriptions only', async () => {
    const { id } = await post({ to: [{ name: 'tags', criteria: ['vip'] }], payload: { alert: 'VIP sale' } });
    await finished(id);
    expect(endpoints(mock.pushes)).toEqual(endpoints(devices.slice(0, 2).map((d) => d.sub)));
    expect(mock.pushes[0]!.document).toEqual({ body: 'VIP sale', data: { _nid: id } });
    expect(mock.pushes[0]!.headers.urgency).toBe('high'); // something is shown and no priority was given
  });

  it('a transactional send answers with the outcome once the push service accepted it', async () => {
    const target = devices[2]!;
    const res = await call('POST', '/v6/transactional/notifications', keys.write, {
      to: { field: 'device_id', value: target.id },
      group: 'receipts',
      notification: { payload: { alert: 'Receipt', receipt: 'r-1' } },
    });
    expect(res.statusCode, res.body).toBe(200);
    const answer = res.json();
    expect(answer.results).toEqual({ success: 1, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 });
    expect(mock.pushes.map((p) => [p.endpoint, p.document])).toEqual([
      [target.sub.endpoint, { body: 'Receipt', data: { receipt: 'r-1', _nid: answer.id } }],
    ]);
  });

  it('a 429 with Retry-After is sent again after it', async () => {
    const target = devices[0]!;
    mock.faults.forToken(target.sub.endpoint, { type: 'status', status: 429, reason: 'slow down', retryAfter: 1 }, 1);
    const { id } = await post({ to: [{ name: 'device_id', criteria: [target.id] }], payload: { alert: 'again' } });
    const n = await finished(id);
    expect(n.state).toBe('sent');
    const answers = mock.answers.filter((a) => a.endpoint === target.sub.endpoint);
    expect(answers.map((a) => a.status)).toEqual([429, 201]);
    expect(answers[1]!.at - answers[0]!.at).toBeGreaterThanOrEqual(900);
    expect(mock.pushesTo(target.sub.endpoint)).toHaveLength(1);
  });

  it('a 410 Gone invalidates the device, which later pushes skip', async () => {
    const gone = mock.subscribe(vapidKey);
    const res = await call('POST', '/v6/devices', keys.sdk, { device: { platform: 'web', subscription: gone } });
    const goneId = res.json().device.id as string;
    mock.markGone(gone.endpoint);
    const { id } = await post({ to: '*', payload: { alert: 'hello' } });
    await finished(id);
    const row = await h.db.db.selectFrom('devices').selectAll().where('id', '=', goneId).executeTakeFirstOrThrow();
    expect(row.token_invalidated_at).not.toBeNull();
    expect(row.token_invalid_reason).toMatch(/^HTTP 410/);
    mock.reset();
    const next = await post({ to: '*', payload: { alert: 'hello again' } });
    await finished(next.id);
    expect(endpoints(mock.pushes)).toEqual(endpoints(devices.map((d) => d.sub)));
    expect(mock.answers.filter((a) => a.endpoint === gone.endpoint)).toEqual([]);
  });

  it('refuses at POST a payload whose record would pass 4,096 bytes once encrypted, and an endpoint outside the allowed origins at registration', async () => {
    const long = `https://shop.example.com/${'x'.repeat(2000)}`;
    const res = await call('POST', '/v6/notifications', keys.write, {
      notification: { to: '*', payload: { alert: 'big', web: { url: long, image: long, icon: long } } },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/a Web Push record of \d+ bytes once encrypted \(push services accept at most 4096\)/);
    const elsewhere = { ...mock.subscribe(vapidKey) };
    elsewhere.endpoint = elsewhere.endpoint.replace(mock.origin, `https://127.0.0.1:${mock.port === 1 ? 2 : mock.port - 1}`);
    const refused = await call('POST', '/v6/devices', keys.sdk, { device: { platform: 'web', subscription: elsewhere } });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toMatch(/^device\.subscription\.endpoint: /);
  });
  // last: it adds a device the tests above do not expect
  it('a browser shows every push, so one whose notifications are Disabled gets none, even without an alert', async () => {
    const sub = mock.subscribe(vapidKey);
    const res = await call('POST', '/v6/devices', keys.sdk, {
      device: { platform: 'web', subscription: sub, notifications_allowed: 'Disabled' },
    });
    expect(res.statusCode, res.body).toBe(201);
    const { id } = await post({ to: '*', payload: { order: 43 } });
    const n = await finished(id);
    expect(n).toMatchObject({ devices_targeted: devices.length, devices_not_allowed: 1 });
    expect(endpoints(mock.pushes)).toEqual(endpoints(devices.map((d) => d.sub)));
  });
});
