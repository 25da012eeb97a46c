import { beforeAll, describe, expect, it } from 'vitest';
import { useHarness } from '../helpers/harness.js';
import { call, register, token } from './device-support.js';

/**
 * The sdk key ships inside every copy of the app, so anyone may hold it. It registers a device and, by that
 * device's id, updates it, reads it and posts its events; it cannot reach users, and registering a token the app
 * already has tells it nothing of the existing record but its id.
 */
const h = useHarness();

type App = Awaited<ReturnType<typeof h.createApp>>;

describe('registering a token the app already has', () => {
  let app: App;
  let t: string;
  let existing: { id: string };
  const secrets = { email: 'victim@example.com', latitude: 48.8566, userId: 'victim-user', attribute: 'plan', event: 'bought_ring' };

  beforeAll(async () => {
    app = await h.createApp();
    t = token();
    // the phone as the backend knows it: e-mail, GPS fix, user, attributes, events
    existing = await register(h, app.keys.write, {
      platform: 'ios',
      token: t,
      locale: 'en_GB',
      user_id: secrets.userId,
      user_email: secrets.email,
      location: { latitude: secrets.latitude, longitude: 2.3522 },
      custom: { [secrets.attribute]: { type: 'string', value: 'gold' } },
    });
    const events = await call(h, 'POST', `/v6/devices/${existing.id}/events`, app.keys.write, { events: [{ name: secrets.event }] });
    expect(events.statusCode).toBe(202);
  });

  /** What every answer shows: the id and the platform and token the caller sent. */
  const bare = () => ({ id: existing.id, platform: 'iOS', token: t, push_token: t });
  const leaks = (body: string) =>
    [secrets.email, String(secrets.latitude), secrets.userId, secrets.attribute, secrets.event, 'en_GB'].filter((s) => body.includes(s));

  it('answers 200 with the id and exactly what the caller sent, as stored', async () => {
    const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, {
      device: { platform: 'ios', token: t, locale: 'fr_FR', custom: { theme: { type: 'string', value: 'dark' } } },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      device: {
        ...bare(),
        locale: 'fr_FR',
        custom: { theme: { type: 'string', value: 'dark' } },
        user_attributes: { theme: { type: 'string', value: 'dark' } },
      },
      dropped: [],
    });
    expect(leaks(res.body)).toEqual([]);
  });

  it('shows nothing but id, platform and token for a bare registration', async () => {
    const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { platform: 'ios', token: t } });
    expect(res.statusCode).toBe(200);
    expect(res.json().device).toEqual(bare());
  });

  it('shows a location and push state the caller sent, and leaves out fields it dropped', async () => {
    const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, {
      device: {
        platform: 'ios',
        token: t,
        location: { latitude: 10, longitude: 20 },
        notifications_allowed: true,
        user_email: 'not-an-email',
      },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      device: {
        ...bare(),
        sdk_location: { latitude: 10, longitude: 20 },
        notifications_allowed: 'Enabled',
        push_enabled: true,
      },
      dropped: [{ field: 'user_email', error: 'must be an e-mail address' }],
    });
    expect(leaks(res.body)).toEqual([]);
  });

  it('answers a write key the same way (one answer for every caller)', async () => {
    const res = await call(h, 'POST', '/v6/devices', app.keys.write, { device: { platform: 'ios', token: t } });
    expect(res.json().device).toEqual(bare());
  });

  it('still merges into the stored record, which keeps what the caller did not send', async () => {
    const stored = (await call(h, 'GET', `/v6/devices/${existing.id}`, app.keys.read)).json().device;
    expect(stored).toMatchObject({
      user_email: secrets.email,
      user_id: secrets.userId,
      locale: 'fr_FR',
      sdk_location: { latitude: 10, longitude: 20 },
    });
    expect(Object.keys(stored.custom).sort()).toEqual([secrets.attribute, 'theme']);
    expect(Object.keys(stored.user_events)).toEqual([`Public Api.${secrets.event}`]);
  });

  it('answers a new token 201 with the whole new record', async () => {
    const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { platform: 'android', token: token(), locale: 'de_DE' } });
    expect(res.statusCode).toBe(201);
    expect(res.json().device).toMatchObject({ platform: 'Android', locale: 'de_DE', user_email: null, custom: {}, user_events: {} });
  });
});

describe('what the sdk key may do', () => {
  let app: App;
  let mine: { id: string };
  let victim: { id: string };

  beforeAll(async () => {
    app = await h.createApp();
    mine = await register(h, app.keys.sdk, { platform: 'android', token: token(), user_id: 'me' });
    victim = await register(h, app.keys.write, { platform: 'ios', token: token(), user_id: 'victim' });
  });

  it('gets its device an id of 122 random bits (a version 4 UUID)', () => {
    expect(mine.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('updates, reads and posts events of the device it registered, by its id', async () => {
    const put = await call(h, 'PUT', `/v6/devices/${mine.id}`, app.keys.sdk, { device: { badge: 3 } });
    expect(put.statusCode, put.body).toBe(200);
    const events = await call(h, 'POST', `/v6/devices/${mine.id}/events`, app.keys.sdk, { events: [{ name: 'opened' }] });
    expect(events.statusCode).toBe(202);
    const got = await call(h, 'GET', `/v6/devices/${mine.id}`, app.keys.sdk);
    expect(got.statusCode).toBe(200);
    expect(got.json().device).toMatchObject({ id: mine.id, badge: 3, user_events: { opened: { count: 1 } } });
  });

  it('finds no device by a guessed id', async () => {
    const guessed = '5f0c1a52-9a8e-4d3b-8c4f-2b1e7d6a9c30';
    expect((await call(h, 'GET', `/v6/devices/${guessed}`, app.keys.sdk)).statusCode).toBe(404);
    expect((await call(h, 'PUT', `/v6/devices/${guessed}`, app.keys.sdk, { device: { badge: 1 } })).statusCode).toBe(404);
  });

  it.each([
    ['PUT', '/v6/users/victim', { user: { custom: { vip: { type: 'boolean', value: true } } } }],
    ['POST', '/v6/users/victim/events', { events: [{ name: 'refund' }] }],
    ['DELETE', '/v6/users/victim/devices', undefined],
  ] as const)('cannot call %s %s (403), and the user is unchanged', async (method, url, body) => {
    const res = await call(h, method, url, app.keys.sdk, body);
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ error: 'your api client does not have the correct roles' });
    const stored = (await call(h, 'GET', `/v6/devices/${victim.id}`, app.keys.read)).json().device;
    expect(stored).toMatchObject({ custom: {}, user_events: {}, erased_at: null });
  });

  it('leaves the users API to the write key', async () => {
    const put = await call(h, 'PUT', '/v6/users/victim', app.keys.write, { user: { custom: { vip: { type: 'boolean', value: true } } } });
    expect(put.statusCode, put.body).toBe(200);
    expect((await call(h, 'POST', '/v6/users/victim/events', app.keys.write, { events: [{ name: 'refund' }] })).statusCode).toBe(202);
  });
});
