import { afterAll, describe, expect, it } from 'vitest';
import { AudiencesRepository } from '../../src/db/repositories/audiences.js';
import { DeliveryRepository } from '../../src/db/repositories/delivery.js';
import { IdempotencyRepository } from '../../src/db/repositories/idempotency.js';
import { NotificationsRepository } from '../../src/db/repositories/notifications.js';
import { createLogger } from '../../src/platform/logger.js';
import { jobSpecs } from '../../src/queue/jobs.js';
import { JobQueues } from '../../src/queue/queues.js';
import { startSweeper } from '../../src/queue/sweeper.js';
import { useHarness } from '../helpers/harness.js';

describe('the sweeper', () => {
  // No workers: a job added here stays waiting in the queue, as behind a long backlog.
  const h = useHarness();
  let queues: JobQueues | undefined;
  afterAll(async () => queues?.close());
  const queuesOfHarness = () =>
    (queues ??= new JobQueues({ kind: 'postgres', databaseUrl: h.databaseUrl, prefix: h.queuePrefix }, jobSpecs({ deliveryAttempts: 1 })));

  /** Lets a sweeper sweep every second for 2.5 seconds: two or three sweeps. */
  async function sweepAWhile(scheduled: string[] = []) {
    const sweeper = startSweeper({
      db: h.db.db,
      log: createLogger('silent'),
      delivery: new DeliveryRepository(),
      idempotency: new IdempotencyRepository(),
      queues: queuesOfHarness(),
      scheduler: { schedule: async (id) => void scheduled.push(id), deliver: async () => undefined },
      afterSeconds: 2, // sweeps every second
    });
    try {
      await new Promise((r) => setTimeout(r, 2500));
    } finally {
      sweeper.stop();
    }
  }

  it('re-enqueues a stalled notification that has no job, and leaves one whose job is waiting in the queue', async () => {
    const queues = queuesOfHarness();
    const { app } = await h.createApp();
    const audience = await new AudiencesRepository().upsertAllDevices(h.db.db, app.id);
    const insert = () =>
      new NotificationsRepository().insertOrCollapse(h.db.db, {
        appId: app.id,
        audienceId: audience.id,
        request: { to: '*', payload: { alert: 'x' } },
        payload: { alert: 'x' },
        collapseKey: null,
      });
    const waiting = await insert();
    const lost = await insert();
    await queues.add('fanout', { notificationId: waiting.id, generation: waiting.generation });
    await h.db.db
      .updateTable('notifications')
      .set({ updated_at: new Date(Date.now() - 60_000) })
      .where('id', 'in', [waiting.id, lost.id])
      .execute();

    const scheduled: string[] = [];
    await sweepAWhile(scheduled);
    // once: the sweep touches what it re-enqueued, so the next sweeps leave it alone for a while
    expect(scheduled).toEqual([lost.id]);
  });

  it('purges idempotency keys older than 24 hours and keeps the others', async () => {
    const { app } = await h.createApp();
    const row = (key: string, hoursAgo: number) => ({
      app_id: app.id,
      key,
      request_hash: Buffer.alloc(32),
      status: 201,
      body: '{}',
      created_at: new Date(Date.now() - hoursAgo * 3_600_000),
    });
    await h.db.db
      .insertInto('idempotency_keys')
      .values([row('old', 25), row('older', 48), row('fresh', 23)])
      .execute();
    await sweepAWhile();
    const left = await h.db.db.selectFrom('idempotency_keys').select('key').where('app_id', '=', app.id).execute();
    expect(left).toEqual([{ key: 'fresh' }]);
  });
});
