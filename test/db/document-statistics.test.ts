import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { AudiencesRepository } from '../../src/db/repositories/audiences.js';
import { BatchesRepository } from '../../src/db/repositories/batches.js';
import { FIRST_GENERATION, NotificationsRepository } from '../../src/db/repositories/notifications.js';
import { audienceSpec } from '../../src/domain/audience-spec.js';
import { cutBatches } from '../../src/domain/batches.js';
import { useHarness } from '../helpers/harness.js';

/**
 * ANALYZE of the tables every notification writes skips their JSON documents and device lists, which no query
 * filters or joins on (its cost is mostly theirs), and still describes the columns queries do filter on.
 */
describe('statistics of the tables every notification writes', () => {
  const h = useHarness();

  it('leaves out the documents and device lists, and keeps the columns queries filter on', async () => {
    const { app } = await h.createApp();
    const devices = await h.db.db
      .insertInto('devices')
      .values(Array.from({ length: 20 }, (_, i) => ({ app_id: app.id, platform: i % 2 ? 'ios' : 'android', token: randomUUID() })))
      .returning(['id', 'platform', 'development'])
      .execute();
    const specs = devices.map((d) => ({ appId: app.id, ...audienceSpec([{ name: 'device_id', criteria: [d.id] }]) }));
    const rows = devices.map((d, k) => ({
      id: randomUUID(),
      appId: app.id,
      audienceId: null,
      audienceSpecKey: specs[k]!.key,
      request: { to: specs[k]!.canonical, payload: { alert: `hi ${k}` } },
      payload: { alert: `hi ${k}` },
      collapseKey: null,
      cut: { batches: 1, targeted: 1 },
    }));
    await new NotificationsRepository().insertCut(
      h.db.db,
      rows,
      new BatchesRepository().batchesInsert(
        rows.map((r, k) => ({
          notificationId: r.id,
          generation: FIRST_GENERATION,
          batches: cutBatches(
            r.id,
            FIRST_GENERATION,
            [devices[k] as { id: string; platform: 'ios' | 'android'; development: boolean }],
            0,
            500,
          ),
        })),
      ),
      new AudiencesRepository().specAudiences(specs),
    );
    await sql`analyze notifications, audiences, delivery_batches`.execute(h.db.db);
    const { rows: described } = await sql<{ column: string }>`
      select tablename || '.' || attname as column from pg_stats
      where schemaname = current_schema() and tablename in ('notifications', 'audiences', 'delivery_batches')`.execute(h.db.db);
    const columns = new Set(described.map((r) => r.column));
    for (const skipped of [
      'notifications.request',
      'notifications.payload',
      'notifications.local_plan',
      'audiences.filters',
      'delivery_batches.device_ids',
      'delivery_batches.pending_device_ids',
    ])
      expect({ skipped, described: columns.has(skipped) }).toEqual({ skipped, described: false });
    for (const kept of ['notifications.app_id', 'notifications.state', 'audiences.spec_key', 'delivery_batches.notification_id'])
      expect({ kept, described: columns.has(kept) }).toEqual({ kept, described: true });
  });
});
