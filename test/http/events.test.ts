import { beforeAll, describe, expect, it } from 'vitest';
import { useHarness, type Harness } from '../helpers/harness.js';
import { call, countVia, register } from './device-support.js';

type App = Awaited<ReturnType<Harness['createApp']>>;

describe('events and users', () => {
  const h = useHarness();
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });

  const events = (id: string) =>
    h.db.db.selectFrom('device_events').selectAll().where('device_id', '=', id).orderBy('source').orderBy('name').execute();

  it('the key decides the source: none for the SDK, "Public Api" for a write key, which may name another', async () => {
    const d = await register(h, app.keys.sdk, { platform: 'ios' });
    const sdk = await call(h, 'POST', `/v6/devices/${d.id}/events`, app.keys.sdk, { events: [{ name: 'open' }] });
    expect(sdk.statusCode).toBe(202);
    expect(sdk.json()).toEqual({});
    expect(
      (
        await call(h, 'POST', `/v6/devices/${d.id}/events`, app.keys.write, {
          events: [{ name: 'buy' }, { name: 'imported', source: 'Mixpanel' }],
        })
      ).statusCode,
    ).toBe(202);
    expect((await events(d.id)).map((e) => [e.source, e.name])).toEqual([
      ['', 'open'],
      ['Mixpanel', 'imported'],
      ['Public Api', 'buy'],
    ]);
    const viaSdk = await call(h, 'POST', `/v6/devices/${d.id}/events`, app.keys.sdk, { events: [{ name: 'x', source: 'Mixpanel' }] });
    expect(viaSdk.statusCode).toBe(400);
    expect(viaSdk.json().error).toBe('events[0].source: only a write key may name an event source');

    const device = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json().device;
    expect(Object.keys(device.user_events).sort()).toEqual(['Mixpanel.imported', 'Public Api.buy', 'open']);
    expect(await countVia(h, app.app.id, app.keys.read, [{ name: 'events.Public Api.buy', criteria: [true] }])).toBe(1);
    expect(await countVia(h, app.app.id, app.keys.read, [{ name: 'events.buy', criteria: [true] }])).toBe(0);
    expect(await countVia(h, app.app.id, app.keys.read, [{ name: 'events.open', criteria: [true] }])).toBe(1);
  });

  it('keeps count, first and last time whatever order the dates arrive in', async () => {
    const d = await register(h, app.keys.sdk, { platform: 'android' });
    await call(h, 'POST', `/v6/devices/${d.id}/events`, app.keys.sdk, {
      events: [
        { name: 'play', date: '2024-03-10T10:00:00Z' },
        { name: 'play', date: '2024-01-05T10:00:00+02:00' },
      ],
    });
    await call(h, 'POST', `/v6/devices/${d.id}/events`, app.keys.sdk, { events: [{ name: 'play', date: '2024-02-01T00:00:00Z' }] });
    const [row] = await events(d.id);
    expect(row).toMatchObject({ count: 3 });
    expect(row!.first_happened_at.toISOString()).toBe('2024-01-05T08:00:00.000Z');
    expect(row!.last_happened_at.toISOString()).toBe('2024-03-10T10:00:00.000Z');
  });

  it('concurrent posts add up exactly (atomic upsert), first/last are the extremes', async () => {
    const d = await register(h, app.keys.sdk, { platform: 'ios' });
    const posts = Array.from({ length: 40 }, (_, i) =>
      call(h, 'POST', `/v6/devices/${d.id}/events`, app.keys.sdk, {
        events: [
          { name: 'tap', date: new Date(Date.UTC(2024, 0, 1 + i)).toISOString() },
          { name: 'tap', date: new Date(Date.UTC(2024, 0, 1 + i, 12)).toISOString() },
          { name: 'view' },
        ],
      }),
    );
    const results = await Promise.all(posts);
    expect(results.map((r) => r.statusCode)).toEqual(Array(40).fill(202));
    const rows = await events(d.id);
    expect(rows.find((r) => r.name === 'tap')).toMatchObject({ count: 80 });
    expect(rows.find((r) => r.name === 'view')).toMatchObject({ count: 40 });
    const tap = rows.find((r) => r.name === 'tap')!;
    expect(tap.first_happened_at.toISOString()).toBe('2024-01-01T00:00:00.000Z');
    expect(tap.last_happened_at.toISOString()).toBe('2024-02-09T12:00:00.000Z');
  });

  it('malformed event bodies answer 400 naming the field, and store nothing', async () => {
    const d = await register(h, app.keys.sdk, { platform: 'ios' });
    const cases: [unknown, RegExp][] = [
      [{ events: 'open' }, /^events: /],
      [{ events: [] }, /^events: must hold at least one event/],
      [{ events: [{ name: 'ok' }, { name: 'has.dot' }] }, /^events\[1\]\.name: /],
      [{ events: [{ name: 'ok', date: 'tomorrow' }] }, /^events\[0\]\.date: must be an ISO 8601 date/],
      [
        { events: [{ name: 'ok', date: '9999-12-31T23:59:59-23:59' }] },
        /^events\[0\]\.date: must be an ISO 8601 date within years 1 to 9999/,
      ],
      [{ events: [{ name: 'ok' }, 7] }, /^events\[1\]: must be an object/],
      [{}, /^events: /],
    ];
    for (const [body, error] of cases) {
      const res = await call(h, 'POST', `/v6/devices/${d.id}/events`, app.keys.sdk, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error).toMatch(error);
    }
    expect(await events(d.id)).toEqual([]);
    expect((await call(h, 'POST', `/v6/devices/${d.id}/events`, app.keys.sdk, '{"events": [')).statusCode).toBe(400);
    expect(
      (await call(h, 'POST', '/v6/devices/00000000-0000-4000-8000-000000000000/events', app.keys.sdk, { events: [{ name: 'a' }] }))
        .statusCode,
    ).toBe(404);
  });

  it('a device holds at most 500 distinct events: past that a new one is not kept, those it holds still count', async () => {
    const d = await register(h, app.keys.sdk, { platform: 'ios', user_id: 'busy' });
    const other = await register(h, app.keys.sdk, { platform: 'ios', user_id: 'busy' });
    const names = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ name: `e${from + i}` }));
    const post = (key: string, path: string, list: { name: string }[]) => call(h, 'POST', path, key, { events: list });
    expect((await post(app.keys.sdk, `/v6/devices/${d.id}/events`, names(0, 499))).statusCode).toBe(202);
    // one place left: the first new name of the request takes it
    expect((await post(app.keys.sdk, `/v6/devices/${d.id}/events`, [{ name: 'e0' }, { name: 'e499' }, { name: 'e500' }])).statusCode).toBe(
      202,
    );
    const held = await events(d.id);
    expect(held).toHaveLength(500);
    expect(held.find((e) => e.name === 'e0')?.count).toBe(2);
    expect(held.some((e) => e.name === 'e499')).toBe(true);
    expect(held.some((e) => e.name === 'e500')).toBe(false);
    // a crowded device does not hold back the user's other devices
    expect((await post(app.keys.write, '/v6/users/busy/events', [{ name: 'e0' }, { name: 'fresh' }])).statusCode).toBe(202);
    expect((await events(d.id)).find((e) => e.name === 'e0' && e.source === 'Public Api')).toBeUndefined();
    expect((await events(other.id)).map((e) => e.name)).toEqual(['e0', 'fresh']);
    expect(await events(d.id)).toHaveLength(500);
  });

  it('PUT /users/:id merges attributes into every device of the user; user events count on each', async () => {
    const a = await register(h, app.keys.sdk, { platform: 'ios', user_id: 'user 42', custom: { keep: { type: 'integer', value: 1 } } });
    const b = await register(h, app.keys.sdk, { platform: 'android', user_id: 'user 42' });
    const other = await register(h, app.keys.sdk, { platform: 'android', user_id: 'someone else' });

    const res = await call(h, 'PUT', `/v6/users/${encodeURIComponent('user 42')}`, app.keys.write, {
      user: { custom: { tier: { type: 'string', value: 'gold' }, bad: { type: 'integer', value: 1.5 } } },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      user: { user_id: 'user 42', device_count: 2 },
      dropped: [{ field: 'custom.bad', error: 'must be a 32-bit signed integer' }],
    });
    const ev = await call(h, 'POST', `/v6/users/${encodeURIComponent('user 42')}/events`, app.keys.write, {
      events: [{ name: 'renewed' }, { name: 'renewed' }],
    });
    expect(ev.statusCode).toBe(202);

    for (const id of [a.id, b.id]) {
      const device = (await call(h, 'GET', `/v6/devices/${id}`, app.keys.read)).json().device;
      expect(device.custom.tier).toEqual({ type: 'string', value: 'gold' });
      expect(device.user_events['Public Api.renewed'].count).toBe(2);
    }
    expect((await call(h, 'GET', `/v6/devices/${a.id}`, app.keys.read)).json().device.custom.keep).toEqual({ type: 'integer', value: 1 });
    const untouched = (await call(h, 'GET', `/v6/devices/${other.id}`, app.keys.read)).json().device;
    expect(untouched.custom).toEqual({});
    expect(untouched.user_events).toEqual({});
    expect(await countVia(h, app.app.id, app.keys.read, [{ name: 'events.Public Api.renewed', criteria: [2] }])).toBe(2);

    expect(
      (await call(h, 'PUT', '/v6/users/nobody', app.keys.write, { user: { custom: { a: { type: 'integer', value: 1 } } } })).statusCode,
    ).toBe(404);
    expect((await call(h, 'POST', '/v6/users/nobody/events', app.keys.write, { events: [{ name: 'a' }] })).statusCode).toBe(404);
    const nothing = await call(h, 'PUT', `/v6/users/${encodeURIComponent('user 42')}`, app.keys.write, {
      user: { custom: { x: { type: 'date', value: 'no' } } },
    });
    expect(nothing.statusCode).toBe(422);
    expect((await call(h, 'PUT', '/v6/users/x', app.keys.write, { users: {} })).statusCode).toBe(400);
  });

  it("DELETE /users/:id/devices erases ten of the user's devices a call, in id order; the rest answer 416 until the next", async () => {
    const mine = [];
    for (let i = 0; i < 12; i++)
      mine.push(await register(h, app.keys.sdk, { platform: i % 2 ? 'ios' : 'android', user_id: 'leaver', locale: 'lv_LV' }));
    const other = await register(h, app.keys.sdk, { platform: 'ios', user_id: 'stayer', locale: 'lv_LV' });
    const ids = mine.map((d) => d.id).sort();

    expect((await call(h, 'DELETE', '/v6/users/leaver/devices', app.keys.sdk)).statusCode).toBe(403); // the SDK key cannot erase
    const first = await call(h, 'DELETE', '/v6/users/leaver/devices', app.keys.write);
    // ten erased, two left for the next call: nothing failed, so 200 (207 is for failures, as the public API answers)
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toEqual({
      devices: [
        ...ids.slice(0, 10).map((device_id) => ({ device_id, status: 200 })),
        ...ids.slice(10).map((device_id) => ({ device_id, status: 416 })),
      ],
      metadata: { success: 10, failure: 0, out_of_range: 2, total: 12 },
    });
    const erased = await h.db.db
      .selectFrom('devices')
      .select(['id', 'user_id', 'locale'])
      .where('id', 'in', ids.slice(0, 10))
      .where('erased_at', 'is not', null)
      .execute();
    expect(erased).toHaveLength(10);
    expect(erased.every((d) => d.user_id === null && d.locale === null)).toBe(true);
    expect(await countVia(h, app.app.id, app.keys.read, [{ name: 'locale', criteria: ['lv_LV'] }])).toBe(3);

    const second = await call(h, 'DELETE', '/v6/users/leaver/devices', app.keys.write);
    expect(second.statusCode).toBe(200);
    expect(second.json()).toEqual({
      devices: ids.slice(10).map((device_id) => ({ device_id, status: 200 })),
      metadata: { success: 2, failure: 0, out_of_range: 0, total: 2 },
    });
    expect((await call(h, 'DELETE', '/v6/users/leaver/devices', app.keys.write)).statusCode).toBe(404);
    expect((await call(h, 'GET', `/v6/devices/${other.id}`, app.keys.read)).json().device).toMatchObject({
      user_id: 'stayer',
      erased_at: null,
    });
  });
});
