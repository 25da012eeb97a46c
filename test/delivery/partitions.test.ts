import { randomBytes, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { jobSpecs, partitionOf, type JobTypes } from '../../src/delivery/jobs.js';
import { JobQueues, partitionPrefix } from '../../src/delivery/queues.js';
import { waitFor } from '../helpers/gateways.js';
import { redisUrl } from '../helpers/harness.js';

const PARTITIONS = 3;

describe('partitionOf', () => {
  it('puts every job of a notification in one partition, and spreads notifications evenly', () => {
    const counts = [0, 0, 0];
    for (let i = 0; i < 3000; i++) {
      const id = randomUUID();
      const p = partitionOf(id, PARTITIONS);
      expect(partitionOf(id, PARTITIONS)).toBe(p);
      counts[p]! += 1;
    }
    for (const n of counts) expect(n).toBeGreaterThan(850);
    expect(partitionOf(randomUUID(), 1)).toBe(0);
  });

  it('names a partition inside the hash tag of a braced prefix, after a plain one; one partition keeps the prefix', () => {
    expect(partitionPrefix('{pushd}', 2, 3)).toBe('{pushd:2}');
    expect(partitionPrefix('pushd', 2, 3)).toBe('pushd:2');
    expect(partitionPrefix('{pushd}', 0, 1)).toBe('{pushd}');
  });
});

/** Notification ids whose jobs hash to two different partitions. */
function twoPartitions(): [string, string] {
  const first = randomUUID();
  for (;;) {
    const other = randomUUID();
    if (partitionOf(other, PARTITIONS) !== partitionOf(first, PARTITIONS)) return [first, other];
  }
}

describe.skipIf(!redisUrl())('partitioned queues on Redis', () => {
  const prefix = `{p${randomBytes(4).toString('hex')}}`;
  const queues = new JobQueues(
    { kind: 'redis', redisUrl: redisUrl()!, databaseUrl: '', prefix, partitions: PARTITIONS },
    jobSpecs({ deliveryAttempts: 1 }),
  );
  const redis = new Redis(redisUrl()!);
  afterAll(async () => {
    await queues.close();
    redis.disconnect();
  });

  it("adds a notification's jobs to its partition, and finds batches stored together in their first one's", async () => {
    const [first, other] = twoPartitions();
    const together: JobTypes['delivery'] = {
      batches: [
        { notificationId: first, batchId: `${first}-g1-b0` },
        { notificationId: other, batchId: `${other}-g1-b0` },
      ],
    };
    await queues.add('delivery', together);
    await queues.add('delivery', { batches: [{ notificationId: other, batchId: `${other}-g1-b1` }] });
    await queues.add('fanout', { notificationId: other, generation: 1 });

    const jobKey = (notificationId: string, name: string, jobId: string) =>
      `${partitionPrefix(prefix, partitionOf(notificationId, PARTITIONS), PARTITIONS)}:${name}:${jobId}`;
    expect(await redis.exists(jobKey(first, 'delivery', `${first}-g1-b0`))).toBe(1);
    expect(await redis.exists(jobKey(other, 'delivery', `${other}-g1-b1`))).toBe(1);
    expect(await redis.exists(jobKey(other, 'fanout', `${other}-g1`))).toBe(1);

    const found = await queues.batchesOf([`${first}-g1-b0`, `${other}-g1-b1`, `${other}-g1-b0`, 'no-such-job']);
    expect(Object.fromEntries(found)).toEqual({
      [`${first}-g1-b0`]: [`${first}-g1-b0`, `${other}-g1-b0`],
      [`${other}-g1-b1`]: [`${other}-g1-b1`],
    });
    expect(await queues.has('fanout', `${other}-g1`, other)).toBe(true);
    expect(await queues.has('fanout', `${first}-g1`, first)).toBe(false);
    expect((await queues.depth('delivery')).waiting).toBe(2);
  });

  it('runs the jobs of every partition, each once', async () => {
    const ran: string[] = [];
    queues.startWorkers(
      'fanout',
      async (job) => {
        ran.push(job.data.notificationId);
      },
      { concurrency: 2 },
    );
    const ids: string[] = Array.from({ length: 30 }, () => randomUUID());
    await Promise.all(ids.map((notificationId) => queues.add('fanout', { notificationId, generation: 2 })));
    expect(new Set(ids.map((id) => partitionOf(id, PARTITIONS))).size).toBe(PARTITIONS);
    await waitFor('every job', async () => ran.filter((id) => ids.includes(id)).length >= ids.length, 20_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(ran.filter((id) => ids.includes(id)).sort()).toEqual([...ids].sort());
  });
});
