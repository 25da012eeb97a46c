import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createRepositories } from '../../src/services/deps.js';
import { FIRST_GENERATION, NotificationsRepository } from '../../src/db/repositories/notifications.js';
import { cutBatches } from '../../src/domain/batches.js';
import { useHarness } from '../helpers/harness.js';

/**
 * A fan-out page is saved only from the checkpoint its run read: two runs of one fan-out (a job handed to another
 * worker while the first still ran) cannot both save the same page and go on sending the rest twice.
 */
describe('fan-out checkpoints', () => {
  const h = useHarness();
  const notifications = new NotificationsRepository();
  const repos = createRepositories();

  it('saves a page once from one checkpoint; the run that read an older one is told to stop', async () => {
    const { app } = await h.createApp();
    const db = h.db.db;
    const devices = await db
      .insertInto('devices')
      .values(Array.from({ length: 4 }, () => ({ app_id: app.id, platform: 'ios', token: randomUUID().replace(/-/g, '') })))
      .returning(['id', 'platform', 'development'])
      .execute();
    const n = await notifications.insertOrCollapse(db, {
      appId: app.id,
      audienceId: null,
      request: { payload: { alert: 'x' } },
      payload: { alert: 'x' },
      collapseKey: null,
    });
    const routed = devices.map((d) => ({ ...d, platform: 'ios' as const }));
    const page = (from: number, ids: typeof routed) => {
      const batches = cutBatches(n.id, FIRST_GENERATION, ids, from, 2);
      const checkpoint = { cursor: ids[ids.length - 1]!.id, nextSeq: from + batches.length, targeted: ids.length, notAllowed: 0 };
      return [batches, checkpoint] as const;
    };
    // both runs read the checkpoint at seq 0 and cut the same first page
    const [first, firstCheckpoint] = page(0, routed.slice(0, 2));
    expect(await repos.fanout.saveFanoutPage(db, n.id, FIRST_GENERATION, first, firstCheckpoint)).toBe(true);
    expect(await repos.fanout.saveFanoutPage(db, n.id, FIRST_GENERATION, first, firstCheckpoint)).toBe(false);
    // the run that saved goes on from its own checkpoint
    const [second, secondCheckpoint] = page(1, routed.slice(2));
    expect(await repos.fanout.saveFanoutPage(db, n.id, FIRST_GENERATION, second, secondCheckpoint)).toBe(true);
    const stored = await db
      .selectFrom('notifications')
      .select(['fanout_seq', 'devices_targeted'])
      .where('id', '=', n.id)
      .executeTakeFirstOrThrow();
    expect(stored).toEqual({ fanout_seq: 2, devices_targeted: 4 });
    const batches = await db.selectFrom('delivery_batches').select('seq').where('notification_id', '=', n.id).orderBy('seq').execute();
    expect(batches.map((b) => b.seq)).toEqual([0, 1]);
  });
});
