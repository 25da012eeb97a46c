import net from 'node:net';
import pg from 'pg';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createHarness, metricsAuth, TEST_METRICS_TOKEN, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { randomApnsToken } from '../mocks/index.js';

/**
 * Admission control bounded in time (MAX_QUEUE_DELAY_MS), on a real listening server. The test holds the unicast
 * group's turn (the devices table locked under its read): a request waiting for the turn is answered 503 with
 * Retry-After when its bound comes, and while the turn is held past the bound every new API request is answered so
 * on arrival. What was accepted is created and pushed once the turn is free; what was refused created nothing.
 */
describe('admission control bounded in time', () => {
  const BOUND_MS = 1000;
  let h: Harness;
  let gw: Gateways;
  let base: string;
  let keys: { write: string; sdk: string };
  let appId: string;
  let device: RegisteredDevice;

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ env: { ...gw.env, MAX_QUEUE_DELAY_MS: String(BOUND_MS), METRICS_TOKEN: TEST_METRICS_TOKEN } });
    const created = await h.createApp('com.example.admission');
    keys = created.keys;
    appId = created.app.id;
    await setCredentials(h, appId, gw);
    device = await registerDevice(h, keys.sdk, { platform: 'ios' });
    await h.server.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(h.server.server.address() as net.AddressInfo).port}`;
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  const call = (path: string, key: string, body: unknown) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: basic(key), 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const post = (alert: string) =>
    call('/v6/notifications', keys.write, { notification: { to: [{ name: 'device_id', criteria: [device.id] }], payload: { alert } } });
  /** the answer with the ms it took */
  const timed = async (answer: Promise<Response>) => {
    const t0 = performance.now();
    const res = await answer;
    return { res, ms: performance.now() - t0, body: await res.json() };
  };
  const notifications = async () =>
    Number((await sql<{ n: string }>`select count(*) as n from notifications where app_id = ${appId}::uuid`.execute(h.db.db)).rows[0]!.n);
  const refusal = { error: `overloaded: work waits more than ${BOUND_MS} ms on this server; retry after 1 s` };

  it('answers 503 with Retry-After at the bound, then at once on arrival, and loses nothing it accepted', async () => {
    const locker = new pg.Client({ connectionString: h.databaseUrl });
    await locker.connect();
    let first: Promise<Response> | undefined;
    try {
      await locker.query('begin');
      await locker.query('lock table devices in access exclusive mode');
      // the first takes the turn: its group's read of the devices waits for the lock
      first = post('first');
      await waitFor('the group waiting for the lock', async () => {
        const { rows } = await sql<{ n: number }>`
          select count(*)::int as n from pg_locks where not granted and relation = 'devices'::regclass`.execute(h.db.db);
        return rows[0]!.n > 0;
      });
      // the second waits for the turn, and is refused when its bound comes, not when the turn is free
      const late = await timed(post('second'));
      expect(late.res.status).toBe(503);
      expect(late.res.headers.get('retry-after')).toBe('1');
      expect(late.body).toEqual(refusal);
      expect(late.ms).toBeGreaterThanOrEqual(BOUND_MS - 50);
      expect(late.ms).toBeLessThan(BOUND_MS + 1500);

      // the turn has been held past the bound: any API request is refused on arrival
      const atOnce = await Promise.all([
        timed(post('third')),
        timed(
          call('/v6/transactional/notifications', keys.write, {
            to: { field: 'device_id', value: device.id },
            group: 'g',
            notification: { payload: { alert: 'x' } },
          }),
        ),
        timed(call('/v6/devices', keys.sdk, { device: { platform: 'ios', token: randomApnsToken() } })),
      ]);
      for (const { res, ms, body } of atOnce) {
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).toBe('1');
        expect(body).toEqual(refusal);
        expect(ms).toBeLessThan(BOUND_MS / 2);
      }
      // health and readiness are not API requests
      expect((await fetch(`${base}/health`)).status).toBe(200);
      const scraped = await (await fetch(`${base}/metrics`, { headers: metricsAuth })).text();
      expect(scraped).toMatch(/^pushd_http_requests_shed_total 3$/m);
      // refused for time, not for the CPU: every request was in the share
      expect(scraped).toMatch(/^pushd_admission_share 1$/m);
    } finally {
      await locker.query('rollback');
      await locker.end();
    }
    // the accepted one was only slow: created and pushed; the refused ones created nothing
    expect((await first!).status).toBe(201);
    await waitFor('the accepted push', async () => gw.apns.pushes.length === 1);
    expect(gw.apns.pushes.map((p) => (p.payload.aps as { alert?: unknown }).alert)).toEqual(['first']);
    expect(await notifications()).toBe(1);
    // once the turn is free, requests are taken again at once
    expect((await post('after')).status).toBe(201);
  });
});
