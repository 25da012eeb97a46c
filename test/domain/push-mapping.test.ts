import { describe, expect, it } from 'vitest';
import {
  APNS_MAX_PAYLOAD_BYTES,
  SURELY_FITS_BYTES,
  fcmDataValue,
  fcmSendBody,
  fcmSendBodyEncoder,
  gatewaySizeProblem,
  isVisiblePush,
  jsonBytes,
  toApnsRequest,
  toFcmMessage,
  toHmsMessage,
  toWebPushMessage,
  webPushTopic,
} from '../../src/domain/push-mapping.js';
import { webPushRecordBytes } from '../../src/domain/web-push.js';

const NID = 'n_123';

describe('toApnsRequest', () => {
  it('sends a lone alert as a string', () => {
    const r = toApnsRequest({ alert: 'Hello' }, NID);
    expect(r.body).toEqual({ aps: { alert: 'Hello' }, _nid: NID });
    expect(r.headers).toEqual({ 'apns-push-type': 'alert', 'apns-priority': 10 });
  });

  it('builds an alert object when there is a title or subtitle', () => {
    expect(toApnsRequest({ alert: 'Body', title: 'Title', subtitle: 'Sub' }, NID).body.aps).toEqual({
      alert: { title: 'Title', subtitle: 'Sub', body: 'Body' },
    });
    expect(toApnsRequest({ title: 'Only title' }, NID).body.aps).toEqual({ alert: { title: 'Only title' } });
    expect(toApnsRequest({ alert: 'B', subtitle: 'S' }, NID).body.aps).toEqual({ alert: { subtitle: 'S', body: 'B' } });
  });

  it('maps every iOS key into aps with the gateway names', () => {
    const r = toApnsRequest(
      {
        alert: 'a',
        badge: 3,
        sound: 'ping.aiff',
        content_available: true,
        mutable_content: true,
        category: 'REPLY',
        interruption_level: 'time-sensitive',
        relevance_score: 0.75,
      },
      NID,
    );
    expect(r.body.aps).toEqual({
      alert: 'a',
      badge: 3,
      sound: 'ping.aiff',
      'content-available': 1,
      'mutable-content': 1,
      category: 'REPLY',
      'interruption-level': 'time-sensitive',
      'relevance-score': 0.75,
    });
    // content_available with something shown stays an alert push
    expect(r.headers).toEqual({ 'apns-push-type': 'alert', 'apns-priority': 10 });
  });

  it('keeps badge 0 (it clears the badge) and drops false switches', () => {
    expect(toApnsRequest({ badge: 0, content_available: false, mutable_content: false }, NID).body.aps).toEqual({ badge: 0 });
  });

  it('makes a silent content_available push a background push with priority 5', () => {
    const r = toApnsRequest({ content_available: true, foo: 'bar' }, NID);
    expect(r.headers).toEqual({ 'apns-push-type': 'background', 'apns-priority': 5 });
    expect(r.body).toEqual({ aps: { 'content-available': 1 }, foo: 'bar', _nid: NID });
  });

  it('keeps alert type when a background push would carry badge or sound (Apple forbids them there)', () => {
    expect(toApnsRequest({ content_available: true, badge: 1 }, NID).headers['apns-push-type']).toBe('alert');
    expect(toApnsRequest({ content_available: true, sound: 'x' }, NID).headers['apns-push-type']).toBe('alert');
    expect(toApnsRequest({ content_available: true, title: 't' }, NID).headers['apns-push-type']).toBe('alert');
  });

  it('puts collapse_key in the apns-collapse-id header, not the body', () => {
    const r = toApnsRequest({ alert: 'a', collapse_key: 'score' }, NID);
    expect(r.headers['apns-collapse-id']).toBe('score');
    expect(r.body).not.toHaveProperty('collapse_key');
  });

  it('passes custom keys through at top level unchanged and drops _channel_id', () => {
    const custom = { _u: 'app://x', _st: { image_url: 'https://i', mid: 'm1' }, n: 1, list: [1, 'a'], flag: false, nul: null };
    const r = toApnsRequest({ alert: 'a', _channel_id: 'news', ...custom }, NID);
    expect(r.body).toEqual({ ...custom, aps: { alert: 'a' }, _nid: NID });
  });

  it('always carries _nid and never lets a payload override aps or _nid', () => {
    const r = toApnsRequest({ alert: 'a', aps: { badge: 99 }, _nid: 'forged' }, NID);
    expect(r.body.aps).toEqual({ alert: 'a' });
    expect(r.body._nid).toBe(NID);
  });

  it('sends an empty aps for a payload with only custom keys', () => {
    const r = toApnsRequest({ foo: 'bar' }, NID);
    expect(r.body).toEqual({ foo: 'bar', aps: {}, _nid: NID });
    expect(r.headers['apns-push-type']).toBe('alert');
  });

  it('reports the UTF-8 byte size of the body', () => {
    const r = toApnsRequest({ alert: 'é€😀' }, NID);
    expect(r.bytes).toBe(Buffer.byteLength(JSON.stringify(r.body)));
    expect(r.bytes).toBeGreaterThan(JSON.stringify(r.body).length);
    expect(toApnsRequest({ alert: 'x'.repeat(5000) }, NID).bytes).toBeGreaterThan(APNS_MAX_PAYLOAD_BYTES);
  });

  it('ignores known keys of the wrong type rather than sending garbage', () => {
    expect(toApnsRequest({ alert: 5, badge: '3', content_available: 'yes' }, NID).body.aps).toEqual({});
  });
});

describe('toFcmMessage', () => {
  it('maps alert and title to an Android notification and keeps them in data for the SDK', () => {
    const m = toFcmMessage({ alert: 'Body', title: 'Title' }, NID);
    expect(m.android).toEqual({ priority: 'HIGH', notification: { title: 'Title', body: 'Body' } });
    expect(m.data).toEqual({ alert: 'Body', title: 'Title', _nid: NID });
  });

  it('maps _channel_id, category and collapse_key to the Android fields', () => {
    const m = toFcmMessage({ alert: 'a', _channel_id: 'news', category: 'REPLY', collapse_key: 'score' }, NID);
    expect(m.android).toEqual({
      priority: 'HIGH',
      collapse_key: 'score',
      notification: { body: 'a', channel_id: 'news', tag: 'score', click_action: 'REPLY' },
    });
    expect(m.data.category).toBe('REPLY');
    expect(m.data).not.toHaveProperty('_channel_id');
    expect(m.data).not.toHaveProperty('collapse_key');
  });

  it('puts badge, sound, custom keys and _nid in data, all as strings', () => {
    const m = toFcmMessage(
      { alert: 'a', badge: 4, sound: 'ding', _u: 'app://x', _st: { mid: 'm1' }, n: 1.5, b: true, nul: null, s: 'plain' },
      NID,
    );
    expect(m.data).toEqual({
      alert: 'a',
      badge: '4',
      sound: 'ding',
      _u: 'app://x',
      _st: '{"mid":"m1"}',
      n: '1.5',
      b: 'true',
      nul: 'null',
      s: 'plain',
      _nid: NID,
    });
    for (const v of Object.values(m.data)) expect(typeof v).toBe('string');
  });

  it('drops iOS-only switches', () => {
    const m = toFcmMessage(
      { alert: 'a', content_available: true, mutable_content: true, interruption_level: 'passive', relevance_score: 0.5 },
      NID,
    );
    expect(Object.keys(m.data).sort()).toEqual(['_nid', 'alert']);
  });

  it('sends a data message (no notification, normal priority) when nothing is shown', () => {
    const m = toFcmMessage({ foo: 'bar', category: 'C', collapse_key: 'k', _channel_id: 'ch' }, NID);
    expect(m.android).toEqual({ priority: 'NORMAL', collapse_key: 'k' });
    expect(m.data).toEqual({ foo: 'bar', category: 'C', _nid: NID });
  });

  it('never lets a payload override _nid', () => {
    expect(toFcmMessage({ _nid: 'forged' }, NID).data._nid).toBe(NID);
  });

  it('builds the v1 send body with the token', () => {
    const body = fcmSendBody(toFcmMessage({ alert: 'a' }, NID), 'tok');
    expect(body).toEqual({
      message: { token: 'tok', data: { alert: 'a', _nid: NID }, android: { priority: 'HIGH', notification: { body: 'a' } } },
    });
  });

  it('encodes the send body per token exactly as JSON.stringify of the whole body would', () => {
    const template = toFcmMessage({ alert: 'héllo "x"', title: 't', n: 3, list: [1, 'a'], collapse_key: 'k', _channel_id: 'ch' }, NID);
    const encode = fcmSendBodyEncoder(template);
    for (const token of ['tok', 'a"b\\c', 'ü:APA91b-_x']) {
      expect(encode(token)).toBe(JSON.stringify(fcmSendBody(template, token)));
      expect(JSON.parse(encode(token))).toEqual(fcmSendBody(template, token));
    }
  });
});

describe('delivery options: expiry and priority', () => {
  const NOW = new Date('2026-05-01T12:00:00.000Z');
  const expiresAt = new Date('2026-05-01T13:30:00.900Z');
  const unix = Math.floor(expiresAt.getTime() / 1000);

  it('APNs: apns-expiration is the expiry in unix seconds, rounded down', () => {
    expect(toApnsRequest({ alert: 'a' }, NID, { expiresAt }).headers).toEqual({
      'apns-push-type': 'alert',
      'apns-priority': 10,
      'apns-expiration': unix,
    });
    expect(unix).toBe(Date.parse('2026-05-01T13:30:00Z') / 1000);
    expect(toApnsRequest({ alert: 'a' }, NID, { expiresAt: null }).headers).not.toHaveProperty('apns-expiration');
  });

  it('APNs: high is priority 10, normal 5, unset keeps 10 for a shown push', () => {
    const priority = (p: 'high' | 'normal' | null) => toApnsRequest({ alert: 'a' }, NID, { priority: p }).headers['apns-priority'];
    expect(priority('high')).toBe(10);
    expect(priority('normal')).toBe(5);
    expect(priority(null)).toBe(10);
  });

  it('APNs: a background push stays at priority 5 whatever is asked (Apple refuses 10 for it)', () => {
    for (const p of ['high', 'normal', null] as const) {
      expect(toApnsRequest({ content_available: true, foo: 1 }, NID, { priority: p }).headers).toEqual({
        'apns-push-type': 'background',
        'apns-priority': 5,
      });
    }
    // with something shown it is an alert push, and takes the asked priority
    expect(toApnsRequest({ content_available: true, badge: 1 }, NID, { priority: 'normal' }).headers['apns-priority']).toBe(5);
  });

  it('FCM: android.ttl is the whole seconds left at sending, never negative', () => {
    expect(toFcmMessage({ alert: 'a' }, NID, { expiresAt, now: NOW }).android).toEqual({
      priority: 'HIGH',
      ttl: '5400s',
      notification: { body: 'a' },
    });
    expect(toFcmMessage({ alert: 'a' }, NID, { expiresAt, now: new Date('2026-05-01T13:30:00.000Z') }).android.ttl).toBe('0s');
    expect(toFcmMessage({ alert: 'a' }, NID, { expiresAt, now: new Date('2026-05-02T00:00:00Z') }).android.ttl).toBe('0s');
    expect(toFcmMessage({ alert: 'a' }, NID, { expiresAt: null, now: NOW }).android).not.toHaveProperty('ttl');
  });

  it('FCM: high is HIGH, normal is NORMAL, for notification and data messages alike; unset keeps the defaults', () => {
    const priority = (payload: Record<string, unknown>, p: 'high' | 'normal' | null) =>
      toFcmMessage(payload, NID, { priority: p, now: NOW }).android.priority;
    expect(priority({ alert: 'a' }, 'normal')).toBe('NORMAL');
    expect(priority({ alert: 'a' }, 'high')).toBe('HIGH');
    expect(priority({ alert: 'a' }, null)).toBe('HIGH');
    expect(priority({ foo: 'bar' }, 'high')).toBe('HIGH');
    expect(priority({ foo: 'bar' }, 'normal')).toBe('NORMAL');
    expect(priority({ foo: 'bar' }, null)).toBe('NORMAL');
  });

  it('the options change no payload field', () => {
    const payload = { alert: 'a', title: 't', foo: 'bar' };
    const options = { expiresAt, priority: 'normal' as const };
    expect(toApnsRequest(payload, NID, options).body).toEqual(toApnsRequest(payload, NID).body);
    expect(toFcmMessage(payload, NID, { ...options, now: NOW }).data).toEqual(toFcmMessage(payload, NID).data);
    expect(toFcmMessage(payload, NID, { ...options, now: NOW }).android.notification).toEqual(
      toFcmMessage(payload, NID).android.notification,
    );
  });
});

describe('helpers', () => {
  it('fcmDataValue keeps strings and JSON-encodes the rest', () => {
    expect(fcmDataValue('x')).toBe('x');
    expect(fcmDataValue('')).toBe('');
    expect(fcmDataValue(0)).toBe('0');
    expect(fcmDataValue([1, 'a'])).toBe('[1,"a"]');
  });

  it('jsonBytes counts UTF-8 bytes', () => {
    expect(jsonBytes({ a: 'é' })).toBe(Buffer.byteLength('{"a":"é"}'));
  });
});

describe('isVisiblePush (what a device whose notifications are Disabled is not sent)', () => {
  it.each<[Record<string, unknown>, boolean]>([
    [{ alert: 'a' }, true],
    [{ title: 't' }, true],
    [{ subtitle: 's' }, true],
    [{ badge: 0 }, true],
    [{ sound: 'default' }, true],
    [{ content_available: true, badge: 1 }, true],
    [{ content_available: true }, false],
    [{ content_available: true, mutable_content: true, category: 'C', interruption_level: 'passive' }, false],
    [{ order: 'o-1', _u: 'https://example.com' }, false],
  ])('%j -> %s, as APNs tells alert from background', (payload, visible) => {
    expect(isVisiblePush(payload)).toBe(visible);
    if (payload.content_available) expect(toApnsRequest(payload, NID).headers['apns-push-type']).toBe(visible ? 'alert' : 'background');
  });
});

describe('toWebPushMessage', () => {
  const now = new Date('2030-01-01T00:00:00Z');

  it('maps alert, title, collapse_key and the web object into the document; custom keys and _nid into data', () => {
    // every browser-only field passes under its own name
    const web = {
      icon: '/i.png',
      image: 'https://x.example/big.png',
      badge: '/b.png',
      url: '/orders/1',
      actions: [{ action: 'open', title: 'Open', url: '/o' }],
      require_interaction: true,
      silent: false,
      renotify: true,
      dir: 'rtl',
      lang: 'ar',
    };
    const m = toWebPushMessage(
      {
        alert: 'Body',
        title: 'Title',
        subtitle: 'phones only',
        badge: 3,
        sound: 'ping.aiff',
        collapse_key: 'c1',
        plan: 'pro',
        nested: { a: 1 },
        web,
      },
      NID,
      { now },
    );
    expect(m.document).toEqual({
      title: 'Title',
      body: 'Body',
      tag: 'c1',
      ...web,
      data: { plan: 'pro', nested: { a: 1 }, _nid: NID },
    });
    expect(JSON.parse(m.body.toString())).toEqual(m.document);
    expect(m.headers).toEqual({ TTL: '2419200', Urgency: 'high', Topic: webPushTopic('c1') });
  });

  it('TTL is the whole seconds left before the expiry; priority gives Urgency; a silent push is normal', () => {
    const expiresAt = new Date(now.getTime() + 90_500);
    expect(toWebPushMessage({ alert: 'a' }, NID, { now, expiresAt, priority: 'normal' }).headers).toEqual({ TTL: '90', Urgency: 'normal' });
    expect(toWebPushMessage({ x: 1 }, NID, { now }).headers.Urgency).toBe('normal');
    expect(toWebPushMessage({ x: 1 }, NID, { now, priority: 'high' }).headers.Urgency).toBe('high');
  });

  it('hashes any collapse_key into a Topic of 32 URL-safe characters, the same for the same key', () => {
    const topic = webPushTopic('a key with spaces and ünïcode that is far longer than thirty-two characters');
    expect(topic).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(webPushTopic('k')).toBe(webPushTopic('k'));
    expect(webPushTopic('k')).not.toBe(webPushTopic('l'));
  });

  it('keeps the web object away from APNs and FCM', () => {
    const payload = { alert: 'a', web: { url: '/x' } };
    expect(toApnsRequest(payload, NID).body).not.toHaveProperty('web');
    expect(toFcmMessage(payload, NID).data).not.toHaveProperty('web');
  });
});

describe('gatewaySizeProblem', () => {
  const ID = '00000000-0000-0000-0000-000000000000'; // ids are UUIDs: the measure uses one of that length
  const apnsBytes = (payload: Record<string, unknown>) => Buffer.byteLength(JSON.stringify(toApnsRequest(payload, ID).body));
  const fcmBytes = (payload: Record<string, unknown>) => Buffer.byteLength(JSON.stringify(toFcmMessage(payload, ID)));
  const webBytes = (payload: Record<string, unknown>) => webPushRecordBytes(toWebPushMessage(payload, ID).body.length);
  const hmsBytes = (payload: Record<string, unknown>) => Buffer.byteLength(JSON.stringify(toHmsMessage(payload, ID)));

  it('accepts a payload whose larger mapping is exactly 4096 bytes and refuses one byte more', () => {
    // A custom string travels once in each mapping, so each added character adds one byte to all four.
    const base = Math.max(apnsBytes({ x: '' }), fcmBytes({ x: '' }), webBytes({ x: '' }), hmsBytes({ x: '' }));
    const fits = { x: 'a'.repeat(4096 - base) };
    expect(Math.max(apnsBytes(fits), fcmBytes(fits), webBytes(fits), hmsBytes(fits))).toBe(4096);
    expect(gatewaySizeProblem(fits)).toBeNull();
    const over = { x: 'a'.repeat(4097 - base) };
    expect(gatewaySizeProblem(over)).toMatch(
      /^is too large: it maps to .*4097 bytes (\((APNs|FCM|Huawei Push Kit) accepts|once encrypted \(push services accept) at most 4096\)$/,
    );
  });

  it('measures without mapping only payloads no mapping can take past a limit (SURELY_FITS_BYTES)', () => {
    // the shapes that grow most once mapped, filled to the threshold: what HMS and FCM carry twice, one of them as
    // JSON inside JSON, with characters that escaping doubles; a non-string custom value FCM sends as its JSON
    const worst = (fill: string) => {
      const shapes = [
        (s: string) => ({ alert: s, title: s, category: s, _u: s }),
        (s: string) => ({ alert: s, x: [s], web: { url: s, actions: [{ action: s, title: s }] }, collapse_key: 'k' }),
        (s: string) => ({ x: { y: [s, s, s] }, _channel_id: s, subtitle: s, badge: 1, sound: s }),
      ];
      return shapes.map((shape) => {
        let n = 0;
        while (jsonBytes(shape(fill.repeat(n + 1))) <= SURELY_FITS_BYTES) n += 1;
        return shape(fill.repeat(n));
      });
    };
    for (const payload of [...worst('"'), ...worst('\\'), ...worst('\u0001'), ...worst('é"')]) {
      expect(jsonBytes(payload)).toBeLessThanOrEqual(SURELY_FITS_BYTES);
      expect(jsonBytes(payload)).toBeGreaterThan(SURELY_FITS_BYTES - 40);
      expect(Math.max(apnsBytes(payload), fcmBytes(payload), webBytes(payload), hmsBytes(payload))).toBeLessThanOrEqual(4096);
      expect(gatewaySizeProblem(payload)).toBeNull();
    }
    // just past it the payload is mapped and measured: one 4 times its size is refused
    const measured = { alert: '"'.repeat(SURELY_FITS_BYTES / 2), title: '"'.repeat(SURELY_FITS_BYTES / 2) };
    expect(gatewaySizeProblem(measured)).toMatch(/^is too large: it maps to an FCM message of \d+ bytes/);
  });

  it('names the gateway, the size and the limit; each that refuses', () => {
    const twice = { alert: 'a'.repeat(2100) }; // FCM and HMS carry the alert twice (notification and data)
    expect(gatewaySizeProblem(twice)).toBe(
      `is too large: it maps to an FCM message of ${fcmBytes(twice)} bytes (FCM accepts at most 4096) and an HMS message of ${hmsBytes(twice)} bytes (Huawei Push Kit accepts at most 4096)`,
    );
    const both = { alert: 'a'.repeat(5000) };
    expect(gatewaySizeProblem(both)).toBe(
      `is too large: it maps to an APNs payload of ${apnsBytes(both)} bytes (APNs accepts at most 4096) and an FCM message of ${fcmBytes(both)} bytes (FCM accepts at most 4096) and a Web Push record of ${webBytes(both)} bytes once encrypted (push services accept at most 4096) and an HMS message of ${hmsBytes(both)} bytes (Huawei Push Kit accepts at most 4096)`,
    );
  });
});

describe('toHmsMessage', () => {
  const now = new Date('2030-01-01T00:00:00Z');

  it('maps a shown push: notification, click_action from _u, tag from collapse_key, HMS category, data as one JSON string', () => {
    const payload = { alert: 'Hi', title: 'T', collapse_key: 'c', category: 'IM', _u: 'https://e.com/x', badge: 3, n: { a: 1 } };
    expect(toHmsMessage(payload, NID)).toEqual({
      data: JSON.stringify({ alert: 'Hi', title: 'T', category: 'IM', _u: 'https://e.com/x', badge: 3, n: { a: 1 }, _nid: NID }),
      android: {
        urgency: 'HIGH',
        category: 'IM',
        notification: { title: 'T', body: 'Hi', tag: 'c', click_action: { type: 2, url: 'https://e.com/x' } },
      },
    });
  });

  it('opens the app when _u is not an http(s) URL, and keeps a category HMS does not know in data only', () => {
    const m = toHmsMessage({ alert: 'Hi', _u: 'myapp://orders', category: 'SHOP' }, NID);
    expect(m.android).toEqual({ urgency: 'HIGH', notification: { body: 'Hi', click_action: { type: 3 } } });
    expect(JSON.parse(m.data)).toEqual({ alert: 'Hi', _u: 'myapp://orders', category: 'SHOP', _nid: NID });
  });

  it('is a data message at NORMAL urgency when nothing is shown; priority and expiry give urgency and ttl (at most 15 days)', () => {
    expect(toHmsMessage({ content_available: true, k: 'v' }, NID)).toEqual({
      data: JSON.stringify({ k: 'v', _nid: NID }),
      android: { urgency: 'NORMAL' },
    });
    const soon = toHmsMessage({ alert: 'a' }, NID, { now, priority: 'normal', expiresAt: new Date(now.getTime() + 90_500) });
    expect(soon.android).toMatchObject({ urgency: 'NORMAL', ttl: '90s' });
    const far = toHmsMessage({ k: 'v' }, NID, { now, priority: 'high', expiresAt: new Date(now.getTime() + 40 * 86_400_000) });
    expect(far.android).toEqual({ urgency: 'HIGH', ttl: `${15 * 86_400}s` });
  });
});
