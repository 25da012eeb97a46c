import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';

/**
 * Content per language, end to end: notifications, a message's push and a transactional send with `localized`,
 * delivered by the real workers and the direct path through the real APNs and FCM clients to the HTTP/2 mocks;
 * each device receives the entry of its locale, else of its language, else the payload.
 */
describe('content per language', () => {
  let h: Harness;
  let gw: Gateways;
  let keys: { read: string; write: string; sdk: string };
  let d: Record<string, RegisteredDevice>;

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, env: { ...gw.env, RETRY_BASE_MS: '40', RETRY_MAX_MS: '1000' } });
    const created = await h.createApp('com.example.localized');
    keys = created.keys;
    await setCredentials(h, created.app.id, gw);
    d = {
      iosFr: await registerDevice(h, keys.sdk, { platform: 'ios', locale: 'fr_FR', user_id: 'amelie' }),
      androidFrCa: await registerDevice(h, keys.sdk, { platform: 'android', locale: 'fr_CA', user_id: 'amelie' }),
      iosPtBr: await registerDevice(h, keys.sdk, { platform: 'ios', locale: 'pt_BR' }),
      androidPtPt: await registerDevice(h, keys.sdk, { platform: 'android', locale: 'pt_PT' }),
      androidEn: await registerDevice(h, keys.sdk, { platform: 'android', locale: 'en_US' }),
      iosNone: await registerDevice(h, keys.sdk, { platform: 'ios' }),
    };
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });
  beforeEach(() => gw.reset());

  const call = (method: 'GET' | 'POST', url: string, payload?: unknown, key = keys.write) =>
    h.server.inject({ method, url, headers: { authorization: basic(key) }, payload: payload as Record<string, unknown> });
  const finished = (id: string) =>
    waitFor(`notification ${id} to finish`, async () => {
      const n = (await call('GET', `/v6/notifications/${id}`, undefined, keys.read)).json();
      return n.state === 'sent' || n.state === 'failed' ? n : null;
    });
  /** What each device was shown: title and body, by device name. */
  const shown = () => {
    const byToken = new Map(Object.entries(d).map(([name, dev]) => [dev.token, name]));
    const out: Record<string, { title?: string; body?: string }> = {};
    for (const p of gw.apns.pushes) {
      const alert = (p.payload as { aps: { alert: string | { title?: string; body?: string } } }).aps.alert;
      out[byToken.get(p.token)!] = typeof alert === 'string' ? { body: alert } : { title: alert.title, body: alert.body };
    }
    for (const p of gw.fcm.pushes) {
      const n = (p.message as { android: { notification: { title?: string; body?: string } } }).android.notification;
      out[byToken.get(p.token)!] = { ...(n.title !== undefined && { title: n.title }), body: n.body };
    }
    return out;
  };
  const localized = {
    fr: { alert: 'Bonjour' },
    fr_CA: { alert: 'Allô' },
    'pt-br': { alert: 'Olá', title: 'Oi' },
  };

  it('sends each device of a broadcast its locale, else its language, else the payload; the record keeps localized', async () => {
    const res = await call('POST', '/v6/notifications', {
      notification: { to: '*', payload: { alert: 'Hello', sound: 'ding.caf', deep: 'x://y' }, localized },
    });
    expect(res.statusCode, res.body).toBe(201);
    const n = res.json();
    expect(n.notification.localized).toEqual({ fr: { alert: 'Bonjour' }, fr_CA: { alert: 'Allô' }, pt_BR: { alert: 'Olá', title: 'Oi' } });
    expect(await finished(n.id)).toMatchObject({ state: 'sent', devices_targeted: 6, pushes_succeeded: 6, pushes_failed: 0 });
    expect(shown()).toEqual({
      iosFr: { body: 'Bonjour' },
      androidFrCa: { body: 'Allô' },
      iosPtBr: { title: 'Oi', body: 'Olá' },
      androidPtPt: { body: 'Hello' },
      androidEn: { body: 'Hello' },
      iosNone: { body: 'Hello' },
    });
    // what is not text is the payload's in every language, and each device got exactly one push
    const fr = gw.apns.pushes.find((p) => p.token === d.iosFr!.token)!.payload as Record<string, unknown>;
    expect(fr).toMatchObject({ aps: { sound: 'ding.caf' }, deep: 'x://y', _nid: n.id });
    expect(gw.apns.pushes.length + gw.fcm.pushes.length).toBe(6);
  });

  it('picks the language of a device whose locale changed since the notification was created', async () => {
    const res = await call('POST', '/v6/notifications', {
      notification: { to: [{ name: 'device_id', criteria: [d.androidEn!.id] }], payload: { alert: 'Hello' }, localized },
    });
    expect(res.statusCode, res.body).toBe(201);
    await finished(res.json().id);
    expect(shown()).toEqual({ androidEn: { body: 'Hello' } });
    gw.reset();
    await registerDevice(h, keys.sdk, { platform: 'android', token: d.androidEn!.token, locale: 'fr_BE' });
    const again = await call('POST', '/v6/notifications', {
      notification: { to: [{ name: 'device_id', criteria: [d.androidEn!.id] }], payload: { alert: 'Hello' }, localized },
    });
    await finished(again.json().id);
    expect(shown()).toEqual({ androidEn: { body: 'Bonjour' } });
    await registerDevice(h, keys.sdk, { platform: 'android', token: d.androidEn!.token, locale: 'en_US' });
  });

  it('sends a transactional send and a message push per language', async () => {
    const res = await call('POST', '/v6/transactional/notifications', {
      to: { field: 'user_id', value: 'amelie' },
      group: 'order-shipped',
      notification: { payload: { alert: 'Shipped' }, localized: { fr: { alert: 'Expédié' }, fr_CA: { alert: 'Envoyé' } } },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().results).toMatchObject({ success: 2 });
    expect(shown()).toEqual({ iosFr: { body: 'Expédié' }, androidFrCa: { body: 'Envoyé' } });

    gw.reset();
    const message = await call('POST', '/v6/messages', {
      message: {
        to: [{ name: 'user_id', criteria: ['amelie'] }],
        title: 'Sale',
        notification: { payload: { alert: 'Sale today' }, localized: { fr: { alert: 'Soldes' } } },
      },
    });
    expect(message.statusCode, message.body).toBe(201);
    await finished(message.json().notification_id);
    expect(shown()).toEqual({ iosFr: { body: 'Soldes' }, androidFrCa: { body: 'Soldes' } });
    // the message id rides in every language's push
    const fr = gw.apns.pushes[0]!.payload as { _st: { mid: string } };
    expect(fr._st.mid).toBe(message.json().id);
  });

  it('retries a push left to retry in its own language, and a collapse_key update without localized sends the payload', async () => {
    gw.apns.faults.forToken(d.iosFr!.token, { type: 'status', status: 503, reason: 'ServiceUnavailable' }, 1);
    const first = await call('POST', '/v6/notifications', {
      notification: { to: '*', payload: { alert: 'Hello', collapse_key: 'promo' }, localized },
    });
    expect(first.statusCode, first.body).toBe(201);
    expect(await finished(first.json().id)).toMatchObject({ pushes_succeeded: 6, pushes_failed: 0 });
    const fr = gw.apns.answers.filter((a) => a.token === d.iosFr!.token);
    expect(fr.map((a) => a.status)).toEqual([503, 200]);
    expect(shown().iosFr).toEqual({ body: 'Bonjour' });
    expect(gw.apns.pushes.length + gw.fcm.pushes.length).toBe(6);

    gw.reset();
    const second = await call('POST', '/v6/notifications', {
      notification: { to: '*', payload: { alert: 'Hello again', collapse_key: 'promo' } },
    });
    expect(second.json().id).toBe(first.json().id);
    expect(second.json().notification.localized).toBeUndefined();
    await waitFor('the update to be sent', async () => gw.apns.pushes.length + gw.fcm.pushes.length === 6);
    expect(new Set(Object.values(shown()).map((x) => x.body))).toEqual(new Set(['Hello again']));
  });

  it('previews the requests of one locale', async () => {
    const body = { notification: { to: '*', payload: { alert: 'Hello', title: 'Hi' }, localized } };
    const ptBr = await call('POST', '/v6/notifications/preview?locale=pt-BR', body, keys.read);
    expect(ptBr.statusCode, ptBr.body).toBe(200);
    expect(ptBr.json().localized).toBe('pt_BR');
    expect(ptBr.json().apns.body.aps.alert).toEqual({ title: 'Oi', body: 'Olá' });
    expect(ptBr.json().fcm.body.message.android.notification).toMatchObject({ title: 'Oi', body: 'Olá' });
    expect(ptBr.json().web.document).toMatchObject({ title: 'Oi', body: 'Olá' });
    const frBe = await call('POST', '/v6/notifications/preview?locale=fr_BE', body, keys.read);
    expect(frBe.json().localized).toBe('fr');
    expect(frBe.json().apns.body.aps.alert).toEqual({ title: 'Hi', body: 'Bonjour' });
    const de = await call('POST', '/v6/notifications/preview?locale=de', body, keys.read);
    expect(de.json().localized).toBeNull();
    expect(de.json().apns.body.aps.alert).toEqual({ title: 'Hi', body: 'Hello' });
    const none = await call('POST', '/v6/notifications/preview', body, keys.read);
    expect(none.json().localized).toBeNull();
    const bad = await call('POST', '/v6/notifications/preview?locale=french', body, keys.read);
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toMatch(/^querystring\.locale: must be a language/);
  });

  it('refuses a language whose payload a gateway would refuse as too large, naming it, and stores nothing', async () => {
    const before = (await call('GET', '/v6/notifications', undefined, keys.read)).json().notifications.length;
    const big = 'é'.repeat(2100); // 4,200 bytes: past APNs' and FCM's 4,096
    const res = await call('POST', '/v6/notifications', {
      notification: { to: '*', payload: { alert: 'Hello' }, localized: { fr: { alert: 'Bonjour' }, de: { alert: big } } },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/^notification\.localized\.de: is too large: it maps to an APNs payload of \d+ bytes/);
    const tx = await call('POST', '/v6/transactional/notifications', {
      to: { field: 'user_id', value: 'amelie' },
      group: 'too-big',
      notification: { payload: { alert: 'x' }, localized: { fr: { alert: big } } },
    });
    expect(tx.statusCode).toBe(400);
    expect(tx.json().error).toMatch(/^notification\.localized\.fr: is too large/);
    const message = await call('POST', '/v6/messages', {
      message: { to: '*', title: 't', notification: { payload: { alert: 'x' }, localized: { fr: { alert: big } } } },
    });
    expect(message.statusCode).toBe(400);
    expect(message.json().error).toMatch(/^message\.notification\.localized\.fr: is too large/);
    expect((await call('GET', '/v6/notifications', undefined, keys.read)).json().notifications.length).toBe(before);
  });
});
