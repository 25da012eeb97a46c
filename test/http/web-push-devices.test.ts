import { beforeAll, describe, expect, it } from 'vitest';
import { useHarness, type Harness } from '../helpers/harness.js';
import { browserSubscription } from '../mocks/web-push-browser.js';
import { call, countVia, register, token } from './device-support.js';
import { postNotification } from './support.js';

type App = Awaited<ReturnType<Harness['createApp']>>;

const MOCK_ORIGIN = 'https://localhost:8443';
let seq = 0;
const endpoint = (origin = 'https://fcm.googleapis.com') => `${origin}/fcm/send/sub-${++seq}-${Date.now()}`;

describe('web devices', () => {
  const h = useHarness({ env: { WEB_PUSH_ALLOWED_ORIGINS: `${MOCK_ORIGIN}, https://push.example.net` } });
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });

  it('registers a browser subscription: the endpoint is the token, the record reads back platform Web', async () => {
    const sub = browserSubscription(endpoint());
    const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, {
      device: {
        platform: 'web',
        subscription: sub.json,
        locale: 'de_DE',
        tags: ['web'],
        custom: { plan: { type: 'string', value: 'pro' } },
      },
    });
    expect(res.statusCode, res.body).toBe(201);
    const { device } = res.json();
    expect(device).toMatchObject({
      platform: 'Web',
      push_token: sub.json.endpoint,
      token: sub.json.endpoint,
      locale: 'de_DE',
      tags: ['web'],
    });
    expect(device.custom).toEqual({ plan: { type: 'string', value: 'pro' } });
    const row = await h.db.db.selectFrom('devices').selectAll().where('id', '=', device.id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ platform: 'web', web_push_p256dh: sub.json.keys.p256dh, web_push_auth: sub.json.keys.auth });

    // the same endpoint again is the same device, with the keys the browser has now
    const renewed = browserSubscription(sub.json.endpoint);
    const again = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { platform: 'web', subscription: renewed.json } });
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json().device).toMatchObject({ id: device.id, platform: 'Web' });
    const after = await h.db.db.selectFrom('devices').selectAll().where('id', '=', device.id).executeTakeFirstOrThrow();
    expect(after.web_push_p256dh).toBe(renewed.json.keys.p256dh);

    const read = await call(h, 'GET', `/v6/devices/${device.id}`, app.keys.read);
    expect(read.json().device).toMatchObject({ platform: 'Web', push_token: sub.json.endpoint });
  });

  it('a web device takes events, users and its subscription changes like a phone', async () => {
    const device = await register(h, app.keys.sdk, { platform: 'WEB', subscription: browserSubscription(endpoint()).json, user_id: 'w-1' });
    expect((await call(h, 'POST', `/v6/devices/${device.id}/events`, app.keys.sdk, { events: [{ name: 'visit' }] })).statusCode).toBe(202);
    const user = await call(h, 'PUT', '/v6/users/w-1', app.keys.write, { user: { custom: { tier: { type: 'integer', value: 2 } } } });
    expect(user.statusCode, user.body).toBe(200);
    const moved = browserSubscription(endpoint('https://updates.push.services.mozilla.com'));
    const put = await call(h, 'PUT', `/v6/devices/${device.id}`, app.keys.sdk, { device: { subscription: moved.json } });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json().device).toMatchObject({ push_token: moved.json.endpoint, custom: { tier: { type: 'integer', value: 2 } } });
    expect(put.json().device.user_events.visit.count).toBe(1);
    // unsubscribed: no token, nothing to push to
    const off = await call(h, 'PUT', `/v6/devices/${device.id}`, app.keys.sdk, { device: { subscription: null } });
    expect(off.json().device.push_token).toBeNull();
  });

  it('filters select the platform', async () => {
    const other = await h.createApp();
    await register(h, other.keys.sdk, { platform: 'ios', token: token() });
    await register(h, other.keys.sdk, { platform: 'android', token: token() });
    await register(h, other.keys.sdk, { platform: 'web', subscription: browserSubscription(endpoint()).json });
    await register(h, other.keys.sdk, { platform: 'web', subscription: browserSubscription(endpoint()).json });
    expect(await countVia(h, other.app.id, other.keys.read, [{ name: 'platform', criteria: ['Web'] }])).toBe(2);
    expect(await countVia(h, other.app.id, other.keys.read, [{ name: 'platform', criteria: ['iOS', 'Android'] }])).toBe(2);
    expect(await countVia(h, other.app.id, other.keys.read, [{ name: 'platform', criteria: ['Web'], not_filter: true }])).toBe(2);
    const bad = await postNotification(h, other.keys.write, {
      notification: { to: [{ name: 'platform', criteria: ['web'] }], payload: { alert: 'x' } },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toBe('notification.to[0].criteria[0]: must be one of iOS, Android, Web, Huawei');
  });

  it('accepts the push services and the allowed origins only (the endpoint comes from whoever holds the sdk key)', async () => {
    const accepted = [
      'https://fcm.googleapis.com/fcm/send/abc',
      'https://updates.push.services.mozilla.com/wpush/v2/abc',
      'https://web.push.apple.com/QOabc',
      'https://wns2-par02p.notify.windows.com/w/?token=abc',
      `${MOCK_ORIGIN}/push/abc`,
      'https://push.example.net/x',
    ];
    for (const url of accepted) {
      const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, {
        device: { platform: 'web', subscription: browserSubscription(url).json },
      });
      expect(res.statusCode, `${url}: ${res.body}`).toBe(201);
    }
    const refused = [
      'http://fcm.googleapis.com/fcm/send/abc',
      'https://127.0.0.1/push',
      'https://[::1]/push',
      'https://169.254.169.254/latest/meta-data',
      'https://evil.example.com/push',
      'https://fcm.googleapis.com.evil.example.com/x',
      'https://user:pass@fcm.googleapis.com/fcm/send/abc',
      'https://fcm.googleapis.com:8443/fcm/send/abc',
      'https://localhost:9443/push', // the allowed origin's host on another port
      'https://localhost/push',
      'file:///etc/passwd',
      'not a url',
    ];
    for (const url of refused) {
      const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, {
        device: { platform: 'web', subscription: browserSubscription(url).json },
      });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().error, url).toMatch(/^device\.subscription\.endpoint: /);
    }
    const count = await h.db.db
      .selectFrom('devices')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('app_id', '=', app.app.id)
      .where('token', 'like', '%evil%')
      .executeTakeFirstOrThrow();
    expect(Number(count.n)).toBe(0);
  });

  it('one subscription is one device however its endpoint is written: stored as the WHATWG URL serialises it', async () => {
    const path = `/fcm/send/written-${++seq}-${Date.now()}`;
    const canonical = `https://fcm.googleapis.com${path}`;
    const first = await register(h, app.keys.sdk, { platform: 'web', subscription: browserSubscription(canonical).json });
    const written = [
      ` ${canonical}`,
      `${canonical}\t`,
      `\n${canonical} `,
      `https://FCM.GoogleAPIs.com${path}`,
      `HTTPS://fcm.googleapis.com:443${path}`,
      `https://ｆｃｍ.googleapis.com${path}`, // full-width letters, which IDNA maps to ASCII
      `https://fcm.googleapis.com${path.slice(0, 5)}\t${path.slice(5)}`, // a tab inside, which the parser drops
    ];
    for (const url of written) {
      const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, {
        device: { platform: 'web', subscription: browserSubscription(url).json },
      });
      expect(res.statusCode, `${JSON.stringify(url)}: ${res.body}`).toBe(200);
      expect(res.json().device).toMatchObject({ id: first.id, push_token: canonical });
    }
    const tokens = await h.db.db
      .selectFrom('devices')
      .select('token')
      .where('token', 'like', `%${path.slice(-12)}%`)
      .execute();
    expect(tokens).toEqual([{ token: canonical }]);

    // a PUT stores the same form; what no URL parser reads, or is not https, is refused
    const moved = `https://updates.push.services.mozilla.com/wpush/v2/written-${seq}`;
    const put = await call(h, 'PUT', `/v6/devices/${first.id}`, app.keys.sdk, {
      device: { subscription: browserSubscription(`  HTTPS://Updates.Push.Services.Mozilla.com/wpush/v2/written-${seq}`).json },
    });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json().device.push_token).toBe(moved);
    for (const url of [
      'https://fcm.googleapis.com:99999/x',
      'https://fcm googleapis.com/x',
      'https://xn--/x',
      ' http://fcm.googleapis.com/x',
    ]) {
      const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, {
        device: { platform: 'web', subscription: browserSubscription(url).json },
      });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().error, url).toMatch(/^device\.subscription\.endpoint: /);
    }
  });

  it('refuses subscription keys that are not a P-256 point and a 16-byte secret, naming the field', async () => {
    const good = browserSubscription(endpoint()).json;
    const cases: [unknown, RegExp][] = [
      [{ ...good, keys: { ...good.keys, p256dh: Buffer.alloc(65, 4).toString('base64url') } }, /^device\.subscription\.keys\.p256dh: /],
      [{ ...good, keys: { ...good.keys, p256dh: good.keys.p256dh.slice(0, 40) } }, /^device\.subscription\.keys\.p256dh: /],
      [{ ...good, keys: { ...good.keys, auth: Buffer.alloc(12).toString('base64url') } }, /^device\.subscription\.keys\.auth: /],
      [{ ...good, keys: { ...good.keys, auth: 'not base64!' } }, /^device\.subscription\.keys\.auth: /],
      [{ endpoint: good.endpoint }, /^device\.subscription\.keys: /],
      [{ ...good, extra: 1 }, /^device\.subscription\.extra: /],
      ['https://fcm.googleapis.com/x', /^device\.subscription: /],
    ];
    for (const [subscription, error] of cases) {
      const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { platform: 'web', subscription } });
      expect(res.statusCode, JSON.stringify(subscription)).toBe(400);
      expect(res.json().error).toMatch(error);
    }
  });

  it('keeps phones and browsers apart: no token on a web device, no subscription on a phone', async () => {
    const sub = browserSubscription(endpoint()).json;
    const withToken = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { platform: 'web', token: 'abc' } });
    expect(withToken.statusCode).toBe(400);
    expect(withToken.json().error).toMatch(/^device\.token: /);
    const onPhone = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { platform: 'ios', subscription: sub } });
    expect(onPhone.statusCode).toBe(400);
    expect(onPhone.json().error).toMatch(/^device\.subscription: /);
    const phone = await register(h, app.keys.sdk, { platform: 'android', token: token() });
    const put = await call(h, 'PUT', `/v6/devices/${phone.id}`, app.keys.sdk, { device: { subscription: sub } });
    expect(put.statusCode).toBe(400);
    const web = await register(h, app.keys.sdk, { platform: 'web', subscription: sub });
    const toPhone = await call(h, 'PUT', `/v6/devices/${web.id}`, app.keys.sdk, { device: { platform: 'ios' } });
    expect(toPhone.statusCode).toBe(400);
    expect(toPhone.json().error).toMatch(/^device\.platform: /);
    const tokenOnWeb = await call(h, 'PUT', `/v6/devices/${web.id}`, app.keys.sdk, { device: { token: token() } });
    expect(tokenOnWeb.statusCode).toBe(400);
    expect(tokenOnWeb.json().error).toMatch(/^device\.token: /);
  });

  it('a web page on another origin may call the routes it needs (CORS: preflight and answers)', async () => {
    const preflight = await h.server.inject({
      method: 'OPTIONS',
      url: '/v6/devices',
      headers: {
        origin: 'https://shop.example.com',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
    expect(preflight.statusCode).toBe(204);
    expect(preflight.headers).toMatchObject({
      'access-control-allow-origin': '*',
      'access-control-allow-methods': 'GET, POST, PUT',
      'access-control-allow-headers': 'authorization, content-type, idempotency-key',
    });
    const res = await call(
      h,
      'POST',
      '/v6/devices',
      app.keys.sdk,
      { device: { platform: 'web', subscription: browserSubscription(endpoint()).json } },
      { origin: 'https://shop.example.com' },
    );
    expect(res.statusCode).toBe(201);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    const key = await call(h, 'GET', '/v6/web-push/vapid-public-key', app.keys.sdk, undefined, { origin: 'https://shop.example.com' });
    expect(key.headers['access-control-allow-origin']).toBe('*');
    // the rest of the API is for backends, not pages
    const notifications = await h.server.inject({
      method: 'OPTIONS',
      url: '/v6/notifications',
      headers: { origin: 'https://shop.example.com' },
    });
    expect(notifications.headers['access-control-allow-origin']).toBeUndefined();
  });
});
