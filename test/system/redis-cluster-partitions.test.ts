import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/platform/logger.js';
import { RedisTokenBuckets } from '../../src/platform/token-bucket.js';
import { jobSpecs, partitionOf } from '../../src/delivery/jobs.js';
import { JobQueues, partitionPrefix } from '../../src/delivery/queues.js';
import { basic, createHarness, redisUrl, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { startRedisCluster, withNode, type RedisCluster } from '../engines/redis-cluster.js';

const PARTITIONS = 3;
/** The broadcast's devices: one batch each (DELIVERY_BATCH_SIZE=1), each push held this long by the gateway. */
const BROADCAST_DEVICES = 64;
const PUSH_MS = 300;

/**
 * pushd with QUEUE_PARTITIONS=3 on a Redis Cluster of three masters, the prefix picked so that each partition's
 * hash tag is held by another master (each with a replica): the queues' keys spread over the masters, every push
 * goes out once, a large broadcast holds back no other send (its batches' jobs come after the others of its partition), the rate-limit buckets
 * spread too, and a master that dies during a broadcast loses no push once its replica took over.
 */
describe.skipIf(!redisUrl())('partitioned queues on a Redis Cluster', () => {
  let cluster: RedisCluster;
  let h: Harness;
  let gw: Gateways;
  let prefix: string;
  /** the master holding each partition's hash tag */
  const owners: number[] = [];
  const apps: { write: string; sdk: string }[] = [];
  const broadcastDevices: RegisteredDevice[] = [];
  const unicastDevices: RegisteredDevice[] = [];

  beforeAll(async () => {
    cluster = await startRedisCluster(3, 1);
    // a deployment's prefix lands where its hash lands; the test takes one whose partitions have a master each
    for (;;) {
      prefix = `{t${randomBytes(4).toString('hex')}}`;
      owners.length = 0;
      for (let p = 0; p < PARTITIONS; p++) owners.push(await cluster.ownerOf(partitionPrefix(prefix, p, PARTITIONS)));
      if (new Set(owners).size === PARTITIONS) break;
    }
    gw = await startGateways();
    h = await createHarness({
      queue: 'redis',
      workers: true,
      env: {
        ...gw.env,
        REDIS_URL: `redis://127.0.0.1:${cluster.ports[0]}`,
        REDIS_CLUSTER: 'true',
        QUEUE_PREFIX: prefix,
        QUEUE_PARTITIONS: String(PARTITIONS),
        DELIVERY_BATCH_SIZE: '1',
        // 8 delivery jobs at once per partition
        DELIVERY_CONCURRENCY: '1',
        // what a master's death may lose is found again soon: a job's lock, a notification without progress
        JOB_LOCK_MS: '3000',
        SWEEP_AFTER_SECONDS: '5',
      },
    });
    for (const bundle of ['com.example.broadcaster', 'com.example.unicast']) {
      const app = await h.createApp(bundle);
      await setCredentials(h, app.app.id, gw);
      apps.push(app.keys);
    }
    for (let i = 0; i < BROADCAST_DEVICES; i++) broadcastDevices.push(await registerDevice(h, apps[0]!.sdk, { platform: 'ios' }));
    for (let i = 0; i < 24; i++) unicastDevices.push(await registerDevice(h, apps[1]!.sdk, { platform: i % 2 ? 'ios' : 'android' }));
    for (const d of broadcastDevices) gw.apns.faults.forToken(d.token, { type: 'delay', ms: PUSH_MS });
  }, 120_000);
  afterAll(async () => {
    await h?.close();
    await gw?.close();
    await cluster?.stop();
  });

  /** A notification through the queue: with an Idempotency-Key it is cut into its batches, then enqueued. */
  const post = async (write: string, to: unknown, alert: string) => {
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(write), 'idempotency-key': randomUUID() },
      payload: { notification: { to, payload: { alert } } },
    });
    expect(res.statusCode, res.body).toBe(201);
    return (res.json() as { id: string }).id;
  };
  const pushesOf = (alert: string) =>
    [
      ...gw.apns.pushes.map((p) => ({ token: p.token, content: p.payload })),
      ...gw.fcm.pushes.map((p) => ({ token: p.token, content: p.message })),
    ]
      .filter((p) => JSON.stringify(p.content).includes(`"${alert}"`))
      .map((p) => p.token);

  it("does not hold another app's sends behind a broadcast, even those in its partition; every push once", async () => {
    const started = Date.now();
    const broadcast = await post(apps[0]!.write, '*', 'broadcast');
    const broadcastPartition = partitionOf(broadcast, PARTITIONS);
    await waitFor('the broadcast to start', async () => pushesOf('broadcast').length > 0);
    const broadcastEnd = waitFor('the whole broadcast', async () => pushesOf('broadcast').length >= BROADCAST_DEVICES, 60_000, 10).then(
      () => Date.now() - started,
    );

    // one-device sends of the other app, one after the other, each timed from its answer to its push, until two
    // hashed to the broadcast's partition (24 sends all elsewhere: 1 in 17,000)
    const sends: { partition: number; ms: number; pushedAt: number; device: RegisteredDevice }[] = [];
    for (const [i, device] of unicastDevices.entries()) {
      const alert = `unicast ${i}`;
      const id = await post(apps[1]!.write, [{ name: 'device_id', criteria: [device.id] }], alert);
      const posted = Date.now();
      const send = { partition: partitionOf(id, PARTITIONS), ms: -1, pushedAt: 0, device };
      sends.push(send);
      await waitFor(`${alert} pushed`, async () => pushesOf(alert).length > 0, 60_000, 10);
      send.pushedAt = Date.now();
      send.ms = send.pushedAt - posted;
      if (sends.filter((s) => s.partition === broadcastPartition).length >= 2 && sends.length >= 6) break;
    }
    const broadcastMs = await broadcastEnd;
    await new Promise((r) => setTimeout(r, 500)); // a push sent twice would arrive now

    // one in the broadcast's partition was pushed while the broadcast's jobs were still there
    expect(sends.some((s) => s.partition === broadcastPartition && s.pushedAt < started + broadcastMs - PUSH_MS)).toBe(true);
    expect(sends.filter((s) => s.partition !== broadcastPartition).length).toBeGreaterThan(0);
    // 64 pushes of 300 ms, 8 at a time, take 2.4 s at least; a send does not wait for them, in its partition at most
    // for one of them to free its job's place
    expect(broadcastMs).toBeGreaterThan((BROADCAST_DEVICES / 8) * PUSH_MS);
    const timings = JSON.stringify({ broadcastMs, broadcastPartition, sends: sends.map((s) => [s.partition, s.ms]) });
    for (const s of sends) expect(s.ms, timings).toBeLessThan(broadcastMs / 4);

    expect(pushesOf('broadcast').sort()).toEqual(broadcastDevices.map((d) => d.token).sort());
    for (const [i, s] of sends.entries()) expect(pushesOf(`unicast ${i}`)).toEqual([s.device.token]);

    // Each partition's keys are on its own master, and the partitions this used are on more than one.
    const used = new Set([broadcastPartition, ...sends.map((s) => s.partition)]);
    const holding = new Set<number>();
    // replicas hold copies of their masters' keys
    const roles = await Promise.all(cluster.ports.map((port) => withNode(port, (r) => r.info('replication'))));
    const masters = cluster.ports.filter((_, i) => roles[i]!.includes('role:master'));
    expect(masters.sort()).toEqual([...owners].sort());
    for (let p = 0; p < PARTITIONS; p++) {
      const tag = partitionPrefix(prefix, p, PARTITIONS);
      for (const port of masters) {
        const keys = await withNode(port, (r) => r.keys(`${tag}:*`));
        if (port !== owners[p]) expect(keys).toEqual([]);
        else if (used.has(p)) expect(keys.length).toBeGreaterThan(0);
        if (keys.length) holding.add(port);
      }
    }
    expect(holding.size).toBeGreaterThan(1);
  }, 120_000);

  it('spreads the rate-limit buckets: each bucket is a hash tag of its own', async () => {
    const buckets = new RedisTokenBuckets({ url: `redis://127.0.0.1:${cluster.ports[0]}`, cluster: true }, prefix, createLogger('silent'), {
      spread: true,
    });
    try {
      await buckets.ready(10_000);
      const bare = prefix.slice(1, -1);
      const holders = new Set<number>();
      for (let i = 0; i < 12; i++) {
        const bucket = `key:${i}`;
        expect(await buckets.take(bucket, { perSecond: 1, burst: 5 })).toEqual({ allowed: true, retryAfterMs: 0 });
        const key = `${bare}:ratelimit:{${bucket}}`;
        const owner = await cluster.ownerOf(key);
        expect(await withNode(owner, (r) => r.exists(key))).toBe(1);
        holders.add(owner);
      }
      expect(holders.size).toBeGreaterThan(1);
    } finally {
      await buckets.close();
    }
  });

  it('finds the jobs of batches in every partition with one pipeline each, on the cluster', async () => {
    const queues = new JobQueues(
      {
        kind: 'redis',
        redisUrl: `redis://127.0.0.1:${cluster.ports[0]}`,
        redisCluster: true,
        databaseUrl: '',
        prefix,
        partitions: PARTITIONS,
      },
      jobSpecs({ deliveryAttempts: 1 }),
    );
    try {
      const ids = Array.from({ length: 12 }, () => randomUUID());
      await Promise.all(ids.map((id) => queues.add('delivery', { batches: [{ notificationId: id, batchId: `${id}-b` }] }, 60_000)));
      expect(new Set(ids.map((id) => partitionOf(id, PARTITIONS))).size).toBeGreaterThan(1);
      const found = await queues.batchesOf([...ids.map((id) => `${id}-b`), 'no-such-job']);
      expect(Object.fromEntries(found)).toEqual(Object.fromEntries(ids.map((id) => [`${id}-b`, [`${id}-b`]])));
    } finally {
      await queues.close();
    }
  });

  // last: it leaves the cluster with a master less
  it("loses no push when the master of a broadcast's partition dies during it and its replica takes over", async () => {
    const broadcast = await post(apps[0]!.write, '*', 'failover');
    const master = owners[partitionOf(broadcast, PARTITIONS)]!;
    await waitFor('the broadcast to be under way', async () => pushesOf('failover').length >= 8, 30_000, 10);
    await cluster.kill(master);
    await waitFor('every device', async () => new Set(pushesOf('failover')).size >= BROADCAST_DEVICES, 90_000, 100);
    await new Promise((r) => setTimeout(r, 1000));
    const tag = partitionPrefix(prefix, partitionOf(broadcast, PARTITIONS), PARTITIONS);
    expect(await cluster.ownerOf(tag)).not.toBe(master); // its replica, promoted
    const received = pushesOf('failover');
    expect([...new Set(received)].sort()).toEqual(broadcastDevices.map((d) => d.token).sort());
    // at least once: a batch in flight when the master died (8 at a time, one device each) may go again
    expect(received.length - BROADCAST_DEVICES).toBeLessThanOrEqual(8);
  }, 120_000);
});
