import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../../src/db/database.js';
import type { AttemptInput } from '../../src/db/repositories/batches.js';
import { NotificationPartitionsRepository, uuid7Floor } from '../../src/db/repositories/partitions.js';
import { createRepositories } from '../../src/services/deps.js';
import { DAY_MS, dayOf, seed, useDatabaseBefore } from './upgrade-support.js';

const BATCH_KEYS = '043_batch_keys.sql';

/**
 * Two notifications sending, their fan-out done at `batches` batches: one with an id of before migration 033 (random:
 * the default partition), then one of today; answers their ids in that order.
 */
async function sendingNotifications({ pool }: DatabaseHandle, appId: string, audienceId: string, batches: number): Promise<string[]> {
  const inserted = await pool.query<{ id: string }>(
    `INSERT INTO notifications (id, app_id, audience_id, request, payload, state, fanout_done, fanout_seq)
     VALUES ($1, $2, $3, '{}', '{"alert": "old"}', 'sending', true, $4), (pushd_uuid7(), $2, $3, '{}', '{"alert": "new"}', 'sending', true, $4)
     RETURNING id`,
    ['c0ffee00-1234-4abc-8def-0123456789ab', appId, audienceId, batches],
  );
  return inserted.rows.map((r) => r.id);
}

/**
 * Migration 043 on a database of the schema before it: batches stored with their id (of a notification of today, in
 * its day's partition, and of one from before migration 033, in the default one), one sent and one pending; upgraded,
 * the id is no longer stored nor indexed, each batch is found and answered by the same id, the pending one is
 * recorded, and a day the maintenance makes afterwards has the same indexes.
 */
describe('migration 043 on a database of the previous schema', () => {
  const before = useDatabaseBefore(BATCH_KEYS);

  it('keeps every batch, found by the same id through its key, and gives a new day the same layout', async () => {
    const { db, pool } = before.handle;
    const { app, devices, audience } = await seed(before.handle, 'com.example.upgrade43', 2);
    const ids = await sendingNotifications(before.handle, app.id, audience.id, 2);
    // of each: seq 0 sent to the first device, seq 1 pending for the second
    await pool.query(
      `INSERT INTO delivery_batches (id, notification_id, generation, seq, platform, development, device_ids, pending_device_ids, state, succeeded, attempts)
       SELECT n || '-g1-b' || s, n, 1, s, 'ios', false, ARRAY[d], CASE s WHEN 0 THEN '{}'::uuid[] ELSE ARRAY[d] END,
         CASE s WHEN 0 THEN 'done' ELSE 'pending' END, 1 - s, 1 - s
       FROM unnest($1::uuid[]) n, unnest($2::uuid[], ARRAY[0, 1]) AS x(d, s)`,
      [ids, devices],
    );

    await before.upgrade();

    const columns = await pool.query(
      `SELECT attname FROM pg_attribute WHERE attrelid = 'delivery_batches'::regclass AND attname = 'id' AND NOT attisdropped`,
    );
    expect(columns.rows).toEqual([]);
    // a new batch stores no pending list until its first attempt is recorded
    const pendingList = await pool.query(
      `SELECT attnotnull FROM pg_attribute WHERE attrelid = 'delivery_batches'::regclass AND attname = 'pending_device_ids'`,
    );
    expect(pendingList.rows).toEqual([{ attnotnull: false }]);
    const repos = createRepositories();
    const batchIds = ids.flatMap((id) => [`${id}-g1-b0`, `${id}-g1-b1`]);
    const loaded = await repos.batches.loadAttempts(db, [...batchIds, 'not-a-batch', `${ids[0]}-g1-b9`]);
    expect([...loaded.keys()].sort()).toEqual([...batchIds].sort());
    for (const id of ids) {
      expect(loaded.get(`${id}-g1-b0`)).toMatchObject({
        batch: { id: `${id}-g1-b0`, notification_id: id, seq: 0, state: 'done' },
        pending: [],
      });
      expect(loaded.get(`${id}-g1-b1`)).toMatchObject({
        batch: { id: `${id}-g1-b1`, seq: 1, state: 'pending' },
        pending: [{ deviceId: devices[1] }],
      });
      expect((await repos.batches.pendingBatches(db, id, 1)).map((b) => b.id)).toEqual([`${id}-g1-b1`]);
    }
    // recording the pending ones (found by their key) closes their notifications, each of two batches now done
    const recorded = await repos.batches.recordAttempts(
      db,
      ids.map((id) => ({
        batch: (loaded.get(`${id}-g1-b1`) as AttemptInput).batch,
        outcome: { succeeded: [devices[1]!], failed: [], invalidated: [], retry: [], expired: [], lastError: null },
        finalAttempt: false,
      })),
    );
    expect(recorded).toEqual(new Set());
    for (const id of ids) expect(await repos.batches.pendingBatches(db, id, 1)).toEqual([]);
    expect(
      (
        await repos.notifications.completeIfFinished(
          db,
          ids.map((id) => ({ id, generation: 1 })),
        )
      ).sort(),
    ).toEqual([...ids].sort());
    const sums = await pool.query<{ notification_id: string; succeeded: number }>(
      `SELECT notification_id, sum(succeeded)::int AS succeeded FROM delivery_batches WHERE notification_id = ANY($1::uuid[]) GROUP BY 1`,
      [ids],
    );
    expect(sums.rows.map((r) => r.succeeded)).toEqual([2, 2]);

    // a day made after the upgrade (as the maintenance makes them) has the key and the summarising index alone
    const later = dayOf(new Date(Date.now() + 10 * DAY_MS));
    await db.transaction().execute((trx) => new NotificationPartitionsRepository().create(trx, later));
    const indexes = async (table: string) =>
      (
        await pool.query<{ def: string }>(
          `SELECT regexp_replace(pg_get_indexdef(indexrelid), '^.* USING ', '') AS def FROM pg_index WHERE indrelid = $1::regclass ORDER BY 1`,
          [table],
        )
      ).rows.map((r) => r.def);
    const layout = ['brin (COALESCE(not_before, created_at))', 'btree (notification_id, generation, seq)'];
    expect(await indexes(`delivery_batches_p${later.replaceAll('-', '')}`)).toEqual(layout);
    expect(await indexes('delivery_batches_default')).toEqual(layout);
  });
});

const BATCH_IDENTITY = '045_batch_replica_identity.sql';

/**
 * Migration 045 on a database of the schema before it, with a publication of delivery_batches (as logical replication
 * or a change-capture tool makes): there a batch's UPDATE is refused, the table having no primary key since 043.
 * Upgraded, every batch is kept as it was, each partition (and a day the maintenance makes afterwards) is identified
 * by its part of the unique key, with no other index, and recording, deleting and purging batches work.
 */
describe('migration 045 on a database of the previous schema', () => {
  const before = useDatabaseBefore(BATCH_IDENTITY);

  it('keeps every batch and identifies each partition by the key, a day made later too, so a publication takes updates', async () => {
    const { db, pool } = before.handle;
    const app = (await pool.query<{ id: string }>(`INSERT INTO apps (bundle_id, name) VALUES ('com.example.upgrade45', 'a') RETURNING id`))
      .rows[0]!;
    const devices = [randomUUID(), randomUUID()];
    // the all-devices audience as migration 044 keys it
    const audience = (
      await pool.query<{ id: string }>(
        `INSERT INTO audiences (app_id, spec_key, kind, name) VALUES ($1, '00000000-0000-0000-0000-000000000000', 'all', 'All devices') RETURNING id`,
        [app.id],
      )
    ).rows[0]!;
    const ids = await sendingNotifications(before.handle, app.id, audience.id, 1);
    const legacy = ids.find((id) => id.startsWith('c0ffee00'))!;
    await pool.query(
      `INSERT INTO delivery_batches (notification_id, generation, seq, platform, development, device_ids)
       SELECT n, 1, 0, 'ios', false, $2::uuid[] FROM unnest($1::uuid[]) n`,
      [ids, devices],
    );
    await pool.query(`CREATE PUBLICATION batches_out FOR TABLE delivery_batches`);
    await expect(pool.query(`UPDATE delivery_batches SET attempts = 1 WHERE notification_id = $1`, [ids[1]])).rejects.toThrow(
      /does not have a replica identity/,
    );
    const rowsOf = async () =>
      (await pool.query(`SELECT tableoid::regclass::text AS part, * FROM delivery_batches ORDER BY notification_id`)).rows;
    const kept = await rowsOf();
    expect(kept.map((r) => r.part).sort()).toEqual([
      'delivery_batches_default',
      `delivery_batches_p${dayOf(new Date()).replaceAll('-', '')}`,
    ]);

    await before.upgrade();

    // every row keeps every column it had (later migrations add columns of their own)
    const had = Object.keys(kept[0]!);
    expect((await rowsOf()).map((r) => Object.fromEntries(had.map((c) => [c, r[c]])))).toEqual(kept);
    // a day made after the upgrade, as the maintenance makes them, with a batch of its own
    const later = dayOf(new Date(Date.now() + 10 * DAY_MS));
    await db.transaction().execute((trx) => new NotificationPartitionsRepository().create(trx, later));
    const laterId = uuid7Floor(Date.parse(`${later}T12:00:00Z`));
    await pool.query(
      `INSERT INTO notifications (id, app_id, audience_id, request, payload, state, fanout_done, fanout_seq)
       VALUES ($1, $2, $3, '{}', '{}', 'sending', true, 1)`,
      [laterId, app.id, audience.id],
    );
    await pool.query(
      `INSERT INTO delivery_batches (notification_id, generation, seq, platform, development, device_ids) VALUES ($1, 1, 0, 'ios', false, $2)`,
      [laterId, devices],
    );
    const identities = await pool.query<{ table: string; identity: string; index: string | null }>(
      `SELECT c.relname AS table, c.relreplident AS identity,
              (SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident) AS index
       FROM pg_class c
       WHERE c.oid = 'delivery_batches'::regclass OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'delivery_batches'::regclass)
       ORDER BY 1`,
    );
    expect(identities.rows.map((r) => r.table)).toContain(`delivery_batches_p${later.replaceAll('-', '')}`);
    for (const row of identities.rows)
      expect(row).toEqual({
        ...row,
        identity: 'i',
        index: expect.stringMatching(/UNIQUE INDEX .* USING btree \(notification_id, generation, seq\)$/),
      });
    // still one b-tree a batch: the key's, beside the summarising index
    const btrees = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
       WHERE i.indrelid = $1::regclass AND a.amname = 'btree'`,
      [`delivery_batches_p${later.replaceAll('-', '')}`],
    );
    expect(btrees.rows).toEqual([{ n: 1 }]);

    // the publication takes a batch's recording in every partition, and the deletes of a purge
    const repos = createRepositories();
    const all = [...ids, laterId];
    const loaded = await repos.batches.loadAttempts(
      db,
      all.map((id) => `${id}-g1-b0`),
    );
    await repos.batches.recordAttempts(
      db,
      all.map((id) => ({
        batch: (loaded.get(`${id}-g1-b0`) as AttemptInput).batch,
        outcome: { succeeded: [...devices], failed: [], invalidated: [], retry: [], expired: [], lastError: null },
        finalAttempt: false,
      })),
    );
    const sent = await pool.query<{ succeeded: number }>(`SELECT succeeded FROM delivery_batches ORDER BY notification_id`);
    expect(sent.rows).toEqual([{ succeeded: 2 }, { succeeded: 2 }, { succeeded: 2 }]);
    await pool.query(`UPDATE notifications SET state = 'sent', updated_at = now() - interval '1000 days' WHERE id = $1`, [legacy]);
    const purged = await db
      .transaction()
      .execute((trx) => new NotificationPartitionsRepository().purgeDefault(trx, new Date(Date.now() - DAY_MS), 10));
    expect(purged).toBe(1);
    expect((await pool.query(`SELECT count(*)::int AS n FROM delivery_batches`)).rows).toEqual([{ n: 2 }]);

    // a day an older worker made after the upgrade (its partitions without the identity) is given it by the next
    // maintenance, and a parent set to FULL passes that on
    const old = `delivery_batches_p${later.replaceAll('-', '')}`;
    await pool.query(`ALTER TABLE ${old} REPLICA IDENTITY DEFAULT`);
    await expect(pool.query(`UPDATE delivery_batches SET attempts = 2 WHERE notification_id = $1`, [laterId])).rejects.toThrow(
      /does not have a replica identity/,
    );
    // behind a long reader of that day it gives up after its lock timeout, and does it at the next sweep
    const reader = await pool.connect();
    try {
      await reader.query(`BEGIN; LOCK TABLE ${old} IN ACCESS SHARE MODE`);
      const blocked = await new NotificationPartitionsRepository().repairReplicaIdentities(db);
      expect(blocked).toEqual({ repaired: [], failed: [{ partition: old, error: expect.stringMatching(/lock timeout/) }] });
    } finally {
      await reader.query('ROLLBACK');
      reader.release();
    }
    const repaired = await new NotificationPartitionsRepository().repairReplicaIdentities(db);
    expect(repaired).toEqual({ repaired: [old], failed: [] });
    await pool.query(`UPDATE delivery_batches SET attempts = 2 WHERE notification_id = $1`, [laterId]);
    // a day identified by another index of its own (say made by hand) is given its part of the parent's
    await pool.query(`CREATE UNIQUE INDEX own_key ON ${old} (seq, generation, notification_id)`);
    await pool.query(`ALTER TABLE ${old} REPLICA IDENTITY USING INDEX own_key`);
    expect(await new NotificationPartitionsRepository().repairReplicaIdentities(db)).toEqual({ repaired: [old], failed: [] });
    const own = await pool.query<{ index: string }>(
      `SELECT c.relname AS index FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
       JOIN pg_inherits x ON x.inhrelid = i.indexrelid
       JOIN pg_index p ON p.indexrelid = x.inhparent AND p.indisreplident
       WHERE i.indrelid = '${old}'::regclass AND i.indisreplident`,
    );
    expect(own.rows).toHaveLength(1);
    expect(await new NotificationPartitionsRepository().repairReplicaIdentities(db)).toEqual({ repaired: [], failed: [] });
    await pool.query(`ALTER TABLE delivery_batches REPLICA IDENTITY FULL`);
    const full = await new NotificationPartitionsRepository().repairReplicaIdentities(db);
    expect(await new NotificationPartitionsRepository().repairReplicaIdentities(db)).toEqual({ repaired: [], failed: [] });
    expect(full.repaired.sort()).toEqual(
      identities.rows
        .map((r) => r.table)
        .filter((t) => t !== 'delivery_batches')
        .sort(),
    );
    const kinds = await pool.query<{ identity: string }>(
      `SELECT DISTINCT c.relreplident AS identity FROM pg_class c JOIN pg_inherits h ON h.inhrelid = c.oid
       WHERE h.inhparent = 'delivery_batches'::regclass`,
    );
    expect(kinds.rows).toEqual([{ identity: 'f' }]);
  });
});
