import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { waitFor } from '../helpers/gateways.js';
import { HmsMock } from '../mocks/hms-mock.js';

const HUAWEI = 900;
const HMS_APP_ID = '10000003';
const HMS_LATENCY_MS = 400;

/**
 * A broadcast's Huawei batches wait for their turn in the fan-out (one large batch at a time here, the gateway
 * 400 ms away). A cancel while they wait stops them: each batch that waited checks its notification before it
 * goes, as a delivery job's large batch does, and is closed unsent. Only the batches already at the gateway go out.
 */
describe("a cancel while a broadcast's Huawei batches wait for their turn", () => {
  let h: Harness;
  let hms: HmsMock;
  let keys: { read: string; write: string };

  beforeAll(async () => {
    hms = await HmsMock.start();
    hms.addApp(HMS_APP_ID, 'hms-secret');
    hms.faults.next(100, { type: 'delay', ms: HMS_LATENCY_MS });
    // batches of 20, one large batch sent at a time: a first page of 1 batch, then one of 10 (200 devices)
    h = await createHarness({
      workers: true,
      env: { HMS_ORIGIN: hms.origin, HMS_TOKEN_URL: hms.tokenUrl, DELIVERY_BATCH_SIZE: '20', DELIVERY_CONCURRENCY: '1' },
    });
    const created = await h.createApp('com.example.hmscancel');
    keys = created.keys;
    await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setHms(created.app.id, {
      hmsAppId: HMS_APP_ID,
      clientSecret: 'hms-secret',
    });
    await sql`
      insert into devices (app_id, platform, token)
      select ${created.app.id}::uuid, 'huawei', 'IQAAAACy0' || md5(i::text) || md5((-i)::text)
      from generate_series(1, ${HUAWEI}) as i`.execute(h.db.db);
  });
  afterAll(async () => {
    await h?.close();
    await hms?.close();
  });

  it('sends only the batches at the gateway when it came; the waiting ones are closed canceled', { timeout: 60_000 }, async () => {
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      payload: { notification: { to: '*', payload: { alert: 'hello', title: 'pushd' } } },
    });
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().id as string;
    // the first page's batch is at the gateway and the next page's 10 batches are stored behind it (on a loaded
    // machine the cancel could otherwise come before the second page is stored, and there would be nothing waiting)
    const stored = async () =>
      (await sql<{ n: number }>`select count(*)::int as n from delivery_batches where notification_id = ${id}::uuid`.execute(h.db.db))
        .rows[0]!.n;
    await waitFor(
      'the first batch sent, the second page stored',
      async () => hms.requests.length >= 1 && (await stored()) >= 11,
      20_000,
      10,
    );
    const canceled = await h.server.inject({
      method: 'DELETE',
      url: `/v6/notifications/${id}`,
      headers: { authorization: basic(keys.write) },
    });
    expect(canceled.statusCode, canceled.body).toBe(200);

    const states = async () =>
      (
        await sql<{ state: string; n: number }>`
          select state, count(*)::int as n from delivery_batches where notification_id = ${id}::uuid group by state`.execute(h.db.db)
      ).rows;
    // every batch stored ends done or canceled; none is left pending
    await waitFor('no batch pending', async () => ((await states()).some((s) => s.state === 'pending') ? null : true), 20_000, 100);
    await new Promise((r) => setTimeout(r, 2 * HMS_LATENCY_MS));
    const byState = Object.fromEntries((await states()).map((s) => [s.state, s.n]));
    // without the check the second page's 10 batches all go out; with it the two at the gateway and at most one
    // that got its turn while the cancel committed
    expect(hms.requests.length).toBeLessThanOrEqual(3);
    expect(hms.delivered.length).toBeLessThanOrEqual(60);
    expect(byState.done).toBe(hms.requests.length);
    expect(byState.canceled).toBe(11 - hms.requests.length);
    expect(new Set(hms.delivered).size).toBe(hms.delivered.length);
    const n = (
      await h.server.inject({ method: 'GET', url: `/v6/notifications/${id}`, headers: { authorization: basic(keys.read) } })
    ).json();
    expect(n.state).toBe('canceled');
    expect(n.pushes_succeeded).toBe(hms.delivered.length);
  });
});
