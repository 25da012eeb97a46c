import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { abBounds, abPoint, bucketOf, REST } from '../../src/domain/ab-test.js';
import { jobSpecs } from '../../src/delivery/jobs.js';
import { JobQueues } from '../../src/delivery/queues.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { basic, createHarness, ManualClock, type Harness } from '../helpers/harness.js';

/**
 * An A/B test whose test-share batch lost its delivery job while the test waits for its winner (a manual pick, which
 * nobody may make for days): the sweeper sends that batch again, before the winner, and the rest still waits.
 */
describe('an A/B test share whose job was lost', () => {
  const clock = new ManualClock(new Date('2026-03-07T12:45:00Z'));
  let h: Harness;
  let gw: Gateways;
  let queues: JobQueues;
  let keys: { read: string; write: string; sdk: string };
  let devices: RegisteredDevice[];

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({
      workers: true,
      clock,
      // the sweeper looks every second at what made no progress for one
      env: { ...gw.env, SCHEDULE_POLL_MS: '20', SWEEP_AFTER_SECONDS: '1' },
    });
    const created = await h.createApp('com.example.abrecovery');
    keys = created.keys;
    await setCredentials(h, created.app.id, gw);
    devices = [];
    for (let i = 0; i < 24; i++) devices.push(await registerDevice(h, keys.sdk, { platform: i % 2 ? 'android' : 'ios' }));
    queues = new JobQueues({ kind: 'postgres', databaseUrl: h.databaseUrl, prefix: h.queuePrefix }, jobSpecs({ deliveryAttempts: 1 }));
  });
  afterAll(async () => {
    await queues?.close();
    await h?.close();
    await gw?.close();
  });

  const call = (method: 'GET' | 'POST', url: string, payload?: unknown, key = keys.write) =>
    h.server.inject({ method, url, headers: { authorization: basic(key) }, payload: payload as Record<string, unknown> });
  const stats = async (id: string) => (await call('GET', `/v6/stats/notifications/${id}/events`, undefined, keys.read)).json();
  const alertsByToken = () => {
    const out = new Map<string, string[]>();
    const add = (token: string, alert: string) => out.set(token, [...(out.get(token) ?? []), alert]);
    for (const p of gw.apns.pushes) add(p.token, (p.payload as { aps: { alert: string } }).aps.alert);
    for (const p of gw.fcm.pushes) add(p.token, (p.message as { android: { notification: { body: string } } }).android.notification.body);
    return out;
  };
  const pendingBatches = (id: string) =>
    h.db.db
      .selectFrom('delivery_batches')
      .select([sql<string>`notification_id || '-g' || generation || '-b' || seq`.as('id'), 'job_id', 'device_ids'])
      .where('notification_id', '=', id)
      .where('state', '=', 'pending')
      .execute();

  it('sends the lost batch again while the test waits, and only the winner to the rest', async () => {
    // the first Android push is answered "retry in an hour": its batch's job waits in the queue (RETRY_MAX_MS, 5 min)
    gw.fcm.faults.next(1, { type: 'status', status: 429, reason: 'QUOTA_EXCEEDED', retryAfter: 3600 });
    const variants = [{ payload: { alert: 'Variant A' } }, { payload: { alert: 'Variant B' } }];
    const res = await call('POST', '/v6/notifications', { notification: { to: '*', variants, test_fraction: 0.6, winner: 'manual' } });
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().id as string;
    const bounds = abBounds({ variants, test_fraction: 0.6, winner: 'manual' });
    const bucket = (d: RegisteredDevice) => bucketOf(abPoint(id, d.id), bounds);
    const testShare = devices.filter((d) => bucket(d) >= 0);
    const rest = devices.filter((d) => bucket(d) === REST);
    expect(testShare.some((d) => d.platform === 'android') && rest.length > 0).toBe(true);

    // the test share out but the one batch, which waits for its retry; the test waits for its winner
    const [held] = await waitFor('the test to wait with one batch left to retry', async () => {
      const pending = await pendingBatches(id);
      const s = await stats(id);
      return s.ab_test.stage === 'waiting' && pending.length === 1 && gw.fcm.pushes.length + gw.apns.pushes.length > 0 ? pending : null;
    });
    const jobId = held!.job_id ?? held!.id;
    const job = await queues.queue('delivery').getJob(jobId);
    expect(job, 'the retry waits in the queue').toBeTruthy();
    // the queue loses it (a Redis restart without persistence, a job removed by hand)
    await job!.remove();
    expect(await queues.queue('delivery').getJob(jobId)).toBeFalsy();

    // re-sent by the sweeper: every device of the test share has its variant, once, and the test still waits
    await waitFor(
      'the lost batch to be sent again',
      async () => (await pendingBatches(id)).length === 0 && alertsByToken().size === testShare.length,
      15_000,
    );
    const sent = alertsByToken();
    for (const d of testShare) expect(sent.get(d.token)).toEqual([bucket(d) === 0 ? 'Variant A' : 'Variant B']);
    for (const d of held!.device_ids) expect(sent.has(devices.find((x) => x.id === d)!.token)).toBe(true);
    expect((await stats(id)).ab_test).toMatchObject({ stage: 'waiting', winner: null, rest: { sent: 0 } });

    // the winner picked: the rest gets it, each device once
    expect((await call('POST', `/v6/notifications/${id}/winner`, { variant: 1 })).statusCode).toBe(200);
    await waitFor('the rest to be sent', async () => alertsByToken().size === testShare.length + rest.length);
    const all = alertsByToken();
    for (const d of rest) expect(all.get(d.token)).toEqual(['Variant B']);
    expect([...all.values()].every((alerts) => alerts.length === 1)).toBe(true);
  });
});
