import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { jobSpecs } from '../../src/delivery/jobs.js';
import { JobQueues } from '../../src/delivery/queues.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { setCredentials, startGateways, waitFor, type Gateways } from '../helpers/gateways.js';
import { HmsMock } from '../mocks/hms-mock.js';

const HUAWEI = 900;
const IOS = 300;
const HMS_APP_ID = '10000002';

/**
 * A broadcast's Huawei batches are sent by its fan-out job, with the tokens read with each page, not by delivery
 * jobs: with the delivery queue paused every Huawei device gets its push once, over several pages, while the iOS
 * devices of the same pages wait for their jobs; resumed, they get theirs. The counters are the batches' as ever.
 */
describe("a broadcast's Huawei batches, sent by its fan-out", () => {
  let h: Harness;
  let gw: Gateways;
  let hms: HmsMock;
  let queues: JobQueues;
  let keys: { read: string; write: string };

  beforeAll(async () => {
    gw = await startGateways();
    hms = await HmsMock.start();
    hms.addApp(HMS_APP_ID, 'hms-secret');
    // batches of 100 and pages of 300: a page holds batches of both platforms
    h = await createHarness({
      workers: true,
      env: { ...gw.env, HMS_ORIGIN: hms.origin, HMS_TOKEN_URL: hms.tokenUrl, DELIVERY_BATCH_SIZE: '100', FANOUT_PAGE_SIZE: '300' },
    });
    queues = new JobQueues({ kind: 'postgres', databaseUrl: h.databaseUrl, prefix: h.queuePrefix }, jobSpecs({ deliveryAttempts: 1 }));
    const created = await h.createApp('com.example.hmsbroadcast');
    keys = created.keys;
    await setCredentials(h, created.app.id, gw);
    await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setHms(created.app.id, {
      hmsAppId: HMS_APP_ID,
      clientSecret: 'hms-secret',
    });
    // one device in four is iOS, spread over the id space as the Huawei ones are
    await sql`
      insert into devices (app_id, platform, token)
      select ${created.app.id}::uuid, case when i % 4 = 0 then 'ios' else 'huawei' end,
        case when i % 4 = 0 then encode(sha256(int4send(i)), 'hex') else 'IQAAAACy0' || md5(i::text) || md5((-i)::text) end
      from generate_series(1, ${HUAWEI + IOS}) as i`.execute(h.db.db);
  });
  afterAll(async () => {
    await queues?.close();
    await h?.close();
    await hms?.close();
    await gw?.close();
  });

  it('sends every Huawei device once without a delivery job; the other platforms go through the queue', { timeout: 60_000 }, async () => {
    await queues.queue('delivery').pause();
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      payload: { notification: { to: '*', payload: { alert: 'hello', title: 'pushd' } } },
    });
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().id as string;
    const read = async () =>
      (await h.server.inject({ method: 'GET', url: `/v6/notifications/${id}`, headers: { authorization: basic(keys.read) } })).json();

    await waitFor('every Huawei device pushed', async () => hms.delivered.length >= HUAWEI, 30_000, 50);
    const fanoutDone = async () =>
      (await h.db.db.selectFrom('notifications').select('fanout_done').where('id', '=', id).executeTakeFirstOrThrow()).fanout_done;
    await waitFor('the fan-out to end', fanoutDone, 20_000, 50);
    await new Promise((r) => setTimeout(r, 300));
    expect(hms.delivered).toHaveLength(HUAWEI);
    expect(new Set(hms.delivered).size).toBe(HUAWEI);
    // the fan-out's first page (iOS among it) went out from the fan-out too; the other iOS devices wait for their jobs
    const iosFirst = gw.apns.pushes.length;
    expect(iosFirst).toBeLessThan(IOS);
    // several requests of at most a batch each, several pages: sent while the fan-out paged
    expect(hms.requests.length).toBeGreaterThan(HUAWEI / 100);

    await queues.queue('delivery').resume();
    await waitFor('the broadcast to be sent', async () => ((await read()).state === 'sent' ? true : null), 30_000, 100);
    expect(gw.apns.pushes).toHaveLength(IOS);
    expect(new Set(gw.apns.pushes.map((p) => p.token)).size).toBe(IOS);
    expect(hms.delivered).toHaveLength(HUAWEI);
    expect(await read()).toMatchObject({ devices_targeted: HUAWEI + IOS, pushes_succeeded: HUAWEI + IOS, pushes_failed: 0 });
    // each Huawei device has its receipt, as a delivery job records it
    const receipts = await sql<{ n: number }>`select count(*)::int as n from device_pushes where notification_id = ${id}::uuid`.execute(
      h.db.db,
    );
    expect(receipts.rows[0]!.n).toBe(HUAWEI + IOS);
  });
});
