import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIRST_PAGE_DEVICES } from '../../src/delivery/fanout.js';
import { jobSpecs } from '../../src/delivery/jobs.js';
import { JobQueues } from '../../src/delivery/queues.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { setCredentials, startGateways, waitFor, type Gateways } from '../helpers/gateways.js';

const DEVICES = 500;
/** How late the mocks answer: the first page's pushes are still in flight when its fan-out ends. */
const GATEWAY_DELAY_MS = 600;

/**
 * A broadcast's first page is sent by its fan-out job as soon as it is stored, not by delivery jobs: with the
 * delivery queue paused, its pushes arrive and no others; resumed, the rest arrive. With the gateways slow, the
 * fan-out ends while the first page is still in flight, and must not enqueue its batches as left pending: a
 * delivery job would send them again.
 */
describe("a broadcast's first page, sent by its fan-out job", () => {
  let h: Harness;
  let gw: Gateways;
  let queues: JobQueues;
  let keys: { read: string; write: string };

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, env: gw.env });
    queues = new JobQueues({ kind: 'postgres', databaseUrl: h.databaseUrl, prefix: h.queuePrefix }, jobSpecs({ deliveryAttempts: 1 }));
    const created = await h.createApp('com.example.firstpage');
    keys = created.keys;
    await setCredentials(h, created.app.id, gw);
    await sql`
      insert into devices (app_id, platform, token)
      select ${created.app.id}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex')
      from generate_series(1, ${DEVICES}) as i`.execute(h.db.db);
  });
  afterAll(async () => {
    await queues?.close();
    await h?.close();
    await gw?.close();
  });

  const tokens = () => [...gw.apns.pushes.map((p) => p.token), ...gw.fcm.pushes.map((p) => p.token)];
  const broadcast = async (alert: string) => {
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      payload: { notification: { to: '*', payload: { alert } } },
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };
  /** Waits until the broadcast is sent, and a gateway delay more (a late duplicate comes that much after the rest). */
  const sent = async (id: string) => {
    const read = async () =>
      (await h.server.inject({ method: 'GET', url: `/v6/notifications/${id}`, headers: { authorization: basic(keys.read) } })).json();
    const record = await waitFor(
      'the broadcast to be sent',
      async () => ((await read()).state === 'sent' ? await read() : null),
      30_000,
      100,
    );
    await new Promise((r) => setTimeout(r, GATEWAY_DELAY_MS + 500));
    return record;
  };

  it('goes out with the delivery queue paused, and the rest once it resumes', { timeout: 60_000 }, async () => {
    gw.reset();
    for (const mock of [gw.apns, gw.fcm]) mock.faults.sometimes(1, { type: 'delay', ms: GATEWAY_DELAY_MS });
    await queues.queue('delivery').pause();
    const id = await broadcast('first page');

    await waitFor('the first page at the gateways', async () => tokens().length >= FIRST_PAGE_DEVICES, 20_000, 50);
    const fanoutDone = async () =>
      (await h.db.db.selectFrom('notifications').select('fanout_done').where('id', '=', id).executeTakeFirstOrThrow()).fanout_done;
    await waitFor('the fan-out to end', fanoutDone, 20_000, 50);
    // nothing else goes out while delivery jobs wait: a delivery job's batch would arrive a gateway delay later
    await new Promise((r) => setTimeout(r, GATEWAY_DELAY_MS + 500));
    expect(tokens()).toHaveLength(FIRST_PAGE_DEVICES);

    await queues.queue('delivery').resume();
    const record = await sent(id);
    expect(tokens()).toHaveLength(DEVICES);
    expect(new Set(tokens()).size).toBe(DEVICES);
    expect(record).toMatchObject({ devices_targeted: DEVICES, pushes_succeeded: DEVICES, pushes_failed: 0 });
  });

  it('is not sent again by a delivery job when the fan-out ends before its answers', { timeout: 60_000 }, async () => {
    gw.reset();
    for (const mock of [gw.apns, gw.fcm]) mock.faults.sometimes(1, { type: 'delay', ms: GATEWAY_DELAY_MS });
    const id = await broadcast('each once');
    const record = await sent(id);
    expect(tokens()).toHaveLength(DEVICES);
    expect(new Set(tokens()).size).toBe(DEVICES);
    expect(record).toMatchObject({ devices_targeted: DEVICES, pushes_succeeded: DEVICES, pushes_failed: 0 });
  });
});
