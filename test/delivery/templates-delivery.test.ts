import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseTemplate, renderTemplate } from '../../src/domain/templates.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { HmsMock } from '../mocks/hms-mock.js';
import { WebPushMock, type MockSubscription } from '../mocks/web-push-mock.js';

const HMS_APP_ID = '104000077';

/**
 * Templates end to end: notifications and transactional sends posted through the API, rendered per device by the
 * real workers and the direct path, and received by the APNs, FCM, HMS and Web Push (decrypted) mocks as rendered;
 * each error case.
 */
describe('templates at the gateways', () => {
  let h: Harness;
  let gw: Gateways;
  let hms: HmsMock;
  let web: WebPushMock;
  let webSub: MockSubscription;
  let keys: { read: string; write: string; sdk: string };
  const d: Record<string, RegisteredDevice | { id: string; token: string }> = {};
  const custom = (c: Record<string, [string, unknown]>) =>
    Object.fromEntries(Object.entries(c).map(([k, [type, value]]) => [k, { type, value }]));

  beforeAll(async () => {
    gw = await startGateways();
    hms = await HmsMock.start();
    hms.addApp(HMS_APP_ID, 'hms-client-secret');
    web = await WebPushMock.start();
    const env = {
      ...gw.env,
      HMS_ORIGIN: hms.origin,
      HMS_TOKEN_URL: hms.tokenUrl,
      RETRY_BASE_MS: '40',
      RETRY_MAX_MS: '1000',
      JOURNEY_POLL_MS: '50',
      WEB_PUSH_ALLOWED_ORIGINS: web.origin,
    };
    h = await createHarness({ workers: true, env });
    const created = await h.createApp('com.example.templates');
    keys = created.keys;
    await setCredentials(h, created.app.id, gw);
    const apps = new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() });
    await apps.setHms(created.app.id, { hmsAppId: HMS_APP_ID, clientSecret: 'hms-client-secret' });
    webSub = web.subscribe((await apps.setWebPush(created.app.id, { subject: 'mailto:ops@example.com' })).public_key);
    d.ana = await registerDevice(h, keys.sdk, {
      platform: 'ios',
      locale: 'pt_BR',
      country: 'BR',
      app_version: '2.1',
      user_id: 'u-ana',
      custom: custom({ first_name: ['string', 'Ana'], points: ['integer', 120], n: ['integer', 2] }),
    });
    d.bo = await registerDevice(h, keys.sdk, {
      platform: 'android',
      locale: 'en_US',
      user_id: 'u-bo',
      custom: custom({ first_name: ['string', 'Bo'], bio: ['string', 'x'.repeat(250)], n: ['integer', 2] }),
    });
    d.anon = await registerDevice(h, keys.sdk, { platform: 'android', locale: 'fr_FR', custom: custom({ n: ['integer', 100000000] }) });
    for (const name of ['hw1', 'hw2', 'hw3']) {
      const token = `IQAAAACy0${randomBytes(48).toString('base64url')}`;
      const res = await call(
        'POST',
        '/v6/devices',
        { device: { platform: 'huawei', token, locale: name === 'hw3' ? 'de_DE' : 'es_ES' } },
        keys.sdk,
      );
      expect(res.statusCode, res.body).toBe(201);
      d[name] = { id: res.json().device.id, token };
    }
    // a browser and a Huawei phone with every per-device family: fields, custom attributes, a user
    const family = (user: string, name: string) => ({
      user_id: user,
      app_version: '3.0',
      custom: custom({ first_name: ['string', name] }),
    });
    const browser = { platform: 'web', subscription: webSub, locale: 'de_DE', ...family('u-wu', 'Wu') };
    const res = await call('POST', '/v6/devices', { device: browser }, keys.sdk);
    expect(res.statusCode, res.body).toBe(201);
    d.browser = { id: res.json().device.id, token: webSub.endpoint };
    const hwToken = `IQAAAACy0${randomBytes(48).toString('base64url')}`;
    const hw = { platform: 'huawei', token: hwToken, locale: 'it_IT', ...family('u-hu', 'Hu') };
    const hwRes = await call('POST', '/v6/devices', { device: hw }, keys.sdk);
    expect(hwRes.statusCode, hwRes.body).toBe(201);
    d.hwUser = { id: hwRes.json().device.id, token: hwToken };
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
    await hms?.close();
    await web?.close();
  });
  beforeEach(() => {
    gw.reset();
    hms.reset();
    web.reset();
  });

  const call = (method: 'GET' | 'POST', url: string, payload?: unknown, key = keys.write) =>
    h.server.inject({ method, url, headers: { authorization: basic(key) }, payload: payload as Record<string, unknown> });
  const finished = (id: string) =>
    waitFor(`notification ${id} to finish`, async () => {
      const n = (await call('GET', `/v6/notifications/${id}`, undefined, keys.read)).json();
      return n.state === 'sent' || n.state === 'failed' ? n : null;
    });
  const to = (...names: string[]) => [{ name: 'device_id', criteria: names.map((n) => d[n]!.id) }];
  /** What each device was shown (its body), by device name; HMS's by request, with the tokens each carried. */
  const shown = () => {
    const byToken = new Map(Object.entries(d).map(([name, dev]) => [dev.token, name]));
    const out: Record<string, unknown> = {};
    for (const p of gw.apns.pushes) out[byToken.get(p.token)!] = (p.payload as { aps: { alert: unknown } }).aps.alert;
    for (const p of gw.fcm.pushes)
      out[byToken.get(p.token)!] = (p.message as { android: { notification: { body: string } } }).android.notification.body;
    return out;
  };
  const failures = async (id: string) =>
    (await h.db.db.selectFrom('delivery_batches').select(['failed', 'failure_reason']).where('notification_id', '=', id).execute())
      .filter((b) => b.failed > 0)
      .map((b) => [b.failed, b.failure_reason]);

  it('renders device, custom and user variables per device, a missing value by its default, at APNs and FCM', async () => {
    const alert =
      'Hi {{ custom.first_name | default: "there" }} ({{ device.locale }}/{{ device.language }}, {{ user.id }}){{ custom.none }}';
    const res = await call('POST', '/v6/notifications', {
      notification: { to: to('ana', 'bo'), payload: { alert, ref: '{{ custom.points | plus: 1 }}' } },
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(await finished(res.json().id)).toMatchObject({ state: 'sent', pushes_succeeded: 2 });
    expect(shown()).toEqual({ ana: 'Hi Ana (pt_BR/pt, u-ana)', bo: 'Hi Bo (en_US/en, u-bo)' });
    expect(gw.apns.pushes[0]!.payload).toMatchObject({ ref: '121' });
    expect((gw.fcm.pushes[0]!.message as { data: Record<string, string> }).data.ref).toBe('1');
  });

  it('renders a one-attribute template by the value itself, an array, a number or a missing one as any other', async () => {
    d.cara = await registerDevice(h, keys.sdk, { platform: 'ios', custom: custom({ first_name: ['string', ['Cara', 'C']] }) });
    d.dan = await registerDevice(h, keys.sdk, { platform: 'android', custom: custom({ first_name: ['integer', 7] }) });
    d.ana2 = await registerDevice(h, keys.sdk, { platform: 'android', custom: custom({ first_name: ['string', 'Ana'] }) });
    const alert = 'Hi {{ custom.first_name | default: "there" }} \u2028"\\';
    const res = await call('POST', '/v6/notifications', {
      notification: { to: to('ana', 'bo', 'anon', 'cara', 'dan', 'ana2'), payload: { alert } },
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(await finished(res.json().id)).toMatchObject({ state: 'sent', pushes_succeeded: 6 });
    const as = (first_name: unknown) => renderTemplate(parseTemplate(alert), { custom: { first_name } });
    expect(shown()).toEqual({
      ana: as('Ana'),
      ana2: as('Ana'),
      bo: as('Bo'),
      anon: as(undefined),
      cara: as(['Cara', 'C']),
      dan: as(7),
    });
    expect(new Set(Object.values(shown())).size).toBe(5);
  });

  it('renders data, and data_by per user id and device id, in a broadcast and a transactional send', async () => {
    const res = await call('POST', '/v6/notifications', {
      notification: {
        to: '*',
        payload: { alert: '{{ data.greeting }} {{ data.order }}' },
        data: { greeting: 'Hello', order: 'none' },
        data_by: { user_id: { 'u-ana': { order: 'A-1' } }, device_id: { [d.bo!.id]: { order: 'B-2', greeting: 'Yo' } } },
      },
    });
    expect(res.statusCode, res.body).toBe(201);
    await finished(res.json().id);
    expect(shown()).toMatchObject({ ana: 'Hello A-1', bo: 'Yo B-2', anon: 'Hello none' });
    gw.reset();
    const tx = await call('POST', '/v6/transactional/notifications', {
      to: { field: 'user_id', value: 'u-ana' },
      group: 'login-code',
      notification: { payload: { alert: 'Your code is {{ data.code }}' }, data: { code: '493021' } },
    });
    expect(tx.statusCode, tx.body).toBe(200);
    expect(shown()).toEqual({ ana: 'Your code is 493021' });
  });

  it('renders every family at HMS and at Web Push, the browser document decrypted by the push service', async () => {
    const alert =
      '{{ custom.first_name }} ({{ device.platform }} {{ device.language }} v{{ device.app_version }}, {{ user.id }}): {{ data.code }}';
    const res = await call('POST', '/v6/notifications', {
      notification: {
        to: to('browser', 'hwUser'),
        payload: { alert, title: '{{ device.locale }}', web: { url: '/u/{{ user.id }}' } },
        data_by: { user_id: { 'u-wu': { code: 'W1' }, 'u-hu': { code: 'H1' } } },
      },
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(await finished(res.json().id)).toMatchObject({ state: 'sent', pushes_succeeded: 2 });
    expect(web.pushes.map((p) => p.document)).toEqual([
      expect.objectContaining({ title: 'de_DE', body: 'Wu (web de v3.0, u-wu): W1', url: '/u/u-wu' }),
    ]);
    const notification = hms.requests.map((r) => (r.message.android as { notification: Record<string, string> }).notification);
    expect(notification).toEqual([expect.objectContaining({ title: 'it_IT', body: 'Hu (huawei it v3.0, u-hu): H1' })]);
  });

  it('sends HMS one request per distinct rendered payload, its tokens together', async () => {
    const res = await call('POST', '/v6/notifications', {
      notification: { to: to('hw1', 'hw2', 'hw3'), payload: { alert: 'Hola {{ device.language }}' } },
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(await finished(res.json().id)).toMatchObject({ pushes_succeeded: 3 });
    const requests = hms.requests
      .map((r) => [(r.message.android as { notification: { body: string } }).notification.body, r.message.token.length])
      .sort();
    expect(requests).toEqual([
      ['Hola de', 1],
      ['Hola es', 2],
    ]);
  });

  it('fails alone a device whose render is too large for its gateway, or fails: payload_too_large, template_error', async () => {
    const big = await call('POST', '/v6/notifications', {
      notification: { to: to('ana', 'bo'), payload: { alert: '{% for i in (1..16) %}{{ custom.bio }}{% endfor %}!' } },
    });
    expect(big.statusCode, big.body).toBe(201);
    expect(await finished(big.json().id)).toMatchObject({ pushes_succeeded: 1, pushes_failed: 1 });
    expect(shown()).toEqual({ ana: '!' });
    expect(await failures(big.json().id)).toEqual([[1, 'payload_too_large']]);
    const byReason = async (id: string) =>
      (await call('GET', `/v6/stats/notifications/${id}/events`, undefined, keys.read)).json().pushes_rejected_by_reason;
    expect(await byReason(big.json().id)).toEqual({ payload_too_large: 1 });

    gw.reset();
    const loop = await call('POST', '/v6/notifications', {
      notification: { to: to('ana', 'anon'), payload: { alert: '{% for i in (1..custom.n) %}ab{% endfor %}' } },
    });
    expect(await finished(loop.json().id)).toMatchObject({ pushes_succeeded: 1, pushes_failed: 1 });
    expect(shown()).toEqual({ ana: 'abab' });
    expect(await failures(loop.json().id)).toEqual([[1, 'template_error']]);
    expect(await byReason(loop.json().id)).toEqual({ template_error: 1 });
  });

  it('refuses at create a template that does not parse or names an unknown variable, naming the field and the position', async () => {
    const bad = async (body: Record<string, unknown>, url = '/v6/notifications') => {
      const res = await call('POST', url, body);
      expect(res.statusCode, res.body).toBe(400);
      return res.json().error as string;
    };
    expect(await bad({ notification: { to: '*', payload: { alert: 'Hi {{ custom.name | shout }}' } } })).toBe(
      'notification.payload.alert: line 1, col 4: undefined filter: shout',
    );
    expect(await bad({ notification: { to: '*', payload: { alert: 'ok' }, localized: { fr: { title: 'x {{ apps.secret }}' } } } })).toMatch(
      /^notification\.localized\.fr\.title: line 1, col 6: unknown variable "apps"/,
    );
    expect(await bad({ notification: { to: '*', payload: { alert: 'ok', deep: { link: '/c/{% include "x" %}' } } } })).toMatch(
      /^notification\.payload\.deep\.link: line 1, col 4: tag "include" not found/,
    );
    expect(await bad({ notification: { to: '*', payload: { alert: 'ok' }, data: [] } })).toMatch(
      /^notification\.data: must be a JSON object/,
    );
    expect(await bad({ notification: { to: '*', payload: { alert: 'ok' }, data: { big: 'x'.repeat(5000) } } })).toMatch(
      /^notification\.data: must be at most 4096 bytes/,
    );
  });

  it("names the cart's items from the trigger event's properties in a journey's send, per entrant", async () => {
    const alert =
      '{{ event.properties.items | size }} items wait: {{ event.properties.items | map: "name" | join: ", " }} ({{ event.name }})';
    const journey = {
      name: 'Cart',
      trigger: { event: 'cart_abandoned' },
      steps: [{ id: 'remind', type: 'send', notification: { payload: { alert } } }],
    };
    expect((await call('POST', '/v6/journeys', { journey })).statusCode).toBe(201);
    const cart = (items: string[]) => ({ events: [{ name: 'cart_abandoned', properties: { items: items.map((name) => ({ name })) } }] });
    expect((await call('POST', `/v6/devices/${d.ana!.id}/events`, cart(['Tea', 'Mug']), keys.sdk)).statusCode).toBe(202);
    expect((await call('POST', `/v6/devices/${d.bo!.id}/events`, cart(['Pan']), keys.sdk)).statusCode).toBe(202);
    await waitFor('both reminders', async () => (Object.keys(shown()).length === 2 ? true : null));
    expect(shown()).toEqual({ ana: '2 items wait: Tea, Mug (cart_abandoned)', bo: '1 items wait: Pan (cart_abandoned)' });
    // the properties are bounded, and not kept in the per-device aggregates
    const deep = { events: [{ name: 'x', properties: { a: { b: { c: { d: { e: { f: 1 } } } } } } }] };
    const refused = await call('POST', `/v6/devices/${d.ana!.id}/events`, deep, keys.sdk);
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toBe('events[0].properties: must nest at most 5 levels deep');
  });

  it('previews what each gateway would receive for a device, rendered, and its language', async () => {
    const body = {
      notification: {
        to: '*',
        payload: { alert: 'Hi {{ custom.first_name | default: "there" }} {{ data.code }}' },
        localized: { pt: { alert: 'Oi {{ custom.first_name }} {{ data.code }}' } },
        data: { code: '7' },
      },
    };
    const forAna = (await call('POST', `/v6/notifications/preview?device_id=${d.ana!.id}`, body, keys.read)).json();
    expect(forAna.localized).toBe('pt');
    expect(forAna.apns.body.aps.alert).toBe('Oi Ana 7');
    expect(forAna.fcm.body.message.android.notification.body).toBe('Oi Ana 7');
    expect(JSON.parse(forAna.hms.message.data).alert).toBe('Oi Ana 7');
    expect(forAna.web.document.body).toBe('Oi Ana 7');
    const anyone = (await call('POST', '/v6/notifications/preview', body, keys.read)).json();
    expect(anyone.apns.body.aps.alert).toBe('Hi there 7');
    const unknown = await call('POST', '/v6/notifications/preview?device_id=00000000-0000-0000-0000-000000000000', body, keys.read);
    expect(unknown.statusCode).toBe(404);
  });

  it('refuses the sdk key data and templated sends', async () => {
    const res = await call(
      'POST',
      '/v6/notifications',
      { notification: { to: '*', payload: { alert: '{{ data.a }}' }, data: { a: 1 } } },
      keys.sdk,
    );
    expect(res.statusCode).toBe(403);
    const tx = await call(
      'POST',
      '/v6/transactional/notifications',
      { to: { field: 'user_id', value: 'u-ana' }, group: 'x-x-x', notification: { payload: { alert: 'a' }, data: { a: 1 } } },
      keys.sdk,
    );
    expect(tx.statusCode).toBe(403);
    expect(gw.apns.pushes.length + gw.fcm.pushes.length).toBe(0);
  });
});
