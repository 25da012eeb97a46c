import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { abBounds, abPoint, bucketOf, HOLDOUT, REST, type AbTest } from '../../src/domain/ab-test.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { basic, createHarness, ManualClock, type Harness } from '../helpers/harness.js';

/**
 * A/B tests end to end, API and workers on the mock gateways, on a clock the test moves: each device of the test
 * share is sent its bucket's variant, the holdout nothing and the rest waits; direct opens reported by the SDK route
 * pick the winner once `after` passed, which goes to exactly the rest; a manual pick; a cancel before the winner.
 */
const POLL = { SCHEDULE_POLL_MS: '20', RATE_LIMIT_SDK_PER_SECOND: '0' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const START = '2026-03-07T12:45:00Z';

describe('A/B tests', () => {
  const clock = new ManualClock(new Date(START));
  let h: Harness;
  let gw: Gateways;
  let keys: { read: string; write: string; sdk: string };
  let devices: RegisteredDevice[];

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, clock, env: { ...gw.env, ...POLL } });
    const created = await h.createApp('com.example.abtests');
    keys = created.keys;
    await setCredentials(h, created.app.id, gw);
    devices = [];
    for (let i = 0; i < 40; i++) devices.push(await registerDevice(h, keys.sdk, { platform: i % 2 ? 'android' : 'ios' }));
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });
  beforeEach(() => {
    gw.reset();
    clock.set(START);
  });

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown, key = keys.write) =>
    h.server.inject({ method, url, headers: { authorization: basic(key) }, payload: payload as Record<string, unknown> });
  const stats = async (id: string) => (await call('GET', `/v6/stats/notifications/${id}/events`, undefined, keys.read)).json();
  const read = async (id: string) => (await call('GET', `/v6/notifications/${id}`, undefined, keys.read)).json();
  /** The alert each device was shown, by token. */
  const shown = () => {
    const out = new Map<string, string>();
    for (const p of gw.apns.pushes) out.set(p.token, (p.payload as { aps: { alert: string } }).aps.alert);
    for (const p of gw.fcm.pushes)
      out.set(p.token, (p.message as { android: { notification: { body: string } } }).android.notification.body);
    return out;
  };
  const pushCount = () => gw.apns.pushes.length + gw.fcm.pushes.length;
  /** The devices of each bucket, as the domain computes it for this notification. */
  const bucketsOf = (id: string, test: AbTest) => {
    const b = abBounds(test);
    const out = new Map<number, RegisteredDevice[]>();
    for (const d of devices) {
      const k = bucketOf(abPoint(id, d.id), b);
      out.set(k, [...(out.get(k) ?? []), d]);
    }
    return out;
  };
  const alerts = ['Variant A', 'Variant B', 'Variant C'];
  const create = async (test: Omit<AbTest, 'variants'>, variants = 2) => {
    const notification = { to: '*', variants: alerts.slice(0, variants).map((alert) => ({ payload: { alert } })), ...test };
    const res = await call('POST', '/v6/notifications', { notification });
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().id as string;
    return { id, buckets: bucketsOf(id, { ...test, variants: notification.variants }), record: res.json() };
  };
  /** The test share of `sent` devices delivered, and the notification waiting for its winner. */
  const waiting = (id: string, sent: number) =>
    waitFor(`notification ${id} to wait for its winner`, async () => {
      const s = await stats(id);
      return s.ab_test?.stage === 'waiting' && s.pushes_succeeded === sent && pushCount() === sent ? s : null;
    });
  const tokensOf = (list: RegisteredDevice[] | undefined) => (list ?? []).map((d) => d.token).sort();

  it('sends each variant to its share, picks the one with more direct opens after the wait and sends it to exactly the rest', async () => {
    const test = { test_fraction: 0.5, holdout_fraction: 0.2, winner: { metric: 'direct_opens', after: '4h' } } as const;
    const { id, buckets, record } = await create(test);
    expect(record.notification).toMatchObject({ variants: [{ payload: { alert: 'Variant A' } }, { payload: { alert: 'Variant B' } }] });
    expect(record.notification.payload).toBeUndefined();
    const [a, b, holdout, rest] = [buckets.get(0)!, buckets.get(1)!, buckets.get(HOLDOUT)!, buckets.get(REST)!];
    // 40 devices: every share holds some (the hash of these ids is fixed per notification; a rerun draws anew)
    expect(a.length * b.length * holdout.length * rest.length).toBeGreaterThan(0);

    const before = await waiting(id, a.length + b.length);
    // each device of the test share got its variant; the holdout and the rest nothing
    expect(new Map([...shown()].sort())).toEqual(
      new Map([...a.map((d) => [d.token, 'Variant A'] as const), ...b.map((d) => [d.token, 'Variant B'] as const)].sort()),
    );
    expect(before.ab_test).toMatchObject({
      stage: 'waiting',
      metric: 'direct_opens',
      winner: null,
      winner_due_at: '2026-03-07T16:45:00.000Z',
      variants: [
        { variant: 0, sent: a.length, direct_opens: 0 },
        { variant: 1, sent: b.length, direct_opens: 0 },
      ],
      rest: { variant: null, sent: 0 },
      holdout: { devices: holdout.length },
    });
    expect((await read(id)).state).toBe('sending');

    // B is opened by two devices, A by one; an indirect open does not count for direct_opens
    const open = (d: RegisteredDevice, tapped: boolean) =>
      call('POST', `/v6/devices/${d.id}/opens`, { open: { _nid: id, tapped } }, keys.sdk).then((r) =>
        expect(r.statusCode, r.body).toBe(202),
      );
    await open(a[0]!, true);
    for (const d of a.slice(1, 4)) await open(d, false);
    for (const d of b.slice(0, 2)) await open(d, true);
    if (b.length < 2) throw new Error('variant B needs two devices for this test');

    // not yet: the clock is before `after`
    clock.set('2026-03-07T16:44:59Z');
    await sleep(300);
    expect(pushCount()).toBe(a.length + b.length);
    clock.set('2026-03-07T16:45:00Z');
    const done = await waitFor(`notification ${id} to finish`, async () => {
      const n = await read(id);
      return n.state === 'sent' ? n : null;
    });
    expect(done).toMatchObject({
      devices_targeted: a.length + b.length + rest.length,
      pushes_succeeded: a.length + b.length + rest.length,
    });
    const sent = shown();
    expect(pushCount()).toBe(a.length + b.length + rest.length); // each device once
    expect(tokensOf(rest)).toEqual(
      [...sent]
        .filter(([t]) => rest.some((d) => d.token === t))
        .map(([t]) => t)
        .sort(),
    );
    for (const d of rest) expect(sent.get(d.token)).toBe('Variant B');
    for (const d of holdout) expect(sent.has(d.token)).toBe(false);

    const after = await stats(id);
    expect(after.ab_test).toMatchObject({
      stage: 'rest',
      winner: 1,
      winner_picked_at: '2026-03-07T16:45:00.000Z',
      variants: [
        { variant: 0, sent: a.length, direct_opens: 1, opened: 4, direct_open_rate: Math.round((1 / a.length) * 10_000) / 10_000 },
        { variant: 1, sent: b.length, direct_opens: 2, opened: 2, direct_open_rate: Math.round((2 / b.length) * 10_000) / 10_000 },
      ],
      rest: { variant: 1, sent: rest.length, direct_opens: 0 },
      holdout: { devices: holdout.length },
    });
    expect(after.direct_opens).toBe(3);
  });

  it("measures the holdout as the baseline: its app opens and conversions in the window, and each variant's lift over it", async () => {
    const t0 = new Date(Math.floor((Date.now() - 2 * 86_400_000) / 60_000) * 60_000);
    const at = (hours: number) => new Date(t0.getTime() + hours * 3_600_000).toISOString();
    clock.set(t0.toISOString());
    const test = { test_fraction: 0.5, holdout_fraction: 0.3, winner: { metric: 'conversions:purchase', after: '48h' } } as const;
    const { id, buckets } = await create(test);
    const [a, b, holdout] = [buckets.get(0)!, buckets.get(1)!, buckets.get(HOLDOUT)!];
    if (a.length < 2 || b.length < 2 || holdout.length < 4) throw new Error('this test needs two devices per variant and four held out');
    await waiting(id, a.length + b.length);
    // sessions are judged against the Clock (none ahead of it): the reports come after the window, before the winner
    clock.set(at(26));

    const session = (d: RegisteredDevice, hours: number) =>
      call('POST', `/v6/devices/${d.id}/sessions`, { session: { id: randomUUID(), started_at: at(hours) } }, keys.sdk).then((r) =>
        expect(r.statusCode, r.body).toBeLessThan(300),
      );
    const purchase = (d: RegisteredDevice, ...hours: number[]) =>
      call('POST', `/v6/devices/${d.id}/events`, { events: hours.map((hh) => ({ name: 'purchase', date: at(hh) })) }, keys.sdk).then((r) =>
        expect(r.statusCode, r.body).toBeLessThan(300),
      );
    // the window is [t0, t0 + 24 h] (CONVERSION_WINDOW_HOURS), t0 when the fan-out met the holdout and sent the test
    const [h0, h1, h2, h3] = holdout;
    await session(h0!, 1); // opens, and converts twice
    await purchase(h0!, 2, 23.5);
    await session(h1!, 24.5); // too late for both
    await purchase(h1!, 24.5);
    await session(h2!, -1); // too early for both
    await purchase(h2!, -1);
    await purchase(h3!, 24); // converts on the window's last instant, opens nothing
    await session(a[0]!, 3); // A: one device opens the app and converts once
    await purchase(a[0]!, 3);
    await session(a[1]!, 25); // too late
    await session(b[0]!, 0.5); // B: two devices open the app, none converts
    await session(b[1]!, 12);
    await purchase(b[1]!, -0.5); // before the push

    const r4 = (x: number) => Math.round(x * 10_000) / 10_000;
    const H = holdout.length;
    const stat = (await stats(id)).ab_test;
    expect(stat.window_hours).toBe(24);
    expect(stat.holdout).toEqual({
      devices: H,
      app_opened: 1,
      app_open_rate: r4(1 / H),
      conversions: { purchase: 3 },
      conversion_rates: { purchase: r4(3 / H) },
    });
    const liftOf = (rate: number, base: number) => r4((rate - base) / base);
    expect(stat.variants[0]).toMatchObject({
      sent: a.length,
      app_opened: 1,
      app_open_rate: r4(1 / a.length),
      conversions: { purchase: 1 },
      lift: { app_opens: liftOf(1 / a.length, 1 / H), conversions: { purchase: liftOf(1 / a.length, 3 / H) } },
    });
    expect(stat.variants[1]).toMatchObject({
      sent: b.length,
      app_opened: 2,
      app_open_rate: r4(2 / b.length),
      conversions: {},
      lift: { app_opens: liftOf(2 / b.length, 1 / H), conversions: { purchase: -1 } },
    });
    expect(stat.variants[1].conversions).toEqual({});
    // the holdout's events are its own: the notification's conversions are those of the pushes received
    expect((await stats(id)).event_conversions).toEqual({ purchase: 1 });
    await call('DELETE', `/v6/notifications/${id}`);
  });

  it('waits for a manual pick, refuses a wrong one, and sends the picked variant to the rest', async () => {
    const { id, buckets } = await create({ test_fraction: 0.6, winner: 'manual' }, 3);
    const testShare = [0, 1, 2].reduce((n, k) => n + (buckets.get(k)?.length ?? 0), 0);
    const rest = buckets.get(REST) ?? [];
    await waiting(id, testShare);
    // waits for ever: moving the clock a month on sends nothing more
    clock.set('2026-04-07T12:45:00Z');
    await sleep(300);
    expect(pushCount()).toBe(testShare);

    expect((await call('POST', `/v6/notifications/${id}/winner`, { variant: 3 })).json()).toEqual({ error: 'variant: must be 0 to 2' });
    expect((await call('POST', `/v6/notifications/${id}/winner`, { variant: -1 })).statusCode).toBe(400);
    expect((await call('POST', `/v6/notifications/${id}/winner`, { variant: 0 }, keys.read)).statusCode).toBe(403);
    const picked = await call('POST', `/v6/notifications/${id}/winner`, { variant: 2 });
    expect(picked.statusCode, picked.body).toBe(200);
    expect((await call('POST', `/v6/notifications/${id}/winner`, { variant: 1 })).json()).toEqual({
      error: 'notification: its winner was picked (variant 2); no winner can be picked',
    });
    // the pick is in the audit log, by the write key; the refused one is not
    const picks = (await call('GET', '/v6/audit?action=notification.winner_picked')).json().entries;
    expect(picks.map((e: { details: unknown; actor: { role: string } }) => [e.details, e.actor.role])).toEqual([
      [{ notification_id: id, variant: 2 }, 'write'],
    ]);
    await waitFor(`notification ${id} to finish`, async () => ((await read(id)).state === 'sent' ? true : null));
    const sent = shown();
    expect(pushCount()).toBe(testShare + rest.length);
    for (const d of rest) expect(sent.get(d.token)).toBe('Variant C');
    expect((await stats(id)).ab_test).toMatchObject({
      stage: 'rest',
      winner: 2,
      metric: 'manual',
      rest: { variant: 2, sent: rest.length },
    });
    const plain = await call('POST', '/v6/notifications', { notification: { to: '*', payload: { alert: 'plain' } } });
    expect((await call('POST', `/v6/notifications/${plain.json().id}/winner`, { variant: 0 })).json()).toEqual({
      error: 'notification: it is not an A/B test (it has no variants)',
    });
    await waitFor('the plain notification to finish', async () => ((await read(plain.json().id)).state === 'sent' ? true : null));
  });

  it('a pick before a scheduled test has started says so, and when it is due', async () => {
    const { id } = await create({ test_fraction: 0.5, winner: 'manual', send_at: '2026-03-07T15:00:00Z' } as Omit<AbTest, 'variants'>);
    const early = await call('POST', `/v6/notifications/${id}/winner`, { variant: 0 });
    expect(early.statusCode, early.body).toBe(409);
    expect(early.json()).toEqual({
      error: 'notification: its test share has not started (it is due at 2026-03-07T15:00:00.000Z); no winner can be picked',
    });
    expect((await read(id)).state).toBe('scheduled');
    await call('DELETE', `/v6/notifications/${id}`);
    expect(pushCount()).toBe(0);
  });

  it('canceled before the winner: the rest is sent nothing', async () => {
    const { id, buckets } = await create({ test_fraction: 0.3, winner: { metric: 'conversions:purchase', after: '30m' } });
    const testShare = (buckets.get(0)?.length ?? 0) + (buckets.get(1)?.length ?? 0);
    await waiting(id, testShare);
    expect((await call('DELETE', `/v6/notifications/${id}`)).statusCode).toBe(200);
    clock.set('2026-03-07T13:30:00Z');
    await sleep(400);
    expect(pushCount()).toBe(testShare);
    expect(await read(id)).toMatchObject({ state: 'canceled' });
    expect((await stats(id)).ab_test).toMatchObject({ stage: 'waiting', winner: null });
    expect((await call('POST', `/v6/notifications/${id}/winner`, { variant: 0 })).json()).toEqual({
      error: 'notification: it is canceled; no winner can be picked',
    });
  });

  it('keeps quiet hours for the rest: a winner picked inside them is held until they end', async () => {
    const quiet_hours = { start: '22:00', end: '08:00', then: 'hold' };
    const { id, buckets } = await create({ test_fraction: 0.4, winner: 'manual', quiet_hours } as Omit<AbTest, 'variants'>);
    const testShare = (buckets.get(0)?.length ?? 0) + (buckets.get(1)?.length ?? 0);
    const rest = buckets.get(REST) ?? [];
    // the test share's fan-out ends with its last zone's wave (the zones in their quiet hours at 12:45Z wait for them to end)
    clock.set('2026-03-07T23:00:00Z'); // the devices have no zone: the app's default, UTC, now inside its quiet hours
    await waiting(id, testShare);
    expect((await call('POST', `/v6/notifications/${id}/winner`, { variant: 0 })).statusCode).toBe(200);
    await sleep(400);
    expect(pushCount()).toBe(testShare);
    clock.set('2026-03-08T07:59:00Z');
    await sleep(300);
    expect(pushCount()).toBe(testShare);
    clock.set('2026-03-08T10:00:00Z'); // past the end of every zone's quiet hours
    await waitFor(`notification ${id} to finish`, async () => ((await read(id)).state === 'sent' ? true : null));
    expect(pushCount()).toBe(testShare + rest.length);
    for (const d of rest) expect(shown().get(d.token)).toBe('Variant A');
  });

  it("a local-time test keeps its skipped counts when its rest goes out inside a zone's quiet hours", async () => {
    // an app of its own: Tokyo (UTC+9) and UTC devices
    const app = await h.createApp('com.example.abtests.local');
    await setCredentials(h, app.app.id, gw);
    const tokyo: RegisteredDevice[] = [];
    const utc: RegisteredDevice[] = [];
    for (let i = 0; i < 6; i++)
      tokyo.push(await registerDevice(h, app.keys.sdk, { platform: i % 2 ? 'android' : 'ios', time_zone: 'Asia/Tokyo' }));
    for (let i = 0; i < 10; i++) utc.push(await registerDevice(h, app.keys.sdk, { platform: i % 2 ? 'android' : 'ios', time_zone: 'UTC' }));
    clock.set('2026-03-07T05:00:00Z'); // 14:00 in Tokyo: its 09:00 is past; 05:00 in UTC
    const variants = [{ payload: { alert: 'Variant A' } }, { payload: { alert: 'Variant B' } }];
    const quiet_hours = { start: '22:00', end: '08:00', then: 'drop' };
    const notification = {
      to: '*',
      variants,
      test_fraction: 0.5,
      winner: 'manual',
      send_at: '2026-03-07T09:00',
      local_time: true,
      quiet_hours,
    };
    const res = await call('POST', '/v6/notifications', { notification }, app.keys.write);
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().id as string;
    const bounds = abBounds({ variants, test_fraction: 0.5, winner: 'manual' });
    const inTest = (d: RegisteredDevice) => bucketOf(abPoint(id, d.id), bounds) >= 0;
    const [utcTest, utcRest] = [utc.filter(inTest), utc.filter((d) => !inTest(d))];
    expect(utcTest.length * utcRest.length).toBeGreaterThan(0);
    const readApp = async () => (await call('GET', `/v6/notifications/${id}`, undefined, app.keys.read)).json();

    const early = await call('POST', `/v6/notifications/${id}/winner`, { variant: 0 }, app.keys.write);
    expect(early.json().error).toMatch(/^notification: its test share has not started \(it is due at 2026-03-07T/);
    clock.set('2026-03-07T09:00:00Z'); // 09:00 in UTC: the test share's UTC devices
    await waitFor('the test share of UTC', async () => {
      const n = await readApp();
      return pushCount() === utcTest.length && n.pushes_succeeded === utcTest.length ? n : null;
    });
    // past the last zone's 09:00 (UTC-12's, at 21:00 UTC): the test waits for its winner
    clock.set('2026-03-07T21:30:00Z');
    await waitFor('the test to wait for its winner', async () => {
      const s = await call('GET', `/v6/stats/notifications/${id}/events`, undefined, app.keys.read);
      return s.json().ab_test?.stage === 'waiting' ? true : null;
    });
    // Tokyo's wall time had passed: all its devices are skipped, counted once by the test stage
    expect(await readApp()).toMatchObject({ skipped_past_local_time: tokyo.length, skipped_quiet_hours: 0 });

    // picked at 06:30 in Tokyo, inside its quiet hours (21:30 in UTC, outside them)
    expect((await call('POST', `/v6/notifications/${id}/winner`, { variant: 0 }, app.keys.write)).statusCode).toBe(200);
    await waitFor('the rest to be sent', async () => pushCount() === utc.length);
    await waitFor('its fan-out to be done', async () => {
      const n = await readApp();
      return n.pushes_succeeded === utc.length ? n : null;
    });
    // the rest's plan drops Tokyo (inside its quiet hours); its devices were counted skipped already, and only once
    expect(await readApp()).toMatchObject({ skipped_past_local_time: tokyo.length, skipped_quiet_hours: 0 });
    const sent = shown();
    for (const d of tokyo) expect(sent.has(d.token)).toBe(false);
    for (const d of utcRest) expect(sent.get(d.token)).toBe('Variant A');
    await call('DELETE', `/v6/notifications/${id}`, undefined, app.keys.write);
  });

  it('refuses a bad A/B request naming the field', async () => {
    const res = await call('POST', '/v6/notifications', {
      notification: { to: '*', variants: [{ payload: { alert: 'A' } }], test_fraction: 0.2, winner: 'manual' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'notification.variants: must hold at least 2 variants' });
  });
});
