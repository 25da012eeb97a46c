import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobSpecs, type JobTypes } from '../../src/delivery/jobs.js';
import { JobQueues, type QueueConnection } from '../../src/delivery/queues.js';
import { waitFor } from '../helpers/gateways.js';
import { createHarness, redisUrl, type Harness } from '../helpers/harness.js';

const BULK = 20;

/**
 * A fan-out's delivery jobs (`bulk`) go behind the other sends of their partition: one-device notifications queued
 * after a broadcast's batches run first, on either backend, and the broadcast's keep their order.
 */
describe.each(['redis', 'postgres'] as const)("delivery jobs on %s: a fan-out's after the others", (kind) => {
  let h: Harness | undefined;
  let queues: JobQueues;

  beforeAll(async () => {
    let conn: QueueConnection;
    if (kind === 'redis') conn = { kind, redisUrl: redisUrl()!, databaseUrl: '', prefix: `{prio${randomBytes(4).toString('hex')}}` };
    else {
      h = await createHarness();
      conn = { kind, databaseUrl: h.databaseUrl, prefix: h.queuePrefix };
    }
    queues = new JobQueues(conn, jobSpecs({ deliveryAttempts: 1 }));
  });
  afterAll(async () => {
    await queues?.close();
    await h?.close();
  });

  it.skipIf(kind === 'redis' && !redisUrl())('runs the one-device sends queued after a broadcast before its batches', async () => {
    const broadcast = randomUUID();
    const bulk = Array.from({ length: BULK }, (_, i): JobTypes['delivery'] => ({
      batches: [{ notificationId: broadcast, batchId: `${broadcast}-g1-b${i}` }],
      bulk: true,
    }));
    const single = Array.from({ length: 3 }, (): JobTypes['delivery'] => {
      const id = randomUUID();
      return { batches: [{ notificationId: id, batchId: `${id}-g1-b0` }] };
    });
    for (const data of bulk) await queues.add('delivery', data);
    for (const data of single) await queues.add('delivery', data);

    const ran: string[] = [];
    queues.startWorkers(
      'delivery',
      async (job) => {
        ran.push(job.data.batches[0]!.batchId);
      },
      { concurrency: 1 },
    );
    await waitFor('every job', async () => ran.length >= BULK + single.length, 20_000);
    const ids = (list: JobTypes['delivery'][]) => list.map((d) => d.batches[0]!.batchId);
    expect(ran).toEqual([...ids(single), ...ids(bulk)]);
  });
});
