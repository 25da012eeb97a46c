import { describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { AudiencesRepository } from '../../src/db/repositories/audiences.js';
import { MessagesRepository } from '../../src/db/repositories/messages.js';
import { PartitionsRepository } from '../../src/db/repositories/partitions.js';
import type { Message } from '../../src/db/schema.js';
import { useHarness } from '../helpers/harness.js';
import { insertMessage } from '../http/message-support.js';

const DAY_MS = 86_400_000;
const dayOf = (at: number) => new Date(at).toISOString().slice(0, 10);

/**
 * Which partitions a read of messages' stream rows visits (device_messages, by the day their message's retention
 * starts): the tables it scanned, from PostgreSQL's own counters of the transaction.
 */
describe('message reads by partition', () => {
  const h = useHarness();

  it("reads a message's impressions in its one day's partition of stream rows, not every day's", async () => {
    const { app } = await h.createApp();
    const audience = await new AudiencesRepository().upsertAllDevices(h.db.db, app.id);
    const { rows: devices } = await h.db.pool.query<{ id: string }>(
      `INSERT INTO devices (app_id, platform, token) SELECT $1::uuid, 'ios', 'tok-' || i || '-' || $1::text FROM generate_series(1, 2) i RETURNING id`,
      [app.id],
    );
    // ten days of stream rows, as the retention keeps them: a message published in each, in its devices' streams
    const now = Date.now();
    const partitions = new PartitionsRepository();
    const have = new Set((await partitions.list(h.db.db, 'device_messages')).map((p) => p.day));
    const messages = new MessagesRepository();
    const made: Message[] = [];
    for (let back = 9; back >= 0; back--) {
      const day = dayOf(now - back * DAY_MS);
      if (!have.has(day)) await h.db.db.transaction().execute((trx) => partitions.create(trx, 'device_messages', day));
      const message = await insertMessage(h.db.db, {
        appId: app.id,
        audienceId: audience.id,
        published: new Date(now - back * DAY_MS),
        resolved: true,
      });
      await messages.addToStreams(
        h.db.db,
        message.id,
        devices.map((d) => d.id),
      );
      made.push(message);
    }
    await h.db.pool.query(`UPDATE device_messages SET stream_impressions = 3 WHERE message_id = $1`, [made[4]!.id]);

    const scanned = await h.db.db.transaction().execute(async (trx) => {
      // the backend's counts not yet reported include its earlier statements': the read's are what it adds
      const scans = async () =>
        (
          await sql<{ name: string; scans: number }>`
            select relname as name, (seq_scan + coalesce(idx_scan, 0))::int as scans from pg_stat_xact_user_tables
            where relname like 'device\\_messages\\_%'`.execute(trx)
        ).rows;
      const before = new Map((await scans()).map((r) => [r.name, r.scans]));
      const totals = await messages.impressionTotals(trx, made[4]!);
      const partitions = (await scans()).filter((r) => r.scans > (before.get(r.name) ?? 0)).map((r) => r.name);
      return { totals, partitions };
    });
    expect(scanned).toEqual({
      totals: { stream: 6, full_screen: 0, in_app: 0 },
      partitions: [`device_messages_p${dayOf(now - 5 * DAY_MS).replaceAll('-', '')}`],
    });
  });
});
