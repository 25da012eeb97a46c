import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { basic, createHarness, ManualClock, type Harness } from '../helpers/harness.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { parseFrequencyCaps } from '../../src/domain/frequency-caps.js';

/**
 * Frequency caps end to end, API and workers on the mock gateways, on a clock the test moves: a device at one of
 * its app's caps is not sent to until its oldest push leaves the rolling window, and is counted; `cap: false` and transactional sends pass.
 */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const NOW = '2026-03-07T10:00:00Z';

describe('frequency caps', () => {
  const clock = new ManualClock(new Date(NOW));
  let h: Harness;
  let gw: Gateways;
  let appId: string;
  let keys: { read: string; write: string; sdk: string };
  const received: string[] = [];

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, clock, env: { ...gw.env, RATE_LIMIT_SDK_PER_SECOND: '0' } });
    const created = await h.createApp('com.example.caps');
    appId = created.app.id;
    keys = created.keys;
    await setCredentials(h, appId, gw);
    gw.apns.onAccept = gw.fcm.onAccept = (token) => received.push(token);
    await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setLimits(appId, {
      frequencyCaps: parseFrequencyCaps('3/day,2/hour'),
    });
    await sleep(300); // the servers' caches hear the change
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });
  beforeEach(() => {
    received.length = 0;
  });

  const post = (to: RegisteredDevice, extra: Record<string, unknown> = {}) =>
    h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      payload: { notification: { to: [{ name: 'device_id', criteria: [to.id] }], payload: { alert: 'capped?' }, ...extra } },
    });
  const read = async (id: string) =>
    (await h.server.inject({ method: 'GET', url: `/v6/notifications/${id}`, headers: { authorization: basic(keys.read) } })).json();
  const stats = async (id: string) =>
    (
      await h.server.inject({ method: 'GET', url: `/v6/stats/notifications/${id}/events`, headers: { authorization: basic(keys.read) } })
    ).json();
  const settled = (id: string) =>
    waitFor('notification finished', async () => ['sent', 'failed'].includes((await read(id)).state), 20_000).then(() => read(id));
  /** Sends one notification to the device and answers its record once finished. */
  const send = async (d: RegisteredDevice, extra: Record<string, unknown> = {}) => {
    const res = await post(d, extra);
    expect(res.statusCode, res.body).toBe(201);
    return settled(res.json().id);
  };
  const device = (tag: string) => registerDevice(h, keys.sdk, { platform: 'ios', tags: [tag] });

  it('sends to a device up to a cap over the last hour or day, then nothing until its oldest push leaves it', async () => {
    clock.set('2026-03-07T10:30:00Z');
    const d = await device('hourly');
    expect(await send(d)).toMatchObject({ pushes_succeeded: 1, pushes_capped: 0 });
    clock.set('2026-03-07T10:50:00Z');
    expect(await send(d)).toMatchObject({ pushes_succeeded: 1, pushes_capped: 0 });
    clock.set('2026-03-07T11:05:00Z'); // a new UTC hour, but both pushes are in the last hour
    const third = await send(d);
    expect(third).toMatchObject({ state: 'failed', pushes_succeeded: 0, pushes_capped: 1, failure_reason: 'frequency_capped' });
    expect(await stats(third.id)).toMatchObject({ pushes_succeeded: 0, pushes_capped: 1 });
    expect(received).toEqual([d.token, d.token]);

    clock.set('2026-03-07T11:29:59Z'); // the 10:30 push is still in the last hour
    expect(await send(d)).toMatchObject({ pushes_succeeded: 0, pushes_capped: 1 });
    clock.set('2026-03-07T11:30:00Z'); // it has left: the third of the day goes
    expect(await send(d)).toMatchObject({ pushes_succeeded: 1, pushes_capped: 0 });
    clock.set('2026-03-07T13:00:00Z'); // the last hour is empty, but the last day holds 3
    expect(await send(d)).toMatchObject({ pushes_succeeded: 0, pushes_capped: 1 });
    clock.set('2026-03-08T00:00:00Z'); // a new UTC day, the same 3 in the last 24 hours
    expect(await send(d)).toMatchObject({ pushes_succeeded: 0, pushes_capped: 1 });
    clock.set('2026-03-08T10:29:59Z');
    expect(await send(d)).toMatchObject({ pushes_succeeded: 0, pushes_capped: 1 });
    clock.set('2026-03-08T10:30:00Z'); // 10:30 yesterday has left the day
    expect(await send(d)).toMatchObject({ pushes_succeeded: 1, pushes_capped: 0 });
    expect(received).toEqual([d.token, d.token, d.token, d.token]);
  });

  it('counts other devices apart, and does not cap a notification that says "cap": false', async () => {
    clock.set('2026-03-09T10:00:00Z');
    const [d, other] = [await device('bypass'), await device('bypass')];
    await send(d);
    await send(d);
    expect(await send(d)).toMatchObject({ pushes_capped: 1 });
    expect(await send(other)).toMatchObject({ pushes_succeeded: 1, pushes_capped: 0 });
    expect(await send(d, { cap: false })).toMatchObject({ pushes_succeeded: 1, pushes_capped: 0 });
    expect((await post(d, { cap: 'no' })).json()).toEqual({ error: 'notification.cap: must be true or false' });
  });

  it('does not cap a transactional send unless it says "cap": true', async () => {
    clock.set('2026-03-10T10:00:00Z');
    const d = await device('transactional');
    await send(d);
    await send(d);
    const transactional = (extra: Record<string, unknown>) =>
      h.server.inject({
        method: 'POST',
        url: '/v6/transactional/notifications',
        headers: { authorization: basic(keys.write) },
        payload: { to: { field: 'device_id', value: d.id }, group: 'otp-codes', notification: { payload: { alert: 'otp' }, ...extra } },
      });
    const free = await transactional({});
    expect(free.statusCode, free.body).toBe(200);
    expect(free.json().results).toMatchObject({ success: 1 });
    const capped = await transactional({ cap: true });
    expect(capped.json().results).toMatchObject({
      success: 0,
      failures: [d.id],
      failure_reasons: [{ device_id: d.id, reason: 'at a frequency cap' }],
    });
    expect(received).toEqual([d.token, d.token, d.token]);
  });

  it('gives a device its last slot once when notifications race for it', async () => {
    clock.set('2026-03-11T10:00:00Z');
    const d = await device('race');
    await send(d); // one of the hour's two is used: one slot is left
    received.length = 0;
    const ids = (await Promise.all([post(d), post(d), post(d), post(d)])).map((r) => r.json().id as string);
    const records = await Promise.all(ids.map(settled));
    expect(records.map((r) => r.pushes_succeeded).reduce((a, b) => a + b)).toBe(1);
    expect(records.map((r) => r.pushes_capped).reduce((a, b) => a + b)).toBe(3);
    expect(received).toEqual([d.token]);
  });

  it('takes each slot once among many concurrent takers, over rolling windows (repository)', async () => {
    const devices = [await device('takers'), await device('takers')].map((d) => d.id);
    const repos = createRepositories();
    const caps = parseFrequencyCaps('5/day,3/hour')!;
    const take = (at: string, n: number) =>
      Promise.all(Array.from({ length: n }, () => repos.frequencyCaps.takeCapSlots(h.db.db, caps, devices, new Date(at))));
    const counted = (taken: Set<string>[]) => devices.map((id) => taken.filter((t) => t.has(id)).length);
    expect(counted(await take('2026-03-12T10:00:00Z', 12))).toEqual([3, 3]);
    // 10:59:59: the three are in the last hour; 11:00:00, they have left it, and the day's two remain
    expect(counted(await take('2026-03-12T10:59:59Z', 4))).toEqual([0, 0]);
    expect(counted(await take('2026-03-12T11:00:00Z', 6))).toEqual([2, 2]);
    expect(counted(await take('2026-03-13T09:59:59Z', 2))).toEqual([0, 0]);
    // the sweep forgets a device once its last push left the longest window (a day), not before
    const rows = async () =>
      Number((await h.db.pool.query('select count(*) from device_cap_sends where device_id = any($1::uuid[])', [devices])).rows[0].count);
    await repos.frequencyCaps.purgeCapSends(h.db.db, new Date('2026-03-13T10:59:59Z'), 1000);
    expect(await rows()).toBe(2);
    await repos.frequencyCaps.purgeCapSends(h.db.db, new Date('2026-03-13T11:00:00Z'), 1000);
    expect(await rows()).toBe(0);
    expect(counted(await take('2026-03-13T11:00:00Z', 4))).toEqual([3, 3]);
  });
});
