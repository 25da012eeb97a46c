import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeCursor, FIRST_ID } from '../../src/domain/cursor.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, type Gateways } from '../helpers/gateways.js';
import { buildMmdb } from '../platform/mmdb.js';
import { audienceFor, call, register } from './device-support.js';
import { ISO_MS, type AppWithKeys } from './support.js';

/**
 * The devices, users and audiences answers as the public reference pages document them ("Documented shapes" of the
 * public API notes): each documented example, its status, and every documented field with its JSON type, so a
 * client written against those pages works unchanged. Cursor pages are read the way such clients read them, until a
 * page has no devices; another app's keys reach none of it.
 */
const LONDON_IP = '81.2.69.160';

let h: Harness;
let gw: Gateways;
let dir: string;
let app: AppWithKeys;
let other: AppWithKeys;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'pushd-shapes-'));
  const geoip = path.join(dir, 'city.mmdb');
  await writeFile(
    geoip,
    buildMmdb([
      {
        cidr: '81.2.69.0/24',
        record: { city: { names: { en: 'London' } }, country: { iso_code: 'GB' }, location: { latitude: 51.5142, longitude: -0.0931 } },
      },
    ]),
  );
  gw = await startGateways();
  // TRUST_PROXY: the tests play the proxy that reports the phone's address
  h = await createHarness({ env: { ...gw.env, GEOIP_DB_PATH: geoip, TRUST_PROXY: '1' } });
  app = await h.createApp();
  other = await h.createApp();
  await setCredentials(h, app.app.id, gw);
});
afterAll(async () => {
  await h?.close();
  await gw?.close();
  await rm(dir, { recursive: true, force: true });
});

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const stringOrNull = (v: unknown) => v === null || typeof v === 'string';
const isoOrNull = (v: unknown) => v === null || (typeof v === 'string' && ISO_MS.test(v));

/** Every documented field of the device record, with its JSON type. */
function expectDeviceRecord(d: unknown) {
  if (!isObject(d)) throw new Error(`not a device record: ${JSON.stringify(d)}`);
  expect(typeof d.id).toBe('string');
  for (const field of ['user_id', 'email', 'push_token']) expect(stringOrNull(d[field]), field).toBe(true);
  expect(typeof d.push_enabled).toBe('boolean');
  expect(['iOS', 'Android', 'Unknown']).toContain(d.platform);
  for (const field of ['installed_at', 'last_opened']) expect(isoOrNull(d[field]), field).toBe(true);
  expect(isObject(d.user_attributes)).toBe(true);
  for (const a of Object.values(d.user_attributes as Json)) {
    expect(isObject(a) && typeof a.type === 'string' && 'value' in a, JSON.stringify(a)).toBe(true);
  }
  expect(isObject(d.user_events)).toBe(true);
  for (const e of Object.values(d.user_events as Json) as Json[]) {
    expect(Number.isInteger(e.count)).toBe(true);
    expect(e.first_happened_at).toMatch(ISO_MS);
    expect(e.last_happened_at).toMatch(ISO_MS);
  }
  const location = d.location as { gps: Json; geoip: Json };
  expect(isObject(location) && isObject(location.gps) && isObject(location.geoip)).toBe(true);
  // gps: {} without a fix, else lat and lng as strings
  expect(Object.keys(location.gps).length === 0 || (typeof location.gps.lat === 'string' && typeof location.gps.lng === 'string')).toBe(
    true,
  );
  expect(Object.keys(location.geoip).sort()).toEqual(['city', 'country', 'lat', 'lng']);
  for (const v of Object.values(location.geoip)) expect(stringOrNull(v)).toBe(true);
  expect(Array.isArray(d.tags) && (d.tags as unknown[]).every((t) => typeof t === 'string')).toBe(true);
}

/** A phone of the app as the SDK registers it, from London, with a GPS fix in Paris, and one event. */
async function phone(userId: string, extra: Json = {}) {
  const res = await call(
    h,
    'POST',
    '/v6/devices',
    app.keys.sdk,
    {
      device: {
        platform: 'ios',
        token: `${userId}-${Math.random().toString(16).slice(2)}`,
        user_id: userId,
        user_email: 'ana@example.com',
        notifications_allowed: true,
        location: { latitude: 48.8566, longitude: 2.3522 },
        tags: ['vip'],
        custom: { plan: { type: 'string', value: 'pro' } },
        ...extra,
      },
    },
    { 'x-forwarded-for': LONDON_IP },
  );
  expect(res.statusCode, res.body).toBe(201);
  expectDeviceRecord(res.json().device);
  return res.json().device as Json & { id: string };
}

describe('the device record', () => {
  it('GET /v6/devices/:id shows every documented field with its JSON type and value', async () => {
    const d = await phone('ana');
    expect((await call(h, 'POST', `/v6/devices/${d.id}/events`, app.keys.sdk, { events: [{ name: 'purchase' }] })).statusCode).toBe(202);
    // last_opened comes from the SDK's open reports (another part of the API): set here as they would
    await h.db.db
      .updateTable('devices')
      .set({ last_opened_at: new Date('2026-03-01T10:00:00Z') })
      .where('id', '=', d.id)
      .execute();

    const res = await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read);
    expect(res.statusCode).toBe(200);
    const { device } = res.json();
    expectDeviceRecord(device);
    expect(device).toMatchObject({
      id: d.id,
      user_id: 'ana',
      email: 'ana@example.com',
      push_enabled: true,
      push_token: d.push_token,
      platform: 'iOS',
      installed_at: d.installed_at,
      last_opened: '2026-03-01T10:00:00.000Z',
      user_attributes: { plan: { type: 'string', value: 'pro' } },
      user_events: { purchase: { count: 1 } },
      location: { gps: { lat: '48.8566', lng: '2.3522' }, geoip: { lat: '51.5142', lng: '-0.0931', city: 'London', country: 'GB' } },
      tags: ['vip'],
    });
    expect(typeof d.push_token).toBe('string');
    expect(device.installed_at).toMatch(ISO_MS);
  });

  it('an Android device without push permission, GPS or GeoIP: platform "Android", push_enabled false, empty gps', async () => {
    const d = await register(h, app.keys.write, { platform: 'Android', notifications_allowed: 'Disabled' });
    const { device } = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json();
    expectDeviceRecord(device);
    expect(device).toMatchObject({ platform: 'Android', push_enabled: false, push_token: null, email: null, last_opened: null });
    expect(device.location).toEqual({ gps: {}, geoip: { lat: null, lng: null, city: null, country: null } });
  });

  it('PUT /v6/devices/:id: merged; dates normalised to .000Z, arrays of dates too; user_email shown; nothing valid -> 422', async () => {
    const d = await phone('ben');
    const res = await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.write, {
      device: {
        user_id: 'ben',
        user_email: 'ben@example.com',
        tags: ['new'],
        user_attributes: {
          my_date: { type: 'date', value: '2012-04-23T18:25:00Z' },
          my_dates: { type: 'date', value: ['2012-04-23T18:25:00Z', '2013-01-01T00:00:00+02:00'] },
        },
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const { device } = res.json();
    expectDeviceRecord(device);
    expect(device.user_email).toBe('ben@example.com');
    expect(device.email).toBe('ben@example.com');
    expect(device.tags).toEqual(['new']);
    expect(device.user_attributes).toEqual({
      plan: { type: 'string', value: 'pro' },
      my_date: { type: 'date', value: '2012-04-23T18:25:00.000Z' },
      my_dates: { type: 'date', value: ['2012-04-23T18:25:00.000Z', '2012-12-31T22:00:00.000Z'] },
    });

    const nothing = await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.write, {
      device: { user_attributes: { my_date: { type: 'date', value: 'not a date' } } },
    });
    expect(nothing.statusCode).toBe(422);
    expect(typeof nothing.json().error).toBe('string');
    expect(nothing.json().dropped).toEqual([{ field: 'user_attributes.my_date', error: expect.any(String) }]);
  });

  it('POST /v6/devices/:id/erase answers the documented emptied device; later updates answer 451', async () => {
    const d = await phone('cleo');
    const res = await call(h, 'POST', `/v6/devices/${d.id}/erase`, app.keys.write);
    expect(res.statusCode).toBe(200);
    const { device } = res.json();
    expectDeviceRecord(device);
    expect(device).toMatchObject({
      id: d.id,
      user_id: null,
      email: null,
      platform: 'Unknown',
      last_opened: null,
      installed_at: null,
      push_enabled: false,
      user_attributes: {},
      user_events: {},
      location: { gps: {}, geoip: { lat: null, lng: null, city: null, country: null } },
      push_token: null,
      tags: [],
    });
    expect(device.erased_at).toMatch(ISO_MS);
    expect((await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.write, { device: { tags: ['x'] } })).statusCode).toBe(451);
    expect((await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json().device).toEqual(device);
  });
});

describe('events', () => {
  it.each(['device', 'user'] as const)(
    'a %s: {events:[{name, date?}]} -> 202 {}; no name, a bare string, an empty list -> 400',
    async (kind) => {
      const d = await phone(`eve-${kind}`);
      const url = kind === 'device' ? `/v6/devices/${d.id}/events` : `/v6/users/eve-${kind}/events`;
      const ok = await call(h, 'POST', url, app.keys.write, {
        events: [{ name: 'signup' }, { name: 'signup', date: '2020-01-02T03:04:05Z' }],
      });
      expect(ok.statusCode).toBe(202);
      expect(ok.json()).toEqual({});
      for (const events of [[{ date: '2020-01-02T03:04:05Z' }], ['signup'], []]) {
        const bad = await call(h, 'POST', url, app.keys.write, { events });
        expect(bad.statusCode, JSON.stringify(events)).toBe(400);
        expect(bad.json().error).toMatch(/^events/);
      }
      const { device } = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json();
      expect(device.user_events['Public Api.signup']).toEqual({
        count: 2,
        first_happened_at: '2020-01-02T03:04:05.000Z',
        last_happened_at: expect.stringMatching(ISO_MS),
      });
    },
  );
});

describe('users', () => {
  it('PUT /v6/users/:user_id updates every device of the user', async () => {
    const [a, b] = [await phone('dan'), await phone('dan')];
    const res = await call(h, 'PUT', '/v6/users/dan', app.keys.write, { user: { custom: { level: { type: 'integer', value: 3 } } } });
    expect(res.statusCode, res.body).toBe(200);
    for (const d of [a, b]) {
      const { device } = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json();
      expect(device.user_attributes.level).toEqual({ type: 'integer', value: 3 });
    }
  });

  it('DELETE /v6/users/:user_id/devices: {devices:[{device_id, status}], metadata}; 200 when all were erased', async () => {
    const ids = [(await phone('fay')).id, (await phone('fay')).id].sort();
    const res = await call(h, 'DELETE', '/v6/users/fay/devices', app.keys.write);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toEqual({
      devices: ids.map((device_id) => ({ device_id, status: 200 })),
      metadata: { success: 2, failure: 0, out_of_range: 0, total: 2 },
    });
    for (const d of body.devices) expect(typeof d.device_id === 'string' && typeof d.status === 'number').toBe(true);
    for (const n of Object.values(body.metadata)) expect(Number.isInteger(n)).toBe(true);
    expect((await call(h, 'GET', `/v6/devices/${ids[0]}`, app.keys.read)).json().device.platform).toBe('Unknown');
    expect((await call(h, 'DELETE', '/v6/users/fay/devices', app.keys.write)).statusCode).toBe(404); // none left
  });

  it('erases at most 10 a call: the rest answer 416 and count in out_of_range, the call 200 (none failed)', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 11; i++) ids.push((await register(h, app.keys.write, { platform: 'android', user_id: 'gus' })).id);
    ids.sort();
    const res = await call(h, 'DELETE', '/v6/users/gus/devices', app.keys.write);
    expect(res.statusCode).toBe(200);
    expect(res.json().devices.at(-1)).toEqual({ device_id: ids[10], status: 416 });
    expect(res.json().metadata).toEqual({ success: 10, failure: 0, out_of_range: 1, total: 11 });
  });

  it("a device that stops being the user's while the call waits for it answers 404, counted in failure", async () => {
    const ids = [(await phone('hal')).id, (await phone('hal')).id].sort();
    const blocker = new pg.Client({ connectionString: h.databaseUrl });
    await blocker.connect();
    try {
      // hold the first device while the DELETE lists the user's devices, then hand it to another user
      await blocker.query('begin');
      await blocker.query('select id from devices where id = $1 for update', [ids[0]]);
      const pending = call(h, 'DELETE', '/v6/users/hal/devices', app.keys.write);
      await waitForLockWait(blocker);
      await blocker.query("update devices set user_id = 'someone-else' where id = $1", [ids[0]]);
      await blocker.query('commit');
      const res = await pending;
      expect(res.statusCode).toBe(207);
      expect(res.json()).toEqual({
        devices: [
          { device_id: ids[0], status: 404 },
          { device_id: ids[1], status: 200 },
        ],
        metadata: { success: 1, failure: 1, out_of_range: 0, total: 2 },
      });
    } finally {
      await blocker.end();
    }
  });
});

/** Until some other session of the database waits for a row lock. */
async function waitForLockWait(client: pg.Client) {
  for (let i = 0; i < 200; i++) {
    const { rows } = await client.query(
      "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
    );
    if (rows[0].n > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('the request never waited for the lock');
}

describe('audiences', () => {
  it('GET /v6/audiences and GET /v6/audiences/:id: name, created_at, updated_at, id, test (bool); device_count on one', async () => {
    const audience = await audienceFor(h, app.app.id, [{ name: 'user_id', criteria: ['ivy'] }]);
    await phone('ivy');
    const list = await call(h, 'GET', '/v6/audiences?per=50&page=1', app.keys.read);
    expect(list.statusCode).toBe(200);
    for (const a of list.json().audiences) {
      expect(typeof a.name === 'string' && typeof a.id === 'string' && typeof a.test === 'boolean').toBe(true);
      expect(a.created_at).toMatch(ISO_MS);
      expect(a.updated_at).toMatch(ISO_MS);
    }
    const one = await call(h, 'GET', `/v6/audiences/${audience.id}`, app.keys.read);
    expect(one.statusCode).toBe(200);
    expect(one.json().audience).toEqual({
      name: audience.name,
      created_at: expect.stringMatching(ISO_MS),
      updated_at: expect.stringMatching(ISO_MS),
      id: audience.id,
      test: false,
      device_count: 1,
    });
  });
});

/** Pages a cursor listing the way public clients do: again with `cursor` until a page has no devices. */
async function pageUntilEmpty(url: string, key: string) {
  const seen: string[] = [];
  const totals: unknown[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 20; page++) {
    const res = await call(h, 'GET', `${url}${cursor === undefined ? '' : `&cursor=${encodeURIComponent(cursor)}`}`, key);
    expect(res.statusCode, res.body).toBe(200);
    const { meta, devices } = res.json();
    expect(typeof meta.cursor).toBe('string');
    expect(Number.isInteger(meta.total)).toBe(true);
    totals.push(meta.total);
    if (devices.length === 0) return { seen, totals, cursor: meta.cursor as string };
    devices.forEach(expectDeviceRecord);
    seen.push(...devices.map((d: { id: string }) => d.id));
    cursor = meta.cursor;
  }
  throw new Error(`${url}: no empty page after 20 pages`);
}

describe('cursor pages', () => {
  it('GET /v6/audiences/:id/devices: {meta:{cursor, total}, devices}, each device once until a page has none', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await phone('jay')).id);
    const audience = await audienceFor(h, app.app.id, [{ name: 'user_id', criteria: ['jay'] }]);
    const { seen, totals } = await pageUntilEmpty(`/v6/audiences/${audience.id}/devices?per=2`, app.keys.read);
    expect(seen).toEqual([...ids].sort());
    expect(totals).toEqual([5, 5, 5, 5]); // 2 + 2 + 1, then the empty page
    expect((await call(h, 'GET', `/v6/audiences/${audience.id}/devices?cursor=unknown`, app.keys.read)).statusCode).toBe(404);
  });

  it('GET /v6/devices/uninstalled: the devices whose token the gateways rejected, in the same pages, with when and why', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const d = await registerDevice(h, app.keys.sdk, { platform: 'ios', user_id: 'kim' });
      gw.apns.markUnregistered(d.token);
      ids.push(d.id);
    }
    const sent = await call(h, 'POST', '/v6/transactional/notifications', app.keys.write, {
      to: { field: 'user_id', value: 'kim' },
      group: 'shapes',
      notification: { payload: { alert: 'hi' } },
    });
    expect(sent.json().results.uninstalled, sent.body).toBe(3);

    const { seen, totals } = await pageUntilEmpty('/v6/devices/uninstalled?per=2', app.keys.read);
    expect([...seen].sort()).toEqual([...ids].sort());
    expect(totals).toEqual([3, 3, 3]);
    const first = (await call(h, 'GET', '/v6/devices/uninstalled?per=1', app.keys.read)).json().devices[0];
    expect(first).toMatchObject({ platform: 'iOS', user_id: 'kim', reason: 'Unregistered' });
    expect(first.uninstalled_at).toMatch(ISO_MS);

    const later = (
      await call(h, 'GET', `/v6/devices/uninstalled?from=${new Date(Date.now() + 60_000).toISOString()}`, app.keys.read)
    ).json();
    expect(later).toEqual({ meta: { cursor: expect.any(String), total: 0 }, devices: [] });
    expect((await call(h, 'GET', '/v6/devices/uninstalled?cursor=unknown', app.keys.read)).statusCode).toBe(404);
    // forged positions PostgreSQL could not read (year 0, 30 February) or in another form: 404, never a 500
    for (const at of ['0000-01-01T00:00:00.000000Z', '2026-02-30T00:00:00.000000Z', '2026-01-01T00:00:00.000Z', 'now']) {
      const forged = encodeCursor('uninstalled', [at, FIRST_ID]);
      expect((await call(h, 'GET', `/v6/devices/uninstalled?cursor=${forged}`, app.keys.read)).statusCode, at).toBe(404);
    }
  });
});

describe("another app's keys", () => {
  it('reach none of these devices, users or audiences (404) and change nothing', async () => {
    const d = await phone('lou');
    const audience = await audienceFor(h, app.app.id, [{ name: 'user_id', criteria: ['lou'] }]);
    const ours = (await call(h, 'GET', `/v6/audiences/${audience.id}/devices`, app.keys.read)).json();
    const attempts = [
      call(h, 'GET', `/v6/devices/${d.id}`, other.keys.read),
      call(h, 'PUT', `/v6/devices/${d.id}`, other.keys.write, { device: { tags: ['theirs'] } }),
      call(h, 'POST', `/v6/devices/${d.id}/events`, other.keys.write, { events: [{ name: 'theirs' }] }),
      call(h, 'POST', `/v6/devices/${d.id}/erase`, other.keys.write),
      call(h, 'PUT', '/v6/users/lou', other.keys.write, { user: { custom: { theirs: { type: 'boolean', value: true } } } }),
      call(h, 'POST', '/v6/users/lou/events', other.keys.write, { events: [{ name: 'theirs' }] }),
      call(h, 'DELETE', '/v6/users/lou/devices', other.keys.write),
      call(h, 'GET', `/v6/audiences/${audience.id}`, other.keys.read),
      call(h, 'GET', `/v6/audiences/${audience.id}/devices`, other.keys.read),
      call(h, 'GET', `/v6/audiences/${audience.id}/devices?cursor=${encodeURIComponent(ours.meta.cursor)}`, other.keys.read),
    ];
    for (const res of await Promise.all(attempts)) expect(res.statusCode, res.body).toBe(404);

    const { device } = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json();
    expect(device).toMatchObject({ tags: ['vip'], user_id: 'lou', erased_at: null, user_events: {} });
    expect(Object.keys(device.user_attributes)).toEqual(['plan']);
    const theirs = (await call(h, 'GET', '/v6/devices/uninstalled', other.keys.read)).json();
    expect(theirs.meta.total).toBe(0);
    expect(theirs.devices).toEqual([]);
    expect((await call(h, 'GET', '/v6/audiences', other.keys.read)).json().audiences).toEqual([]);
  });
});
