import { afterAll, describe, expect, it } from 'vitest';
import { redisUrl } from '../helpers/harness.js';
import { waitFor } from '../helpers/gateways.js';
import { broadcastWorld } from './broadcast-world.js';
import { Proc } from './proc.js';

const DEVICES = 200_000;
const UNICAST = 300;
const BUNDLE = 'com.example.scaleout';

/**
 * Two compiled worker processes on one Redis queue, an API process beside them: a broadcast to 200,000 devices
 * and a stream of one-device notifications sent meanwhile, sent by the API process itself as it sends the audiences
 * it cuts (half created in groups, half alone with an Idempotency-Key). Every device gets exactly what was sent to
 * it, and both workers took part. No faults are injected:
 * a push sent twice here is a bug, not a retry.
 */
describe.skipIf(!redisUrl())('scale-out: two workers on one queue', () => {
  const procs: Proc[] = [];
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const p of procs) await p.stop('SIGKILL');
    for (const c of cleanups.reverse()) await c();
  });

  it('delivers a 200k broadcast and 300 unicast notifications once each, with both workers sending', { timeout: 300_000 }, async () => {
    const { received, handle, keys, port, env: world } = await broadcastWorld(BUNDLE, DEVICES, cleanups);
    const devices = await handle.db.selectFrom('devices').select(['id', 'token']).orderBy('id').execute();
    const env = {
      ...world,
      // a clean unicast batch's attempt line is at debug; at debug the only other lines are the API's 2 a request
      LOG_LEVEL: 'debug',
    };
    const api = Proc.server({ ...env, ROLE: 'api', PORT: String(port), HOST: '127.0.0.1' });
    const workers = [Proc.server({ ...env, ROLE: 'worker' }), Proc.server({ ...env, ROLE: 'worker' })];
    procs.push(api, ...workers);
    await Promise.all([api.waitForLog('listening'), ...workers.map((w) => w.waitForLog('worker running'))]);

    const base = `http://127.0.0.1:${port}`;
    const post = async (to: unknown, idempotencyKey?: string) => {
      const res = await fetch(`${base}/v6/notifications`, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`:${keys.write}`).toString('base64')}`,
          'content-type': 'application/json',
          ...(idempotencyKey && { 'idempotency-key': idempotencyKey }),
        },
        body: JSON.stringify({ notification: { to, payload: { alert: 'scale-out' } } }),
      });
      expect(res.status).toBe(201);
      return ((await res.json()) as { id: string }).id;
    };
    const broadcast = await post('*');
    // the unicast stream, ten at a time, while the broadcast is being delivered
    const targets = devices.slice(0, UNICAST);
    let next = 0;
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (next < targets.length) {
          const k = next++;
          await post([{ name: 'device_id', criteria: [targets[k]!.id] }], k % 2 ? `unicast-${k}` : undefined);
        }
      }),
    );

    const expected = DEVICES + UNICAST;
    const total = () => [...received.values()].reduce((a, b) => a + b, 0);
    await waitFor(`${expected} pushes`, async () => total() >= expected, 240_000, 200);
    await waitFor(
      'the broadcast to be recorded as sent',
      async () =>
        (await handle.db.selectFrom('notifications').select('state').where('id', '=', broadcast).executeTakeFirst())?.state === 'sent',
      30_000,
    );
    await new Promise((r) => setTimeout(r, 1000)); // a push sent twice would arrive now

    const unicast = new Set(targets.map((d) => d.token!));
    const wrong = devices.filter((d) => received.get(d.token!) !== (unicast.has(d.token!) ? 2 : 1));
    if (wrong.length > 0)
      for (const w of workers)
        console.error(
          w.stdout
            .split('\n')
            .filter((l) => /"level":(40|50)|stalled|"retry":[1-9]|"attempt":[2-9]|re-enqueued/.test(l))
            .slice(0, 30)
            .join('\n'),
        );
    expect(
      wrong.length,
      `devices missed or pushed twice, e.g. ${JSON.stringify(wrong.slice(0, 3).map((d) => ({ id: d.id, unicast: unicast.has(d.token!), received: received.get(d.token!) ?? 0 })))}`,
    ).toBe(0);
    expect(total()).toBe(expected);

    // both workers sent batches: the queue shared the work
    const batchesBy = workers.map((w) => w.stdout.split('\n').filter((l) => l.includes('"batch attempt recorded"')).length);
    for (const n of batchesBy) expect(n).toBeGreaterThan(0);
    // the API sent every one it cut itself, those created alone with an Idempotency-Key too
    expect(api.stdout.split('\n').filter((l) => l.includes('"batch attempt recorded"') && l.includes('"job":"direct"'))).toHaveLength(
      UNICAST,
    );
    expect(batchesBy.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(DEVICES / 2000);
    // an operator at LOG_LEVEL info sees the broadcast's batches go out, and not a line per clean unicast
    const attempts = [api, ...workers].flatMap((p) => p.stdout.split('\n').filter((l) => l.includes('"batch attempt recorded"')));
    const ofBroadcast = attempts.filter((l) => l.includes(`"notificationId":"${broadcast}"`));
    expect(ofBroadcast.filter((l) => l.includes('"level":30')).length).toBeGreaterThan(0);
    const cleanUnicast = attempts.filter(
      (l) => !ofBroadcast.includes(l) && l.includes('"sent":1,"failed":0,"invalidated":0,"retry":0,"expired":0'),
    );
    expect(cleanUnicast.length).toBeGreaterThanOrEqual(UNICAST);
    expect(cleanUnicast.filter((l) => !l.includes('"level":20'))).toEqual([]);
  });
});
