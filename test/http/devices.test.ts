import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { useHarness, type Harness } from '../helpers/harness.js';
import { call, countVia, register, token } from './device-support.js';

type App = Awaited<ReturnType<Harness['createApp']>>;

describe('device registry', () => {
  const h = useHarness();
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });

  it('registers a device: 201, generated id, every field stored as sent', async () => {
    const t = token();
    const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, {
      device: {
        platform: 'ios',
        token: t,
        development: true,
        locale: 'fr_FR',
        time_zone: 'Europe/Paris',
        os_name: 'iOS',
        os_version: '17.4',
        app_version: '2.1.0',
        sdk_version: '6.0.1',
        hardware_name: 'iPhone15,2',
        badge: 3,
        user_id: 'u-1',
        user_email: 'a@example.com',
        tags: ['vip', 'beta', 'vip'],
        country: 'fr',
        notifications_allowed: 'Enabled',
        location: { latitude: 48.8566, longitude: 2.3522 },
        custom: {
          plan: { type: 'string', value: 'pro' },
          age: { type: 'integer', value: 42 },
          score: { type: 'float', value: 1.5 },
          born: { type: 'date', value: '1990-05-01T00:00:00Z' },
          founded: { type: 'date', value: '0050-06-15T00:00:00Z' },
          optin: { type: 'boolean', value: true },
          teams: { type: 'string', value: ['a', 'b'] },
        },
      },
    });
    expect(res.statusCode, res.body).toBe(201);
    const { device, dropped } = res.json();
    expect(dropped).toEqual([]);
    expect(device.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(device).toMatchObject({
      platform: 'iOS',
      token: t,
      push_token: t,
      development: true,
      locale: 'fr_FR',
      time_zone: 'Europe/Paris',
      marketing_name: 'iPhone15,2',
      badge: 3,
      tags: ['vip', 'beta'],
      country: 'FR',
      notifications_allowed: 'Enabled',
      push_enabled: true,
      user_id: 'u-1',
      email: 'a@example.com',
      user_email: 'a@example.com',
      location: { gps: { lat: '48.8566', lng: '2.3522' }, geoip: { lat: null, lng: null, city: null, country: null } },
      sdk_location: { latitude: 48.8566, longitude: 2.3522 },
      last_opened: null,
      erased_at: null,
    });
    expect(device.custom).toEqual({
      plan: { type: 'string', value: 'pro' },
      age: { type: 'integer', value: 42 },
      score: { type: 'float', value: 1.5 },
      born: { type: 'date', value: '1990-05-01T00:00:00.000Z' },
      founded: { type: 'date', value: '0050-06-15T00:00:00.000Z' },
      optin: { type: 'boolean', value: true },
      teams: { type: 'string', value: ['a', 'b'] },
    });
    expect(device.user_attributes).toEqual(device.custom);
    expect(device.created_at).toBe(device.registered_at);
    expect(device.installed_at).toBe(device.created_at);
    // the answer is what is stored: the device and its attributes, written in one statement, read back alike (the
    // credential is answered once; the live activities only when read)
    const { credential: _credential, ...answered } = device;
    const read = (await call(h, 'GET', `/v6/devices/${device.id}`, app.keys.sdk)).json().device;
    const { live_activities: _activities, live_activity_start_tokens: _starts, ...stored } = read;
    expect(stored).toEqual(answered);
  });

  it('registering a known token merges into the same device; created_at stays, registered_at moves', async () => {
    const t = token();
    const first = await register(h, app.keys.sdk, {
      platform: 'android',
      token: t,
      locale: 'en_US',
      custom: { a: { type: 'integer', value: 1 } },
    });
    await new Promise((r) => setTimeout(r, 5));
    const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, {
      device: { platform: 'android', token: t, os_name: 'Android', custom: { b: { type: 'integer', value: 2 } } },
    });
    expect(res.statusCode, res.body).toBe(200);
    // the answer: the id and what this request wrote (test/http/sdk-key.test.ts); the record holds the merge
    expect(res.json().device.id).toBe(first.id);
    const again = (await call(h, 'GET', `/v6/devices/${first.id}`, app.keys.sdk)).json().device;
    expect(again.locale).toBe('en_US');
    expect(again.os_name).toBe('Android');
    expect(Object.keys(again.custom).sort()).toEqual(['a', 'b']);
    expect(again.created_at).toBe(first.created_at);
    expect(Date.parse(again.registered_at)).toBeGreaterThan(Date.parse(first.registered_at as string));
  });

  it('registering again as it was takes no lock: answered while the token is locked, where a change waits', async () => {
    const t = token();
    const device = { platform: 'android', token: t, locale: 'de_DE', custom: { plan: { type: 'string', value: 'pro' } } };
    await register(h, app.keys.sdk, device);
    // the lock a registration of this token takes first (DevicesRepository.lockToken), held by another session
    const lockKey = `${app.app.id}:${t}`;
    const locker = new pg.Client({ connectionString: h.databaseUrl });
    await locker.connect();
    try {
      await locker.query('select pg_advisory_lock(hashtextextended($1, 0))', [lockKey]);
      const same = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device });
      expect(same.statusCode).toBe(200);
      expect(same.json().device.custom).toEqual({ plan: { type: 'string', value: 'pro' } });
      let answered = false;
      const changed = call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { ...device, locale: 'es_ES' } }).then((res) => {
        answered = true;
        return res;
      });
      await new Promise((r) => setTimeout(r, 300));
      expect(answered).toBe(false);
      await locker.query('select pg_advisory_unlock(hashtextextended($1, 0))', [lockKey]);
      expect((await changed).statusCode).toBe(200);
      const read = (await call(h, 'GET', `/v6/devices/${same.json().device.id}`, app.keys.sdk)).json().device;
      expect(read.locale).toBe('es_ES');
    } finally {
      await locker.end();
    }
  });

  it('registering again as it was changes nothing: registered_at stays and no row version is written; a change moves it', async () => {
    const t = token();
    const device = { platform: 'ios', token: t, locale: 'fr_FR', tags: ['news'], custom: { plan: { type: 'string', value: 'pro' } } };
    const first = await register(h, app.keys.sdk, device);
    // the transaction that wrote the row's current version
    const version = async () =>
      (await h.db.pool.query(`SELECT xmin::text AS x FROM devices WHERE id = $1`, [first.id])).rows[0].x as string;
    const written = await version();
    await new Promise((r) => setTimeout(r, 5));
    const same = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device });
    expect(same.statusCode).toBe(200);
    // its answer shows what was written, the attribute as stored (read once, with no write)
    expect(same.json().device.custom).toEqual({ plan: { type: 'string', value: 'pro' } });
    const read = async () => (await call(h, 'GET', `/v6/devices/${first.id}`, app.keys.sdk)).json().device;
    expect((await read()).registered_at).toBe(first.registered_at);
    expect(await version()).toBe(written);
    // a device field changed is written
    await new Promise((r) => setTimeout(r, 5));
    const moved = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { ...device, locale: 'it_IT' } });
    expect(moved.statusCode).toBe(200);
    expect(await version()).not.toBe(written);
    const afterLocale = await read();
    expect(afterLocale.locale).toBe('it_IT');
    expect(Date.parse(afterLocale.registered_at)).toBeGreaterThan(Date.parse(first.registered_at as string));
    expect((await call(h, 'POST', '/v6/devices', app.keys.sdk, { device })).statusCode).toBe(200);
    // a custom attribute changed is an update
    await new Promise((r) => setTimeout(r, 5));
    const changed = { ...device, custom: { plan: { type: 'string', value: 'free' } } };
    const changedAnswer = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: changed });
    expect(changedAnswer.statusCode).toBe(200);
    expect(changedAnswer.json().device.custom).toEqual({ plan: { type: 'string', value: 'free' } });
    const afterCustom = await read();
    expect(afterCustom.custom.plan).toEqual({ type: 'string', value: 'free' });
    expect(Date.parse(afterCustom.registered_at)).toBeGreaterThan(Date.parse(afterLocale.registered_at));
    // a PUT of what it holds changes nothing; one of another locale does
    expect((await call(h, 'PUT', `/v6/devices/${first.id}`, app.keys.sdk, { device: { locale: 'fr_FR' } })).statusCode).toBe(200);
    expect((await read()).registered_at).toBe(afterCustom.registered_at);
    await new Promise((r) => setTimeout(r, 5));
    expect((await call(h, 'PUT', `/v6/devices/${first.id}`, app.keys.sdk, { device: { locale: 'de_DE' } })).statusCode).toBe(200);
    expect(Date.parse((await read()).registered_at)).toBeGreaterThan(Date.parse(afterCustom.registered_at));
  });

  it('30 concurrent registrations of one token make one device', async () => {
    const t = token();
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { platform: 'ios', token: t, badge: i } }),
      ),
    );
    expect(results.every((r) => r.statusCode === 200 || r.statusCode === 201)).toBe(true);
    expect(results.filter((r) => r.statusCode === 201)).toHaveLength(1);
    expect(new Set(results.map((r) => r.json().device.id)).size).toBe(1);
    const rows = await h.db.db.selectFrom('devices').select('id').where('token', '=', t).execute();
    expect(rows).toHaveLength(1);
  });

  it('a new token whose lock is held goes the locked way, which waits for it; two at once make one device, the second 200', async () => {
    const t = token();
    const device = { platform: 'android', token: t, locale: 'de_DE', custom: { plan: { type: 'string', value: 'pro' } } };
    // the lock every write giving a device this token takes (DevicesRepository.lockToken), held by another session
    const lockKey = `${app.app.id}:${t}`;
    const locker = new pg.Client({ connectionString: h.databaseUrl });
    await locker.connect();
    try {
      await locker.query('select pg_advisory_lock(hashtextextended($1, 0))', [lockKey]);
      const both = Promise.all([1, 2].map(() => call(h, 'POST', '/v6/devices', app.keys.sdk, { device })));
      const waiting = async () =>
        (await locker.query(`select query from pg_stat_activity where datname = current_database() and wait_event = 'advisory'`)).rows;
      // both read no device; the group's insert does not wait for a lock, so each waits in its own locked transaction
      // (polled until both are there: on a loaded machine another session may show an advisory wait in passing)
      const locked = 'select pg_advisory_xact_lock(hashtextextended($1, 0))';
      const bothLocked = (rows: { query: string }[]) => rows.length === 2 && rows.every((r) => r.query.trim() === locked);
      let rows = await waiting();
      for (let i = 0; !bothLocked(rows) && i < 400; i++) rows = await new Promise((r) => setTimeout(r, 25)).then(waiting);
      expect(rows.map((r) => r.query.trim())).toEqual([locked, locked]);
      await locker.query('select pg_advisory_unlock(hashtextextended($1, 0))', [lockKey]);
      const [first, second] = (await both).sort((a, b) => a.statusCode - b.statusCode);
      // the second found the token taken and went the locked way: the device as it is, its credential not shown again
      expect([first!.statusCode, second!.statusCode]).toEqual([200, 201]);
      expect(second!.json().device.credential).toMatch(/\S{20}/);
      expect(first!.json().device).toMatchObject({ id: second!.json().device.id, custom: { plan: { type: 'string', value: 'pro' } } });
      expect(first!.json().device.credential).toBeUndefined();
      const rowsOfToken = await h.db.db.selectFrom('devices').select('id').where('token', '=', t).execute();
      expect(rowsOfToken).toHaveLength(1);
    } finally {
      await locker.end();
    }
  });

  it('platform missing or invalid -> 400 naming it; malformed JSON -> 400; not an object -> 400', async () => {
    const missing = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { token: token() } });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().error).toMatch(/^device\.platform: /);
    const bad = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { platform: 'windows' } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toBe('device.platform: must be one of ios, android, web, huawei');
    const malformed = await call(h, 'POST', '/v6/devices', app.keys.sdk, '{"device": {"platform": "ios",');
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().error).toMatch(/JSON/);
    const notObject = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: ['ios'] });
    expect(notObject.statusCode).toBe(400);
    expect(notObject.json().error).toMatch(/^device: /);
  });

  it('stores the valid parts and names each dropped one', async () => {
    const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, {
      device: {
        platform: 'ios',
        locale: 'french',
        time_zone: 'Mars/Olympus',
        country: 'XX',
        badge: -1,
        os_name: 'iOS',
        tags: ['ok', 7],
        notifications_allowed: 'Maybe',
        location: { latitude: 91, longitude: 0 },
        colour: 'blue',
        custom: {
          age: { type: 'integer', value: 2 ** 31 },
          big: { type: 'string', value: 'x'.repeat(256) },
          many: { type: 'integer', value: Array.from({ length: 51 }, (_, i) => i) },
          flags: { type: 'boolean', value: [true] },
          'bad name': { type: 'string', value: 'x' },
          when: { type: 'date', value: 'yesterday' },
          kind: { type: 'color', value: 'x' },
          list: { type: 'float', value: [1, 'two'] },
          fine: { type: 'integer', value: -(2 ** 31) },
        },
      },
    });
    expect(res.statusCode, res.body).toBe(201);
    const { device, dropped } = res.json();
    expect(device.os_name).toBe('iOS');
    expect(device.custom).toEqual({ fine: { type: 'integer', value: -(2 ** 31) } });
    expect(device.locale).toBeNull();
    const fields = (dropped as { field: string; error: string }[]).map((d) => d.field).sort();
    expect(fields).toEqual(
      [
        'badge',
        'colour',
        'country',
        'custom.age',
        'custom.bad name',
        'custom.big',
        'custom.flags',
        'custom.kind',
        'custom.list[1]',
        'custom.many',
        'custom.when',
        'locale',
        'location',
        'notifications_allowed',
        'tags[1]',
        'time_zone',
      ].sort(),
    );
    expect(dropped.find((d: { field: string }) => d.field === 'custom.age').error).toBe('must be a 32-bit signed integer');
  });

  it("refuses a registration whose token is not a push token (400 naming device.token), storing nothing; a PUT's is dropped", async () => {
    const before = await h.db.db
      .selectFrom('devices')
      .select(h.db.db.fn.countAll<string>().as('n'))
      .where('app_id', '=', app.app.id)
      .executeTakeFirstOrThrow();
    // the README's example as a new user first sends it, the placeholder left in
    for (const bad of ['<APNs or FCM token>', 42, 'x'.repeat(4097), 'tok\u00e9n', ['a']]) {
      const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { platform: 'ios', token: bad, locale: 'fr_FR' } });
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
      expect(res.json()).toEqual({ error: 'device.token: must be an APNs or FCM push token: 1 to 4096 visible ASCII characters' });
    }
    const after = await h.db.db
      .selectFrom('devices')
      .select(h.db.db.fn.countAll<string>().as('n'))
      .where('app_id', '=', app.app.id)
      .executeTakeFirstOrThrow();
    expect(after.n).toBe(before.n);
    // no token yet (absent, null or ""): registered without one, as before
    for (const none of [{}, { token: null }, { token: '' }]) {
      const res = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { platform: 'android', ...none } });
      expect(res.statusCode, JSON.stringify(none)).toBe(201);
      expect(res.json()).toMatchObject({ device: { token: null }, dropped: [] });
    }
    // an update keeps the device's token and lists the bad one, as it does every invalid part
    const t = token();
    const d = await register(h, app.keys.sdk, { platform: 'ios', token: t });
    const put = await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.sdk, { device: { token: 'not a token', badge: 2 } });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json().device).toMatchObject({ token: t, badge: 2 });
    expect(put.json().dropped).toEqual([
      { field: 'token', error: 'must be an APNs or FCM push token: 1 to 4096 visible ASCII characters' },
    ]);
  });

  it('keeps at most 50 custom attributes a device: the 51st new one is dropped, existing ones still update', async () => {
    const custom = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`a${i}`, { type: 'integer', value: i }]));
    const d = await register(h, app.keys.sdk, { platform: 'ios', custom });
    const res = await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.sdk, {
      device: { custom: { extra: { type: 'string', value: 'x' }, a0: { type: 'string', value: 'now a string' } } },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().dropped).toEqual([{ field: 'custom.extra', error: 'a device holds at most 50 custom attributes' }]);
    expect(res.json().device.custom.a0).toEqual({ type: 'string', value: 'now a string' });
    // removing one makes room in the same request
    const swap = await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.sdk, {
      device: { custom: { a1: null, extra: { type: 'string', value: 'x' } } },
    });
    expect(swap.json().dropped).toEqual([]);
    expect(Object.keys(swap.json().device.custom)).toHaveLength(50);
  });

  it('PUT merges key by key, null removes, user_attributes is accepted; nothing valid -> 422; unknown -> 404', async () => {
    const d = await register(h, app.keys.sdk, {
      platform: 'android',
      user_id: 'merge-user',
      custom: { a: { type: 'string', value: 'x' }, b: { type: 'integer', value: 1 }, c: { type: 'boolean', value: false } },
    });
    const res = await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.write, {
      device: {
        user_attributes: { b: { type: 'integer', value: 2 }, c: null },
        custom: { d: { type: 'float', value: 0.5 } },
        user_email: null,
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const { device } = res.json();
    expect(device.custom).toEqual({
      a: { type: 'string', value: 'x' },
      b: { type: 'integer', value: 2 },
      d: { type: 'float', value: 0.5 },
    });
    expect(device.user_id).toBe('merge-user');

    const none = await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.sdk, {
      device: { locale: 'nope', custom: { x: { type: 'integer', value: 'y' } } },
    });
    expect(none.statusCode).toBe(422);
    expect(none.json().dropped.map((x: { field: string }) => x.field)).toEqual(['locale', 'custom.x']);
    expect((await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.sdk, { device: {} })).statusCode).toBe(422);

    expect(
      (await call(h, 'PUT', '/v6/devices/00000000-0000-4000-8000-000000000000', app.keys.sdk, { device: { badge: 1 } })).statusCode,
    ).toBe(404);
    expect((await call(h, 'PUT', '/v6/devices/not-a-uuid', app.keys.sdk, { device: { badge: 1 } })).statusCode).toBe(404);
    expect((await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.sdk, { device: { platform: 'bb' } })).statusCode).toBe(400);
  });

  it('a device of another app is not found', async () => {
    const other = await h.createApp();
    const d = await register(h, other.keys.sdk, { platform: 'ios' });
    expect((await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).statusCode).toBe(404);
    expect((await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.sdk, { device: { badge: 1 } })).statusCode).toBe(404);
  });

  it('GET answers with attributes and events to a read key and to the SDK key; permissions hold', async () => {
    const d = await register(h, app.keys.sdk, { platform: 'ios', custom: { k: { type: 'string', value: 'v' } } });
    await call(h, 'POST', `/v6/devices/${d.id}/events`, app.keys.sdk, {
      events: [{ name: 'open', date: '2024-01-01T00:00:00Z' }, { name: 'open' }],
    });
    const res = await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read);
    expect(res.statusCode).toBe(200);
    const { device } = res.json();
    expect(device.user_attributes).toEqual({ k: { type: 'string', value: 'v' } });
    expect(device.user_events.open.count).toBe(2);
    expect(device.user_events.open.first_happened_at).toBe('2024-01-01T00:00:00.000Z');
    expect((await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.sdk)).statusCode).toBe(200);

    expect((await call(h, 'POST', '/v6/devices', app.keys.read, { device: { platform: 'ios' } })).statusCode).toBe(403);
    expect((await call(h, 'POST', `/v6/devices/${d.id}/erase`, app.keys.sdk)).statusCode).toBe(403);
    expect((await call(h, 'GET', `/v6/devices/${d.id}`, 'wrong-key')).statusCode).toBe(401);
  });

  it('erase empties the device, answers 200 with it; later writes answer 451; it leaves every audience', async () => {
    const t = token();
    const d = await register(h, app.keys.sdk, {
      platform: 'ios',
      token: t,
      locale: 'xx_YY',
      user_id: 'erase-me',
      tags: ['t'],
      custom: { a: { type: 'string', value: 'x' } },
    });
    await call(h, 'POST', `/v6/devices/${d.id}/events`, app.keys.sdk, { events: [{ name: 'open' }] });
    expect(await countVia(h, app.app.id, app.keys.read, [{ name: 'locale', criteria: ['xx_YY'] }])).toBe(1);

    const res = await call(h, 'POST', `/v6/devices/${d.id}/erase`, app.keys.write);
    expect(res.statusCode, res.body).toBe(200);
    const { device } = res.json();
    expect(device.erased_at).not.toBeNull();
    expect(device).toMatchObject({ token: null, locale: null, user_id: null, tags: [], custom: {}, user_events: {}, platform: 'Unknown' });
    expect(await countVia(h, app.app.id, app.keys.read, [{ name: 'locale', criteria: ['xx_YY'] }])).toBe(0);
    expect(await countVia(h, app.app.id, app.keys.read, [{ name: 'device_id', criteria: [d.id] }])).toBe(0);

    expect((await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.sdk, { device: { badge: 1 } })).statusCode).toBe(451);
    expect((await call(h, 'POST', `/v6/devices/${d.id}/events`, app.keys.sdk, { events: [{ name: 'open' }] })).statusCode).toBe(451);
    expect((await call(h, 'POST', `/v6/devices/${d.id}/erase`, app.keys.write)).statusCode).toBe(200);
    // the token is free again: registering it makes a new device
    const fresh = await register(h, app.keys.sdk, { platform: 'ios', token: t });
    expect(fresh.id).not.toBe(d.id);
  });

  it('records the client IP for the SDK key only (a write key is a backend)', async () => {
    // the connection's address: X-Forwarded-For is believed only with TRUST_PROXY (test/http/trust-proxy.test.ts)
    const viaSdk = await register(h, app.keys.sdk, { platform: 'ios' }, { 'x-forwarded-for': '203.0.113.7' });
    const viaWrite = await register(h, app.keys.write, { platform: 'ios' }, { 'x-forwarded-for': '203.0.113.8' });
    const rows = await h.db.db.selectFrom('devices').select(['id', 'ip_address']).where('id', 'in', [viaSdk.id, viaWrite.id]).execute();
    const ip = Object.fromEntries(rows.map((r) => [r.id, r.ip_address]));
    expect(ip[viaSdk.id]).toBe('127.0.0.1');
    expect(ip[viaWrite.id]).toBeNull();
  });

  it('a token reported by another device moves to it', async () => {
    const t = token();
    const a = await register(h, app.keys.sdk, { platform: 'ios', token: t });
    const b = await register(h, app.keys.sdk, { platform: 'ios' });
    const res = await call(h, 'PUT', `/v6/devices/${b.id}`, app.keys.sdk, { device: { token: t } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().device.token).toBe(t);
    expect((await call(h, 'GET', `/v6/devices/${a.id}`, app.keys.read)).json().device.token).toBeNull();
  });
});
