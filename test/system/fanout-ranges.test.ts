import { afterAll, describe, expect, it } from 'vitest';
import { redisUrl } from '../helpers/harness.js';
import { waitFor } from '../helpers/gateways.js';
import { broadcastWorld } from './broadcast-world.js';
import { Proc } from './proc.js';

const DEVICES = 10_000;
const BUNDLE = 'com.example.ranges';

/**
 * One broadcast's fan-out shared by two compiled worker processes: split into ranges of the device id space
 * (FANOUT_RANGE_DEVICES), whose jobs each worker takes from the Redis queue (two partitions). Both fan out
 * ranges of the same notification, every device gets its push once, and the record counts them all.
 */
describe.skipIf(!redisUrl())('scale-out: one broadcast fanned out by two workers', () => {
  const procs: Proc[] = [];
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const p of procs) await p.stop('SIGKILL');
    for (const c of cleanups.reverse()) await c();
  });

  it('splits a 10k broadcast into ranges both workers fan out, each device pushed once', { timeout: 240_000 }, async () => {
    const { apns, fcm, received, handle, keys, port, env: world } = await broadcastWorld(BUNDLE, DEVICES, cleanups);
    // answers a little late, as a gateway away from here does: a range's job then lasts long enough for the other
    // worker to take the next
    for (const mock of [apns, fcm]) mock.faults.sometimes(1, { type: 'delay', ms: 20 });
    const tokens = (await handle.db.selectFrom('devices').select('token').execute()).map((d) => d.token!);
    const env = {
      ...world,
      QUEUE_PARTITIONS: '2',
      // about 20 ranges of 500 devices, each read in two pages, cut into batches of ~125 a platform (logged at info)
      FANOUT_RANGE_DEVICES: '500',
      FANOUT_PAGE_SIZE: '250',
      DELIVERY_BATCH_SIZE: '250',
    };
    const api = Proc.server({ ...env, ROLE: 'api', PORT: String(port), HOST: '127.0.0.1' });
    const workers = [Proc.server({ ...env, ROLE: 'worker' }), Proc.server({ ...env, ROLE: 'worker' })];
    procs.push(api, ...workers);
    await Promise.all([api.waitForLog('listening'), ...workers.map((w) => w.waitForLog('worker running'))]);

    const base = `http://127.0.0.1:${port}`;
    const authorization = (key: string) => `Basic ${Buffer.from(`:${key}`).toString('base64')}`;
    const res = await fetch(`${base}/v6/notifications`, {
      method: 'POST',
      headers: { authorization: authorization(keys.write), 'content-type': 'application/json' },
      body: JSON.stringify({ notification: { to: '*', payload: { alert: 'ranges' } } }),
    });
    expect(res.status).toBe(201);
    const { id } = (await res.json()) as { id: string };
    const read = async () =>
      (await (await fetch(`${base}/v6/notifications/${id}`, { headers: { authorization: authorization(keys.read) } })).json()) as Record<
        string,
        unknown
      >;
    const record = await waitFor('the broadcast to be sent', async () => ((await read()).state === 'sent' ? read() : null), 200_000, 200);
    await new Promise((r) => setTimeout(r, 1000)); // a push sent twice would arrive now

    const wrong = tokens.filter((t) => received.get(t) !== 1);
    expect(wrong.length, `devices missed or pushed twice, e.g. ${JSON.stringify(wrong.slice(0, 3))}`).toBe(0);
    expect([...received.values()].reduce((a, b) => a + b, 0)).toBe(DEVICES);
    expect(record).toMatchObject({ devices_targeted: DEVICES, pushes_succeeded: DEVICES, pushes_failed: 0 });

    // each worker fanned out ranges of this notification, and sent batches of it
    const linesOf = (w: Proc, msg: string) => w.stdout.split('\n').filter((l) => l.includes(msg) && l.includes(`"notificationId":"${id}"`));
    const rangesBy = workers.map((w) => linesOf(w, '"fan-out range done"').length);
    for (const n of rangesBy) expect(n).toBeGreaterThan(0);
    const ranges = await handle.db.selectFrom('fanout_ranges').select('range_no').where('notification_id', '=', id).execute();
    expect(rangesBy.reduce((a, b) => a + b, 0)).toBe(ranges.length);
    for (const w of workers) expect(linesOf(w, '"batch attempt recorded"').length).toBeGreaterThan(0);
  });
});
