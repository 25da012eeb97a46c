import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/platform/logger.js';
import { RedisTokenBuckets } from '../../src/platform/token-bucket.js';
import { basic, createHarness, redisUrl, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { startRedisCluster, withNode, type RedisCluster } from '../engines/redis-cluster.js';

/**
 * pushd on a Redis Cluster of three masters (REDIS_CLUSTER, a queue prefix in braces), reached through a node
 * that does not hold the prefix's slot, so every queue command is redirected: notifications are delivered once
 * each, the queues' keys all live in the hash tag's slot, and the rate limits' buckets are kept there too.
 */
describe.skipIf(!redisUrl())('on a Redis Cluster', () => {
  let cluster: RedisCluster;
  let h: Harness;
  let gw: Gateways;
  let write: string;
  const devices: RegisteredDevice[] = [];
  const prefix = `{t${randomBytes(4).toString('hex')}}`;
  let owner: number;
  let seedUrl: string;

  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    owner = await cluster.ownerOf(prefix);
    seedUrl = `redis://127.0.0.1:${cluster.ports.find((p) => p !== owner)!}`;
    gw = await startGateways();
    h = await createHarness({
      queue: 'redis',
      workers: true,
      env: { ...gw.env, REDIS_URL: seedUrl, REDIS_CLUSTER: 'true', QUEUE_PREFIX: prefix },
    });
    const app = await h.createApp('com.example.cluster');
    write = app.keys.write;
    await setCredentials(h, app.app.id, gw);
    for (let i = 0; i < 6; i++) devices.push(await registerDevice(h, app.keys.sdk, { platform: i % 2 ? 'ios' : 'android' }));
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await gw?.close();
    await cluster?.stop();
  });

  const post = (to: unknown, alert: string) =>
    h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(write) },
      payload: { notification: { to, payload: { alert } } },
    });

  it('is reached through a node that does not hold the queues: a plain client there is told MOVED', async () => {
    await expect(withNode(Number(new URL(seedUrl).port), (r) => r.set(`${prefix}:probe`, '1'))).rejects.toThrow(/MOVED/);
    const ready = await h.server.inject({ method: 'GET', url: '/ready' });
    expect(ready.statusCode, ready.body).toBe(200);
  });

  it('delivers a broadcast and one-device notifications once each, every queue key in the hash tag slot', async () => {
    const answers = await Promise.all([
      post('*', 'everyone'),
      ...devices.map((d, i) => post([{ name: 'device_id', criteria: [d.id] }], `device ${i}`)),
    ]);
    for (const a of answers) expect(a.statusCode, a.body).toBe(201);
    const expected = devices.length * 2;
    await waitFor('every push', async () => gw.apns.pushes.length + gw.fcm.pushes.length >= expected);
    await new Promise((r) => setTimeout(r, 500)); // a push sent twice would arrive now
    const tokens = [...gw.apns.pushes, ...gw.fcm.pushes].map((p) => p.token).sort();
    expect(tokens).toEqual(devices.flatMap((d) => [d.token, d.token]).sort());

    const keysOn = (port: number) => withNode(port, (r) => r.keys(`*${prefix}*`));
    expect((await keysOn(owner)).length).toBeGreaterThan(0);
    for (const port of cluster.ports.filter((p) => p !== owner)) expect(await keysOn(port)).toEqual([]);
  });

  it('keeps the rate limits in the cluster: a bucket of two runs dry on the third request', async () => {
    const buckets = new RedisTokenBuckets({ url: seedUrl, cluster: true }, prefix, createLogger('silent'));
    try {
      const limit = { perSecond: 0.1, burst: 2 };
      const stored = (bucket: string) => withNode(owner, (r) => r.exists(`${prefix}:ratelimit:${bucket}`));
      await buckets.ready(10_000);
      expect(await buckets.take('warm-up', limit)).toEqual({ allowed: true, retryAfterMs: 0 });
      expect(await stored('warm-up')).toBe(1);
      const taken = [];
      for (let i = 0; i < 3; i++) taken.push((await buckets.take('cluster-key', limit)).allowed);
      expect(taken).toEqual([true, true, false]);
      expect(await stored('cluster-key')).toBe(1);
    } finally {
      await buckets.close();
    }
  });
});
