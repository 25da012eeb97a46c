import { isIP } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_INPUT_DEPTH } from '../../src/http/input-guard.js';
import { useHarness } from '../helpers/harness.js';
import { call, register, token } from './device-support.js';
import { countRows, postNotification, type AppWithKeys } from './support.js';

/**
 * Input that once answered 500 (issue 11): strings PostgreSQL cannot store, nesting that overflowed the stack,
 * payloads the gateways refuse as too large, concurrent token moves. Each is a 400 naming the field (or, for the
 * race, 200/409 with one owner), and nothing is stored.
 */

const NUL = 'must not contain a NUL character (\\u0000)';
const SURROGATE = 'must not contain a lone UTF-16 surrogate (\\ud800-\\udfff unpaired)';
const DEEP = `nests deeper than ${MAX_INPUT_DEPTH} levels of objects and arrays`;

describe('hostile input', () => {
  const h = useHarness();
  let app: AppWithKeys;
  let deviceId: string;
  const userId = 'hostile-user';
  beforeAll(async () => {
    app = await h.createApp();
    deviceId = (await register(h, app.keys.sdk, { platform: 'ios', token: token(), user_id: userId })).id;
  });

  const notification = (payload: unknown, to: unknown = '*') => ({ notification: { to, payload } });

  describe('notifications: 400 naming the field, nothing stored', () => {
    const rows: [string, unknown, string][] = [
      ['NUL in alert', notification({ alert: 'a\u0000b' }), `notification.payload.alert: ${NUL}`],
      ['NUL in a payload key', notification({ alert: 'a', 'x\u0000': 1 }), `notification.payload: key "x\\u0000" ${NUL}`],
      ['NUL as collapse_key', notification({ alert: 'a', collapse_key: '\u0000' }), `notification.payload.collapse_key: ${NUL}`],
      [
        'NUL in a filter criterion',
        notification({ alert: 'a' }, [{ name: 'locale', criteria: ['a\u0000'] }]),
        `notification.to[0].criteria[0]: ${NUL}`,
      ],
      [
        'NUL in a nested custom value',
        notification({ alert: 'a', extra: { list: ['ok', '\u0000'] } }),
        `notification.payload.extra.list[1]: ${NUL}`,
      ],
      ['lone high surrogate in a custom value', notification({ alert: 'a', extra: '\ud800' }), `notification.payload.extra: ${SURROGATE}`],
      ['lone low surrogate in alert', notification({ alert: 'x\udc00' }), `notification.payload.alert: ${SURROGATE}`],
      ['surrogates in the wrong order', notification({ alert: '\udc00\ud800' }), `notification.payload.alert: ${SURROGATE}`],
      ['lone surrogate in a key', notification({ alert: 'a', '\ud800': 1 }), `notification.payload: key "\\ud800" ${SURROGATE}`],
    ];
    it.each(rows)('%s', async (_rule, body, error) => {
      const before = await countRows(h, 'notifications', app.app.id);
      const res = await postNotification(h, app.keys.write, body);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ error });
      expect(await countRows(h, 'notifications', app.app.id)).toBe(before);
    });

    it('a surrogate pair (an emoji) is accepted and stored as sent', async () => {
      const res = await postNotification(h, app.keys.write, notification({ alert: 'hi 🎉', extra: '𝄞' }));
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().notification.payload).toEqual({ alert: 'hi 🎉', extra: '𝄞' });
    });
  });

  describe('nesting', () => {
    /** A payload whose `deep` value is `levels` arrays inside each other. */
    const nested = (levels: number) =>
      `{"notification":{"to":"*","payload":{"alert":"a","deep":${'['.repeat(levels)}${']'.repeat(levels)}}}}`;
    const post = (body: string) =>
      call(h, 'POST', '/v6/notifications', app.keys.write, body).then((res) => ({ status: res.statusCode, body: res.json() }));
    // body, notification and payload are the first three levels.
    const deepest = MAX_INPUT_DEPTH - 3;

    it('10,000 levels: 400 naming where the limit is passed', async () => {
      const res = await post(nested(10_000));
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: `notification.payload.deep${'[0]'.repeat(deepest)}: ${DEEP}` });
    });

    it(`${MAX_INPUT_DEPTH} levels in all are accepted, one more is refused`, async () => {
      expect((await post(nested(deepest))).status).toBe(201);
      expect(await post(nested(deepest + 1))).toEqual({
        status: 400,
        body: { error: `notification.payload.deep${'[0]'.repeat(deepest)}: ${DEEP}` },
      });
    });

    it('deep nesting in a device body is refused the same way', async () => {
      const body = `{"device":{"custom":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}}`;
      const res = await call(h, 'PUT', `/v6/devices/${deviceId}`, app.keys.sdk, body);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe(`device.custom${'.a'.repeat(MAX_INPUT_DEPTH - 2)}: ${DEEP}`);
    });
  });

  describe('gateway size limits, checked at POST', () => {
    // APNs: {"aps":{"alert":"<alert>"},"_nid":"<36-char id>"}: 30 bytes of JSON around the alert and the id.
    it('an alert APNs, FCM, Web Push and HMS would all refuse: 400 with each size and limit', async () => {
      const res = await postNotification(h, app.keys.write, notification({ alert: 'a'.repeat(5000) }));
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatch(
        /^notification\.payload: is too large: it maps to an APNs payload of 5066 bytes \(APNs accepts at most 4096\) and an FCM message of \d+ bytes \(FCM accepts at most 4096\) and a Web Push record of \d+ bytes once encrypted \(push services accept at most 4096\) and an HMS message of \d+ bytes \(Huawei Push Kit accepts at most 4096\)$/,
      );
    });

    it('a 1 MB alert is refused, not sent to every device', async () => {
      const res = await postNotification(h, app.keys.write, notification({ alert: 'a'.repeat(1_000_000) }));
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toContain('APNs payload of 1000066 bytes (APNs accepts at most 4096)');
    });

    it('FCM and HMS carry the alert twice (data and notification body): 2100 characters pass APNs but not them', async () => {
      const res = await postNotification(h, app.keys.write, notification({ alert: 'a'.repeat(2100) }));
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatch(
        /^notification\.payload: is too large: it maps to an FCM message of \d+ bytes \(FCM accepts at most 4096\) and an HMS message of \d+ bytes \(Huawei Push Kit accepts at most 4096\)$/,
      );
    });

    it('bytes, not characters: 1400 three-byte characters are too large for APNs', async () => {
      const res = await postNotification(h, app.keys.write, notification({ alert: '€'.repeat(1400) }));
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toContain(`APNs payload of ${30 + 36 + 3 * 1400} bytes`);
    });

    it('a payload within both limits is accepted', async () => {
      const res = await postNotification(h, app.keys.write, notification({ alert: 'a'.repeat(1900), extra: 'b'.repeat(100) }));
      expect(res.statusCode, res.body).toBe(201);
    });
  });

  describe('devices and users: the same refusal on bodies, params and query strings', () => {
    it('POST /v6/devices with a NUL user_id', async () => {
      const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { platform: 'ios', token: token(), user_id: '\u0000' } });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: `device.user_id: ${NUL}` });
    });

    it('PUT /v6/devices/:id with a custom string holding NUL', async () => {
      const res = await call(h, 'PUT', `/v6/devices/${deviceId}`, app.keys.sdk, {
        device: { custom: { nick: { type: 'string', value: 'a\u0000b' } } },
      });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: `device.custom.nick.value: ${NUL}` });
      const read = await call(h, 'GET', `/v6/devices/${deviceId}`, app.keys.read);
      expect(read.json().device.custom).toEqual({});
    });

    it('device keys named like Object.prototype members are unknown fields, dropped', async () => {
      const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, {
        device: { platform: 'ios', token: token(), toString: 1, constructor: 'x' },
      });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().dropped).toEqual([
        { field: 'toString', error: 'is not a device field' },
        { field: 'constructor', error: 'is not a device field' },
      ]);
    });

    // Whether the header is believed depends on the proxy setting; either way only a real address may be stored.
    it.each(['not-an-ip', '999.1.1.1', 'fe80::1%eth0', '5.6.7.8.9, 1.2.3.4'])(
      'X-Forwarded-For %s: registered, no garbage stored',
      async (xff) => {
        const res = await call(
          h,
          'POST',
          '/v6/devices',
          app.keys.sdk,
          { device: { platform: 'ios', token: token() } },
          { 'x-forwarded-for': xff },
        );
        expect(res.statusCode, res.body).toBe(201);
        const row = await h.db.db
          .selectFrom('devices')
          .select('ip_address')
          .where('id', '=', res.json().device.id)
          .executeTakeFirstOrThrow();
        if (row.ip_address !== null) expect(isIP(row.ip_address)).toBeGreaterThan(0);
        expect(row.ip_address).not.toBe(xff);
      },
    );

    it('PUT /v6/devices/:id with a NUL in the id', async () => {
      const res = await call(h, 'PUT', '/v6/devices/%00', app.keys.sdk, { device: { locale: 'fr_FR' } });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: `params.id: ${NUL}` });
    });

    it.each([
      ['PUT', '/v6/users/%00', 'write', { user: { custom: { a: { type: 'string', value: 'b' } } } }],
      ['POST', '/v6/users/%00/events', 'write', { events: [{ name: 'opened' }] }],
      ['DELETE', '/v6/users/%00/devices', 'write', undefined],
      ['PUT', '/v6/users/a%00b', 'write', { user: { custom: { a: { type: 'string', value: 'b' } } } }],
    ] as const)('%s %s', async (method, url, role, body) => {
      const res = await call(h, method, url, app.keys[role], body);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: `params.user_id: ${NUL}` });
    });

    it('a user id of 255 characters, 4-byte ones included, reaches the users routes', async () => {
      for (const id of ['u'.repeat(255), '🎉'.repeat(127) + 'u']) {
        await register(h, app.keys.sdk, { platform: 'ios', token: token(), user_id: id });
        const path = `/v6/users/${encodeURIComponent(id)}`;
        const put = await call(h, 'PUT', path, app.keys.write, { user: { custom: { a: { type: 'string', value: 'b' } } } });
        expect(put.statusCode, put.body).toBe(200);
        expect((await call(h, 'POST', `${path}/events`, app.keys.write, { events: [{ name: 'opened' }] })).statusCode).toBe(202);
        expect((await call(h, 'DELETE', `${path}/devices`, app.keys.write)).statusCode).toBe(200);
      }
    });

    it.each([
      ['bad percent-encoding', '/v6/devices/%FF', 400, 'path: is not valid percent-encoded UTF-8'],
      ['an encoded lone surrogate', '/v6/devices/%ED%A0%80', 400, 'path: is not valid percent-encoded UTF-8'],
      ['a parameter past the limit', `/v6/devices/${'u'.repeat(255 * 12 + 1)}`, 414, 'path: a parameter is longer than 3060 characters'],
    ])('%s: %i in the shape of every error', async (_name, url, status, error) => {
      const res = await call(h, 'GET', url, app.keys.write);
      expect([res.statusCode, res.json()]).toEqual([status, { error }]);
    });

    it.each([
      [
        '__proto__ in device custom attributes',
        'POST',
        '/v6/devices',
        '{"device":{"platform":"ios","token":"t-proto","custom":{"__proto__":{"type":"string","value":"x"}}}}',
        'device.custom: key "__proto__" is not allowed (it would reach the prototype of what it is copied into)',
      ],
      [
        'constructor.prototype in a payload',
        'POST',
        '/v6/notifications',
        '{"notification":{"to":"*","payload":{"alert":"a","extra":{"constructor":{"prototype":{"admin":true}}}}}}',
        'notification.payload.extra: key "constructor" is not allowed with a "prototype" key in it',
      ],
    ])('%s: 400 naming the key, nothing stored', async (_name, method, url, payload, error) => {
      const before = await countRows(h, 'notifications', app.app.id);
      const res = await h.server.inject({
        method,
        url,
        headers: { authorization: `Basic ${Buffer.from(`:${app.keys.write}`).toString('base64')}`, 'content-type': 'application/json' },
        payload,
      });
      expect([res.statusCode, res.json()]).toEqual([400, { error }]);
      expect(await countRows(h, 'notifications', app.app.id)).toBe(before);
      expect(await h.db.db.selectFrom('devices').select('id').where('token', '=', 't-proto').execute()).toEqual([]);
    });

    it('a query string with NUL', async () => {
      const res = await call(h, 'GET', '/v6/devices/uninstalled?cursor=%00', app.keys.read);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: `querystring.cursor: ${NUL}` });
    });

    it('user events and user attributes with NUL in the body', async () => {
      const events = await call(h, 'POST', `/v6/users/${userId}/events`, app.keys.write, { events: [{ name: 'a\u0000' }] });
      expect(events.statusCode).toBe(400);
      expect(events.json()).toEqual({ error: `events[0].name: ${NUL}` });
      const user = await call(h, 'PUT', `/v6/users/${userId}`, app.keys.write, {
        user: { custom: { a: { type: 'string', value: '\ud800' } } },
      });
      expect(user.statusCode).toBe(400);
      expect(user.json()).toEqual({ error: `user.custom.a.value: ${SURROGATE}` });
    });
  });

  describe('concurrent token moves', () => {
    const owners = async (t: string) =>
      (await h.db.db.selectFrom('devices').select('id').where('app_id', '=', app.app.id).where('token', '=', t).execute()).map((r) => r.id);

    it('20 devices given the same token at once: 200/409 each, one owner after', async () => {
      const ids = await Promise.all(
        Array.from({ length: 20 }, () => register(h, app.keys.sdk, { platform: 'ios', token: token() }).then((d) => d.id)),
      );
      const shared = token();
      const answers = await Promise.all(ids.map((id) => call(h, 'PUT', `/v6/devices/${id}`, app.keys.sdk, { device: { token: shared } })));
      const statuses = answers.map((r) => r.statusCode);
      expect(
        statuses.filter((s) => s !== 200 && s !== 409),
        answers.map((r) => r.body).join('\n'),
      ).toEqual([]);
      const owner = await owners(shared);
      expect(owner).toHaveLength(1);
      // The owner is a device whose move answered 200.
      expect(statuses[ids.indexOf(owner[0]!)]).toBe(200);
    });

    it('registrations and moves of one token at once: no 5xx, one owner after', async () => {
      const ids = await Promise.all(
        Array.from({ length: 10 }, () => register(h, app.keys.sdk, { platform: 'android', token: token() }).then((d) => d.id)),
      );
      const shared = token();
      const answers = await Promise.all([
        ...ids.map((id) => call(h, 'PUT', `/v6/devices/${id}`, app.keys.sdk, { device: { token: shared } })),
        ...ids.map(() => call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { platform: 'android', token: shared } })),
      ]);
      expect(answers.filter((r) => r.statusCode >= 500).map((r) => r.body)).toEqual([]);
      expect(answers.every((r) => [200, 201, 409].includes(r.statusCode))).toBe(true);
      expect(await owners(shared)).toHaveLength(1);
    });

    it('two devices swapping tokens at once, again and again: no 5xx, each token has one owner', async () => {
      const [a, b] = [token(), token()];
      const da = (await register(h, app.keys.sdk, { platform: 'ios', token: a })).id;
      const db = (await register(h, app.keys.sdk, { platform: 'ios', token: b })).id;
      for (let round = 0; round < 10; round++) {
        const [x, y] = round % 2 === 0 ? [b, a] : [a, b];
        const answers = await Promise.all([
          call(h, 'PUT', `/v6/devices/${da}`, app.keys.sdk, { device: { token: x } }),
          call(h, 'PUT', `/v6/devices/${db}`, app.keys.sdk, { device: { token: y } }),
        ]);
        expect(
          answers.map((r) => r.statusCode).filter((s) => s !== 200 && s !== 409),
          answers.map((r) => r.body).join('\n'),
        ).toEqual([]);
        expect((await owners(a)).length).toBeLessThanOrEqual(1);
        expect((await owners(b)).length).toBeLessThanOrEqual(1);
      }
    });
  });
});
