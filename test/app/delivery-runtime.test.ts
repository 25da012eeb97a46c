import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { setCredentials, startGateways, waitFor, type Gateways } from '../helpers/gateways.js';

const DEVICES = 250;

/**
 * A process that serves the API and runs workers (ROLE=all) builds its delivery runtime once: the turns of its large
 * batches are one pool, whoever sends them. With DELIVERY_CONCURRENCY=1 and the one turn held, a broadcast's large
 * batch (its second page: 200 devices, more than a small audience) waits, while its small batches go out.
 */
describe("a process's delivery runtime", () => {
  let h: Harness;
  let gw: Gateways;
  let write: string;

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, env: { ...gw.env, DELIVERY_CONCURRENCY: '1', DELIVERY_BATCH_SIZE: '200' } });
    const created = await h.createApp();
    write = created.keys.write;
    await setCredentials(h, created.app.id, gw, { apns: true });
    await sql`
      insert into devices (app_id, platform, token)
      select ${created.app.id}::uuid, 'ios', encode(sha256(int4send(i)), 'hex') from generate_series(1, ${DEVICES}) as i`.execute(h.db.db);
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  it('has one pool of large-batch turns, shared by the delivery jobs', { timeout: 60_000 }, async () => {
    const held = await h.delivery.largeTurns.take();
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(write) },
      payload: { notification: { to: '*', payload: { alert: 'one pool' } } },
    });
    expect(res.statusCode).toBe(201);
    // the first page (20 devices) and the last (30) are small batches; the 200 between them wait for the turn
    await waitFor('the small batches', async () => gw.apns.pushes.length >= 50);
    await new Promise((r) => setTimeout(r, 1000));
    expect(gw.apns.pushes.length).toBe(50);
    held.done();
    await waitFor('the large batch', async () => gw.apns.pushes.length === DEVICES);
  });
});
