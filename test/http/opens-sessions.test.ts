import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, ManualClock, useHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { call } from './device-support.js';
import { ISO_MS, type AppWithKeys } from './support.js';

/**
 * Sessions and push opens the SDK reports, and what is counted from them: last_opened, the opens and event
 * conversions of a notification, and the daily statistics. Pushes go through the real gateway clients to the
 * mocks (transactional sends, which answer once the gateway has), so "received" means what delivery recorded.
 */
describe('opens, sessions and their statistics', () => {
  let h: Harness;
  let gw: Gateways;

  const DAY_MS = 86_400_000;
  const dayOf = (d: Date) => d.toISOString().slice(0, 10);
  const today = dayOf(new Date());
  const daysAgo = (n: number) => dayOf(new Date(Date.parse(`${today}T00:00:00Z`) - n * DAY_MS));

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ env: { ...gw.env, CONVERSION_WINDOW_HOURS: '24' } });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  async function newApp(): Promise<AppWithKeys> {
    const app = await h.createApp();
    await setCredentials(h, app.app.id, gw);
    return app;
  }
  const session = (app: AppWithKeys, deviceId: string, body: Record<string, unknown>, key = app.keys.sdk) =>
    call(h, 'POST', `/v6/devices/${deviceId}/sessions`, key, { session: body });
  const open = (app: AppWithKeys, deviceId: string, body: Record<string, unknown>, key = app.keys.sdk) =>
    call(h, 'POST', `/v6/devices/${deviceId}/opens`, key, { open: body });
  const stats = (app: AppWithKeys, path: string) => call(h, 'GET', `/v6/stats/${path}`, app.keys.read);
  const series = async (app: AppWithKeys, metric: string, query: string) => {
    const res = await stats(app, `${metric}?${query}`);
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { date: string; count: number }[];
  };
  const counts = async (app: AppWithKeys, metric: string, from: string, to: string) =>
    (await series(app, metric, `from=${from}&to=${to}`)).map((r) => r.count);
  const lastOpened = async (app: AppWithKeys, deviceId: string) =>
    (await call(h, 'GET', `/v6/devices/${deviceId}`, app.keys.read)).json().device.last_opened as string | null;
  const pushTo = async (app: AppWithKeys, device: RegisteredDevice, alert = 'Back in stock') => {
    const res = await call(h, 'POST', '/v6/transactional/notifications', app.keys.write, {
      to: { field: 'device_id', value: device.id },
      group: 'opens-test',
      notification: { payload: { alert } },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().results.success).toBe(1);
    return res.json().id as string;
  };
  const notificationStats = async (app: AppWithKeys, id: string) => {
    const res = await stats(app, `notifications/${id}/events`);
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };

  describe('sessions', () => {
    it('a start counts one session; its retry and its end (same id, with duration) count nothing more', async () => {
      const app = await newApp();
      const d = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
      expect(await lastOpened(app, d.id)).toBeNull();
      const id = randomUUID();
      const startedAt = new Date(Date.now() - 60_000).toISOString();

      const res = await session(app, d.id, { id, started_at: startedAt });
      expect(res.statusCode, res.body).toBe(202);
      expect(res.json()).toEqual({});
      expect((await session(app, d.id, { id, started_at: startedAt })).statusCode).toBe(202);
      expect((await session(app, d.id, { id, duration: 42 })).statusCode).toBe(202);
      expect((await session(app, d.id, { id, duration: 99 })).statusCode).toBe(202); // the first end stays

      expect(await counts(app, 'sessions', today, today)).toEqual([1]);
      expect(await counts(app, 'active_users', today, today)).toEqual([1]);
      expect(await lastOpened(app, d.id)).toBe(startedAt);
      const stored = await h.db.db.selectFrom('app_sessions').selectAll().where('device_id', '=', d.id).execute();
      expect(stored).toMatchObject([{ id, duration_seconds: 42 }]);
      expect(stored[0]!.started_at.toISOString()).toBe(startedAt);
    });

    it('an end whose start was lost counts, started duration seconds before it was reported', async () => {
      const app = await newApp();
      const d = await registerDevice(h, app.keys.sdk, { platform: 'android' });
      const before = Date.now();
      expect((await session(app, d.id, { id: randomUUID(), duration: 600 })).statusCode).toBe(202);
      const opened = Date.parse((await lastOpened(app, d.id))!);
      expect(opened).toBeGreaterThanOrEqual(before - 600_000);
      expect(opened).toBeLessThanOrEqual(Date.now() - 600_000);
      // counted on the day it started: yesterday in the first ten minutes after midnight
      const started = dayOf(new Date(opened));
      expect(await counts(app, 'sessions', started, started)).toEqual([1]);
    });

    it('a session id counts once per device, and each device counts once a day in active_users', async () => {
      const app = await newApp();
      const a = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
      const b = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
      const shared = randomUUID();
      await session(app, a.id, { id: shared });
      await session(app, b.id, { id: shared });
      await session(app, a.id, { id: randomUUID() });
      await Promise.all(Array.from({ length: 5 }, () => session(app, a.id, { id: shared, duration: 5 })));
      expect(await counts(app, 'sessions', today, today)).toEqual([3]);
      expect(await counts(app, 'active_users', today, today)).toEqual([2]);
    });

    it('last_opened never moves backwards: an older report leaves it', async () => {
      const app = await newApp();
      const d = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
      const recent = new Date(Date.now() - 1000).toISOString();
      await session(app, d.id, { id: randomUUID(), started_at: recent });
      await session(app, d.id, { id: randomUUID(), started_at: new Date(Date.now() - 2 * DAY_MS).toISOString() });
      expect(await lastOpened(app, d.id)).toBe(recent);
      expect(await lastOpened(app, d.id)).toMatch(ISO_MS);
    });

    it('a date a little ahead (a phone clock) counts as now', async () => {
      const app = await newApp();
      const d = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
      const before = Date.now();
      await session(app, d.id, { id: randomUUID(), started_at: new Date(Date.now() + 30 * 60_000).toISOString() });
      const opened = Date.parse((await lastOpened(app, d.id))!);
      expect(opened).toBeGreaterThanOrEqual(before);
      expect(opened).toBeLessThanOrEqual(Date.now());
    });
  });

  describe('push opens and the notification statistics', () => {
    it('counts direct (tapped) and indirect opens once per device and kind; influenced is both; opens counts devices', async () => {
      const app = await newApp();
      const a = await registerDevice(h, app.keys.sdk, { platform: 'ios', user_id: 'opener' });
      const b = await registerDevice(h, app.keys.sdk, { platform: 'android', user_id: 'opener' });
      const sent = await call(h, 'POST', '/v6/transactional/notifications', app.keys.write, {
        to: { field: 'user_id', value: 'opener' },
        group: 'opens-test',
        notification: { payload: { alert: 'Back in stock' } },
      });
      expect(sent.json().results.success, sent.body).toBe(2);
      const nid = sent.json().id as string;

      const res = await open(app, a.id, { _nid: nid, tapped: true });
      expect(res.statusCode, res.body).toBe(202);
      expect(res.json()).toEqual({});
      await open(app, a.id, { _nid: nid, tapped: true }); // a retry
      await open(app, a.id, { _nid: nid, tapped: false }); // opened without a tap, then tapped: both kinds
      await Promise.all([open(app, b.id, { _nid: nid, tapped: false }), open(app, b.id, { _nid: nid, tapped: false })]);

      expect(await notificationStats(app, nid)).toMatchObject({ direct_opens: 1, indirect_opens: 2, influenced_opens: 3, opens: 2 });
      expect(await counts(app, 'opens', today, today)).toEqual([3]);
      expect(await counts(app, 'active_users', today, today)).toEqual([2]);
      expect(Date.parse((await lastOpened(app, b.id))!)).toBeGreaterThan(Date.now() - 60_000);
    });

    it('answers every documented field with its JSON type (and our extra pushes_expired, pushes_capped, devices_not_allowed, pushes_rejected_by_reason)', async () => {
      const app = await newApp();
      const d = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
      const nid = await pushTo(app, d, 'Soldes !');
      const body = await notificationStats(app, nid);
      expect(body).toEqual({
        id: nid,
        audience_id: null, // a transactional send names its devices
        message_id: null,
        push_text: 'Soldes !',
        published_time: expect.stringMatching(ISO_MS),
        direct_opens: 0,
        indirect_opens: 0,
        influenced_opens: 0,
        opens: 0,
        pushes_succeeded: 1,
        pushes_rejected: 0,
        pushes_rejected_by_reason: {},
        pushes_expired: 0,
        pushes_capped: 0,
        devices_not_allowed: 0,
        event_conversions: {},
      });

      const created = await call(h, 'POST', '/v6/notifications', app.keys.write, {
        notification: { to: [{ name: 'locale', criteria: ['xx_XX'] }], payload: { alert: 'later' } },
      });
      const audience = await notificationStats(app, created.json().id);
      expect(audience.audience_id).toBe(created.json().to.id);
      expect(typeof audience.audience_id).toBe('string');
    });

    it('counts events a device sent within the window after it received the push, per event', async () => {
      const app = await newApp();
      const reached = await registerDevice(h, app.keys.sdk, { platform: 'ios', user_id: 'ana' });
      const other = await registerDevice(h, app.keys.sdk, { platform: 'ios', user_id: 'bob' });
      const sentAt = Date.now();
      const nid = await pushTo(app, reached);
      const events = (deviceId: string, key: string, list: unknown[]) =>
        call(h, 'POST', `/v6/devices/${deviceId}/events`, key, { events: list });

      expect((await events(reached.id, app.keys.sdk, [{ name: 'purchase' }, { name: 'purchase' }, { name: 'share' }])).statusCode).toBe(
        202,
      );
      expect((await events(reached.id, app.keys.write, [{ name: 'purchase' }])).statusCode).toBe(202);
      expect(
        (await call(h, 'POST', '/v6/users/ana/events', app.keys.write, { events: [{ name: 'signup', source: 'Mixpanel' }] })).statusCode,
      ).toBe(202);
      // outside the window: before the push arrived, and more than 24 hours after it
      await events(reached.id, app.keys.sdk, [{ name: 'purchase', date: new Date(sentAt - 60 * 60_000).toISOString() }]);
      await events(reached.id, app.keys.sdk, [{ name: 'purchase', date: new Date(Date.now() + 25 * 3_600_000).toISOString() }]);
      // a device the push did not reach
      await events(other.id, app.keys.sdk, [{ name: 'purchase' }]);
      await call(h, 'POST', '/v6/users/bob/events', app.keys.write, { events: [{ name: 'signup' }] });

      expect((await notificationStats(app, nid)).event_conversions).toEqual({
        purchase: 2,
        share: 1,
        'Public Api.purchase': 1,
        'Mixpanel.signup': 1,
      });
      // a later push: the next event counts for both pushes the device received within the window
      const second = await pushTo(app, reached);
      await events(reached.id, app.keys.sdk, [{ name: 'share' }]);
      expect((await notificationStats(app, nid)).event_conversions.share).toBe(2);
      expect((await notificationStats(app, second)).event_conversions).toEqual({ share: 1 });
    });

    it('with the sdk key, an open of a push the device did not receive is refused naming _nid; a write key is believed', async () => {
      const app = await newApp();
      const reached = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
      const stranger = await registerDevice(h, app.keys.sdk, { platform: 'android' });
      const nid = await pushTo(app, reached);
      // one could otherwise count opens of any notification from as many devices as one registers
      for (const tapped of [true, false]) {
        const res = await open(app, stranger.id, { _nid: nid, tapped });
        expect(res.statusCode).toBe(400);
        expect(res.json()).toEqual({ error: 'open._nid: was not delivered to this device' });
      }
      expect(await notificationStats(app, nid)).toMatchObject({ direct_opens: 0, indirect_opens: 0, opens: 0 });
      expect(await counts(app, 'opens', today, today)).toEqual([0]);
      expect(await lastOpened(app, stranger.id)).toBeNull();

      expect((await open(app, reached.id, { _nid: nid, tapped: true })).statusCode).toBe(202);
      // a backend relaying what its app reported (an import, a device that changed ids) is trusted as before
      expect((await open(app, stranger.id, { _nid: nid, tapped: false }, app.keys.write)).statusCode).toBe(202);
      expect(await notificationStats(app, nid)).toMatchObject({ direct_opens: 1, indirect_opens: 1, opens: 2 });
    });

    it('an open that names a notification of another app, or none, is refused naming _nid', async () => {
      const app = await newApp();
      const elsewhere = await newApp();
      const d = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
      const foreign = await pushTo(elsewhere, await registerDevice(h, elsewhere.keys.sdk, { platform: 'ios' }));
      for (const nid of [foreign, randomUUID(), 'not-an-id']) {
        const res = await open(app, d.id, { _nid: nid, tapped: true });
        expect(res.statusCode, nid).toBe(400);
        expect(res.json()).toEqual({ error: 'open._nid: is not a notification of this app' });
      }
      expect(await notificationStats(elsewhere, foreign)).toMatchObject({ direct_opens: 0, opens: 0 });
    });
  });

  describe('the daily statistics', () => {
    it('count per UTC day across midnight, one row a day oldest first, days without data as 0', async () => {
      const app = await newApp();
      const a = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
      const b = await registerDevice(h, app.keys.sdk, { platform: 'android' });
      await registerDevice(h, app.keys.sdk, { platform: 'android' });
      const lastMsOfYesterday = `${daysAgo(1)}T23:59:59.999Z`;
      const midnight = `${today}T00:00:00.000Z`;
      await session(app, a.id, { id: randomUUID(), started_at: lastMsOfYesterday });
      await session(app, a.id, { id: randomUUID(), started_at: midnight });
      await session(app, b.id, { id: randomUUID(), started_at: midnight });
      await session(app, b.id, { id: randomUUID(), started_at: `${daysAgo(3)}T12:00:00+02:00` });
      const nid = await pushTo(app, a);
      await open(app, a.id, { _nid: nid, tapped: true });

      const window = `from=${daysAgo(3)}&to=${today}`;
      const sessions = await series(app, 'sessions', window);
      expect(sessions).toEqual([
        { date: daysAgo(3), count: 1 },
        { date: daysAgo(2), count: 0 },
        { date: daysAgo(1), count: 1 },
        { date: today, count: 2 },
      ]);
      expect(await counts(app, 'active_users', daysAgo(3), today)).toEqual([1, 0, 1, 2]);
      expect(await counts(app, 'opens', daysAgo(3), today)).toEqual([0, 0, 0, 1]);
      expect(await counts(app, 'installs', daysAgo(3), today)).toEqual([0, 0, 0, 3]);
      // a window in the past and one of a single day
      expect(await counts(app, 'sessions', daysAgo(1), daysAgo(1))).toEqual([1]);
      expect(await counts(app, 'installs', daysAgo(10), daysAgo(1))).toEqual(Array(10).fill(0));

      expect((await stats(app, 'total_installs')).json()).toEqual({ total_installs: 3 });
      expect((await stats(app, `total_installs?to=${daysAgo(1)}`)).json()).toEqual({ total_installs: 0 });
      expect((await stats(app, `total_installs?from=${today}&to=${today}`)).json()).toEqual({ total_installs: 3 });
      expect((await stats(app, `total_installs?from=${daysAgo(5)}`)).json()).toEqual({ total_installs: 3 });
    });

    it('without from/to: the 30 days up to today; every row {date: string, count: integer}', async () => {
      const app = await newApp();
      for (const metric of ['installs', 'opens', 'sessions', 'active_users']) {
        const rows = await series(app, metric, '');
        expect(rows, metric).toHaveLength(30);
        expect(rows[0]!.date).toBe(daysAgo(29));
        expect(rows[29]!.date).toBe(today);
        for (const row of rows) {
          expect(Object.keys(row).sort()).toEqual(['count', 'date']);
          expect(row.date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
          expect(Number.isInteger(row.count)).toBe(true);
        }
      }
      expect((await series(app, 'sessions', `to=${daysAgo(1)}`)).at(-1)!.date).toBe(daysAgo(1));
      expect((await series(app, 'sessions', `from=${daysAgo(2)}`)).map((r) => r.date)).toEqual([daysAgo(2), daysAgo(1), today]);
      const total = await stats(app, 'total_installs');
      expect(total.json()).toEqual({ total_installs: 0 });
    });

    it('refuses a bad window with 400 naming the field', async () => {
      const app = await newApp();
      const cases: [string, string][] = [
        ['from=2026-02-30', 'from: must be a date YYYY-MM-DD'],
        ['to=yesterday', 'to: must be a date YYYY-MM-DD'],
        ['from=2026-1-05', 'from: must be a date YYYY-MM-DD'],
        ['from=2026-03-02&to=2026-03-01', 'from: must not be after to'],
        ['from=2024-01-01&to=2025-01-01', 'from: the window may span at most 366 days'],
      ];
      for (const [query, error] of cases)
        for (const metric of ['installs', 'sessions']) {
          const res = await stats(app, `${metric}?${query}`);
          expect(res.statusCode, `${metric}?${query}`).toBe(400);
          expect(res.json()).toEqual({ error });
        }
      expect((await stats(app, 'sessions?from=2024-01-01&to=2024-12-31')).statusCode).toBe(200); // 366 days
      expect((await stats(app, 'total_installs?to=2026-13-01')).json()).toEqual({ error: 'to: must be a date YYYY-MM-DD' });
      expect((await stats(app, 'total_installs?from=2026-03-02&to=2026-03-01')).json()).toEqual({ error: 'from: must not be after to' });
      // one number, not a series: total_installs takes any span
      expect((await stats(app, 'total_installs?from=2000-01-01')).statusCode).toBe(200);
    });
  });

  describe('validation and the device', () => {
    it('refuses malformed reports with 400 naming the field', async () => {
      const app = await newApp();
      const d = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
      const nid = await pushTo(app, d);
      const id = randomUUID();
      const future = new Date(Date.now() + 2 * 3_600_000).toISOString();
      const old = new Date(Date.now() - 8 * DAY_MS).toISOString();
      const sessionCases: [unknown, string][] = [
        [[], 'body must be {"session": {"id", "started_at"?, "duration"?}}'],
        [{}, 'session: must be an object'],
        [{ session: 'x' }, 'session: must be an object'],
        [{ session: {} }, 'session.id: must be a UUID'],
        [{ session: { id: 'abc' } }, 'session.id: must be a UUID'],
        [{ session: { id, duration: -1 } }, 'session.duration: must be a whole number of seconds from 0 to 86400'],
        [{ session: { id, duration: 1.5 } }, 'session.duration: must be a whole number of seconds from 0 to 86400'],
        [{ session: { id, duration: '10' } }, 'session.duration: must be a whole number of seconds from 0 to 86400'],
        [{ session: { id, duration: 86_401 } }, 'session.duration: must be at most 86400 seconds (a day)'],
        [
          { session: { id, started_at: '2026-05-01T12:00:00' } },
          'session.started_at: must be an ISO 8601 date-time with a time zone offset or Z, e.g. 2026-05-01T12:00:00Z',
        ],
        [
          { session: { id, started_at: 12 } },
          'session.started_at: must be an ISO 8601 date-time with a time zone offset or Z, e.g. 2026-05-01T12:00:00Z',
        ],
        [{ session: { id, started_at: future } }, 'session.started_at: must not be in the future'],
        [{ session: { id, started_at: old } }, 'session.started_at: must be within the last 7 days'],
      ];
      for (const [body, error] of sessionCases) {
        const res = await call(h, 'POST', `/v6/devices/${d.id}/sessions`, app.keys.sdk, body);
        expect(res.statusCode, JSON.stringify(body)).toBe(400);
        expect(res.json(), JSON.stringify(body)).toEqual({ error });
      }
      const openCases: [unknown, string][] = [
        [{ open: [] }, 'open: must be an object'],
        [{ open: { tapped: true } }, 'open._nid: must be the id of a notification of this app (the push carries it)'],
        [{ open: { _nid: nid } }, 'open.tapped: must be true (the push was tapped) or false (the app was opened without a tap)'],
        [
          { open: { _nid: nid, tapped: 'yes' } },
          'open.tapped: must be true (the push was tapped) or false (the app was opened without a tap)',
        ],
        [{ open: { _nid: nid, tapped: true, opened_at: future } }, 'open.opened_at: must not be in the future'],
        [{ open: { _nid: nid, tapped: true, opened_at: old } }, 'open.opened_at: must be within the last 7 days'],
        [
          { open: { _nid: nid, tapped: true, opened_at: new Date(Date.now() - DAY_MS).toISOString() } },
          'open.opened_at: is before the notification was created',
        ],
      ];
      for (const [body, error] of openCases) {
        const res = await call(h, 'POST', `/v6/devices/${d.id}/opens`, app.keys.sdk, body);
        expect(res.statusCode, JSON.stringify(body)).toBe(400);
        expect(res.json(), JSON.stringify(body)).toEqual({ error });
      }
      expect(await counts(app, 'sessions', today, today)).toEqual([0]);
      expect(await counts(app, 'opens', today, today)).toEqual([0]);
      expect(await lastOpened(app, d.id)).toBeNull();
    });

    it('an unknown device is 404, an erased one 451; erasing empties last_opened', async () => {
      const app = await newApp();
      const d = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
      const nid = await pushTo(app, d);
      for (const unknown of [randomUUID(), 'not-a-uuid']) {
        expect((await session(app, unknown, { id: randomUUID() })).json()).toEqual({ error: 'device not found' });
        expect((await open(app, unknown, { _nid: nid, tapped: true })).statusCode).toBe(404);
      }
      await session(app, d.id, { id: randomUUID() });
      expect(await lastOpened(app, d.id)).toMatch(ISO_MS);
      expect((await call(h, 'POST', `/v6/devices/${d.id}/erase`, app.keys.write)).json().device.last_opened).toBeNull();
      expect((await session(app, d.id, { id: randomUUID() })).statusCode).toBe(451);
      expect((await open(app, d.id, { _nid: nid, tapped: true })).statusCode).toBe(451);
      // what was counted before the erase stays counted
      expect(await counts(app, 'sessions', today, today)).toEqual([1]);
    });

    it("another app's keys reach neither the devices nor the statistics", async () => {
      const app = await newApp();
      const intruder = await newApp();
      const d = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
      const nid = await pushTo(app, d);
      expect((await session(app, d.id, { id: randomUUID() }, intruder.keys.sdk)).statusCode).toBe(404);
      expect((await session(app, d.id, { id: randomUUID() }, intruder.keys.write)).statusCode).toBe(404);
      expect((await open(app, d.id, { _nid: nid, tapped: true }, intruder.keys.sdk)).statusCode).toBe(404);
      expect((await call(h, 'GET', `/v6/stats/notifications/${nid}/events`, intruder.keys.read)).statusCode).toBe(404);

      await session(app, d.id, { id: randomUUID() });
      await open(app, d.id, { _nid: nid, tapped: true });
      expect(await counts(app, 'sessions', today, today)).toEqual([1]);
      for (const metric of ['installs', 'opens', 'sessions', 'active_users'])
        expect(await counts(intruder, metric, today, today), metric).toEqual([0]);
      expect((await stats(intruder, 'total_installs')).json()).toEqual({ total_installs: 0 });
      expect(await notificationStats(app, nid)).toMatchObject({ direct_opens: 1, opens: 1 });
    });

    it('a write key may report for a device too (a backend relaying its app); a read key may not', async () => {
      const app = await newApp();
      const d = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
      expect((await session(app, d.id, { id: randomUUID() }, app.keys.write)).statusCode).toBe(202);
      expect((await session(app, d.id, { id: randomUUID() }, app.keys.read)).statusCode).toBe(403);
      expect((await call(h, 'GET', '/v6/stats/sessions', app.keys.sdk)).statusCode).toBe(403);
    });
  });

  describe('on a moved clock', () => {
    // the server's Clock stands three days back at noon: a report without a date is dated by it, not by the machine
    const moved = new Date(`${daysAgo(3)}T12:00:00Z`);
    const hc = useHarness({ clock: new ManualClock(moved) });

    it("a session and an event reported without a date take the Clock's now", async () => {
      const app = await hc.createApp();
      const d = await registerDevice(hc, app.keys.sdk, { platform: 'android' });
      expect((await call(hc, 'POST', `/v6/devices/${d.id}/sessions`, app.keys.sdk, { session: { id: randomUUID() } })).statusCode).toBe(
        202,
      );
      expect((await call(hc, 'POST', `/v6/devices/${d.id}/events`, app.keys.sdk, { events: [{ name: 'purchase' }] })).statusCode).toBe(202);

      const sessions = await call(hc, 'GET', `/v6/stats/sessions?from=${daysAgo(3)}&to=${daysAgo(3)}`, app.keys.read);
      expect(sessions.json()).toEqual([{ date: daysAgo(3), count: 1 }]);
      const device = (await call(hc, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json().device;
      expect(device.last_opened).toBe(moved.toISOString());
      expect(device.user_events.purchase.first_happened_at).toBe(moved.toISOString());
    });
  });
});
