import { createHash, randomUUID } from 'node:crypto';
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.js';
import { migrate, MIGRATIONS_DIR } from '../../src/db/migrate.js';
import { ActivityRepository } from '../../src/db/repositories/activity.js';
import { AudiencesRepository } from '../../src/db/repositories/audiences.js';
import { ConversionsRepository } from '../../src/db/repositories/conversions.js';
import { IdempotencyRepository } from '../../src/db/repositories/idempotency.js';
import { MessagesRepository } from '../../src/db/repositories/messages.js';
import { createRepositories } from '../../src/services/deps.js';
import type { AttemptInput } from '../../src/db/repositories/batches.js';
import { NotificationsRepository } from '../../src/db/repositories/notifications.js';
import { NotificationPartitionsRepository, uuid7Floor } from '../../src/db/repositories/partitions.js';
import { audienceSpec, canonicalFilters, stableStringify } from '../../src/domain/audience-spec.js';
import type { Filter } from '../../src/domain/filters.js';
import { freshDatabase } from '../system/proc.js';
import { insertMessage } from '../http/message-support.js';

const PARTITIONING = '023_time_partitions.sql';
const DAY_MS = 86_400_000;
const dayOf = (at: Date) => at.toISOString().slice(0, 10);

/** The shipped migrations from `first` on, in the order they apply. */
async function laterMigrations(first: string): Promise<string[]> {
  return (await readdir(MIGRATIONS_DIR)).filter((f) => /^\d+_.*\.sql$/.test(f) && f >= first).sort();
}

/**
 * An app with `count` devices, its audience of all and a push to it, written in plain SQL as the previous schema
 * takes them: today's repositories write columns later migrations add.
 */
async function seed({ pool }: DatabaseHandle, bundleId: string, count: number) {
  const one = async <T>(text: string, values: unknown[]) => (await pool.query(text, values)).rows[0] as T;
  const app = await one<{ id: string }>(`INSERT INTO apps (bundle_id, name) VALUES ($1, $1) RETURNING id`, [bundleId]);
  const devices = (
    await pool.query<{ id: string }>(
      `INSERT INTO devices (app_id, platform, token) SELECT $1, 'ios', 'tok' || i FROM generate_series(1, $2::int) i RETURNING id`,
      [app.id, count],
    )
  ).rows.map((r) => r.id);
  const audience = await one<{ id: string }>(
    `INSERT INTO audiences (app_id, spec_key, kind, name) VALUES ($1, 'all', 'all', 'All devices') RETURNING id`,
    [app.id],
  );
  const notification = await one<{ id: string; created_at: Date }>(
    `INSERT INTO notifications (app_id, audience_id, request, payload)
     VALUES ($1, $2, '{"to": "*", "payload": {"alert": "x"}}', '{"alert": "x"}')
     RETURNING id, created_at`,
    [app.id, audience.id],
  );
  return { app, devices, audience, notification };
}

/**
 * A database of this file's own with the shipped migrations before `migration` (whatever their numbers) applied, as
 * a database of the release before it has them; `upgrade()` applies that migration and every later one.
 */
function useDatabaseBefore(migration: string) {
  let database: Awaited<ReturnType<typeof freshDatabase>>;
  let dir: string;
  const state = {} as { handle: DatabaseHandle; upgrade(): Promise<void> };
  beforeAll(async () => {
    database = await freshDatabase();
    state.handle = openDatabase(database.url, 4, 0);
    dir = await mkdtemp(path.join(os.tmpdir(), 'pushd-upgrade-'));
    for (const file of await readdir(MIGRATIONS_DIR))
      if (/^\d+_.*\.sql$/.test(file) && file < migration) await copyFile(path.join(MIGRATIONS_DIR, file), path.join(dir, file));
    await migrate(state.handle.pool, dir);
  });
  afterAll(async () => {
    await state.handle?.close();
    await rm(dir, { recursive: true, force: true });
    await database?.drop();
  });
  state.upgrade = async () => {
    const upgrade = await laterMigrations(migration);
    for (const file of upgrade) await copyFile(path.join(MIGRATIONS_DIR, file), path.join(dir, file));
    expect(await migrate(state.handle.pool, dir)).toEqual(upgrade);
  };
  return state;
}

/**
 * The upgrade: a database of the schema before migration 023, with receipts and active devices in its plain
 * tables, migrated; the rows are all there, each in its day's partition, and conversions still find the receipts.
 */
describe('migration 023 on a database of the previous schema', () => {
  const before = useDatabaseBefore(PARTITIONING);

  it('keeps every receipt and active device, each in its day partition, and conversions attribute events to them', async () => {
    const { db, pool } = before.handle;
    expect((await pool.query(`SELECT relkind FROM pg_class WHERE relname = 'device_pushes'`)).rows).toEqual([{ relkind: 'r' }]);
    const { app, devices, notification } = await seed(before.handle, 'com.example.upgrade', 3);
    const now = Date.now();
    const receipts = [
      { device: devices[0]!, at: new Date(now - 3 * DAY_MS) },
      { device: devices[1]!, at: new Date(now - 1 * DAY_MS) },
      { device: devices[2]!, at: new Date(now - 60_000) },
    ];
    // the previous schema's own upsert: one receipt per device and push
    await pool.query(
      `INSERT INTO device_pushes (device_id, notification_id, received_at)
       SELECT d, $2, t FROM unnest($1::uuid[], $3::timestamptz[]) AS r(d, t)
       ON CONFLICT (device_id, notification_id) DO UPDATE SET received_at = excluded.received_at`,
      [receipts.map((r) => r.device), notification.id, receipts.map((r) => r.at.toISOString())],
    );
    const activeDays = [dayOf(new Date(now - 5 * DAY_MS)), dayOf(new Date(now - 2 * DAY_MS)), dayOf(new Date(now))];
    await pool.query(`INSERT INTO app_active_devices (app_id, day, device_id) SELECT $1, d, $2 FROM unnest($3::date[]) d`, [
      app.id,
      devices[0],
      activeDays,
    ]);

    await before.upgrade();

    expect((await pool.query(`SELECT relkind FROM pg_class WHERE relname IN ('device_pushes', 'app_active_devices')`)).rows).toEqual([
      { relkind: 'p' },
      { relkind: 'p' },
    ]);
    const kept = await pool.query<{ device_id: string; received_at: Date; partition: string }>(
      `SELECT device_id, received_at, tableoid::regclass::text AS partition FROM device_pushes ORDER BY received_at`,
    );
    expect(kept.rows).toEqual(
      receipts.map((r) => ({ device_id: r.device, received_at: r.at, partition: `device_pushes_p${dayOf(r.at).replaceAll('-', '')}` })),
    );
    const active = await pool.query<{ day: string; partition: string }>(
      `SELECT to_char(day, 'YYYY-MM-DD') AS day, tableoid::regclass::text AS partition FROM app_active_devices ORDER BY day`,
    );
    expect(active.rows).toEqual(activeDays.map((day) => ({ day, partition: `app_active_devices_p${day.replaceAll('-', '')}` })));
    // partitions from the oldest row's day to three days after today, and the default one, which nothing fell into
    const partitions = await pool.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = 'device_pushes'::regclass ORDER BY c.relname::text COLLATE "C"`,
    );
    const days = Array.from({ length: 7 }, (_, i) => dayOf(new Date(now + (i - 3) * DAY_MS)).replaceAll('-', ''));
    expect(partitions.rows.map((r) => r.name)).toEqual(['device_pushes_default', ...days.map((d) => `device_pushes_p${d}`)]);
    expect((await pool.query(`SELECT count(*)::int AS n FROM device_pushes_default`)).rows).toEqual([{ n: 0 }]);

    // an event each device holds, now: within the 24-hour window of the two recent receipts, not of the oldest
    await pool.query(
      `INSERT INTO device_events (device_id, app_id, name, count, first_happened_at, last_happened_at)
       SELECT d, $2, 'purchase', 1, now(), now() FROM unnest($1::uuid[]) d`,
      [devices, app.id],
    );
    const conversions = new ConversionsRepository();
    await conversions.attribute(
      db,
      devices.map((deviceId) => ({ deviceId, source: '', name: 'purchase', at: new Date(now) })),
      24,
    );
    expect(await conversions.countsFor(db, notification.id)).toEqual([{ source: '', name: 'purchase', count: 2 }]);
  });
});

const ACTIVITY_PARTITIONING = '030_activity_partitions.sql';

/**
 * The upgrade of sessions, opens, conversions and message streams: a database of the schema before migration 030
 * with rows in those plain tables, migrated; every row is back in its day's partition, nothing is counted again,
 * and a report sent again after the upgrade is still deduplicated against the rows from before it.
 */
describe('migration 030 on a database of the previous schema', () => {
  const before = useDatabaseBefore(ACTIVITY_PARTITIONING);

  it('keeps every session, open, conversion and stream row in its day partition, counted once, and still deduplicates', async () => {
    const { db, pool } = before.handle;
    const { app, devices, audience, notification } = await seed(before.handle, 'com.example.upgrade30', 2);
    const now = Date.now();
    const ago = (days: number) => new Date(now - days * DAY_MS);
    const sessions = [
      { device: devices[0]!, id: randomUUID(), at: ago(3), duration: 30 },
      { device: devices[0]!, id: randomUUID(), at: ago(1), duration: null },
      { device: devices[1]!, id: randomUUID(), at: ago(0), duration: 5 },
      // older than the longest default retention: kept in the default partition, no day partition made for it
      { device: devices[1]!, id: randomUUID(), at: ago(400), duration: 7 },
    ];
    await pool.query(
      `INSERT INTO app_sessions (device_id, id, app_id, started_at, duration_seconds)
       SELECT d, s, $4, t, n FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $5::int[]) AS r(d, s, t, n)`,
      [
        sessions.map((r) => r.device),
        sessions.map((r) => r.id),
        sessions.map((r) => r.at.toISOString()),
        app.id,
        sessions.map((r) => r.duration),
      ],
    );
    const opens = [
      { device: devices[0]!, kind: 'direct', at: ago(2) },
      { device: devices[1]!, kind: 'indirect', at: ago(0) },
    ];
    await pool.query(
      `INSERT INTO push_opens (notification_id, kind, device_id, app_id, opened_at)
       SELECT $1, k, d, $2, t FROM unnest($3::text[], $4::uuid[], $5::timestamptz[]) AS r(k, d, t)`,
      [notification.id, app.id, opens.map((o) => o.kind), opens.map((o) => o.device), opens.map((o) => o.at.toISOString())],
    );
    await pool.query(
      `INSERT INTO notification_conversions (notification_id, source, name, device_id, count) VALUES ($1, '', 'purchase', $2, 2)`,
      [notification.id, devices[0]],
    );
    const messages = new MessagesRepository();
    const published = ago(1);
    const message = await insertMessage(db, { appId: app.id, audienceId: audience.id, published, resolved: false });
    await pool.query(
      `INSERT INTO device_messages (device_id, message_id, read_at, stream_impressions) SELECT d, $1, $3, 2 FROM unnest($2::uuid[]) d`,
      [message.id, devices, published],
    );
    const statsBefore = (await pool.query(`SELECT day, shard, sessions, opens, active_users FROM app_daily_stats ORDER BY 1, 2`)).rows;

    await before.upgrade();

    const tables = ['app_sessions', 'device_messages', 'notification_conversions', 'push_opens'];
    expect((await pool.query(`SELECT relname, relkind FROM pg_class WHERE relname = ANY($1) ORDER BY relname`, [tables])).rows).toEqual(
      tables.map((relname) => ({ relname, relkind: 'p' })),
    );
    const partitionOf = (table: string, at: Date) =>
      now - at.getTime() > 91 * DAY_MS ? `${table}_default` : `${table}_p${dayOf(at).replaceAll('-', '')}`;
    const keptSessions = await pool.query(
      `SELECT id, started_at, duration_seconds, tableoid::regclass::text AS partition FROM app_sessions ORDER BY started_at`,
    );
    expect(keptSessions.rows).toEqual(
      [...sessions]
        .sort((a, b) => a.at.getTime() - b.at.getTime())
        .map((r) => ({ id: r.id, started_at: r.at, duration_seconds: r.duration, partition: partitionOf('app_sessions', r.at) })),
    );
    const keptOpens = await pool.query(`SELECT kind, opened_at, tableoid::regclass::text AS partition FROM push_opens ORDER BY opened_at`);
    expect(keptOpens.rows).toEqual(opens.map((o) => ({ kind: o.kind, opened_at: o.at, partition: partitionOf('push_opens', o.at) })));
    // a conversion from before had no day: it takes its notification's
    const keptConversions = await pool.query(`SELECT count::int, tableoid::regclass::text AS partition FROM notification_conversions`);
    expect(keptConversions.rows).toEqual([{ count: 2, partition: partitionOf('notification_conversions', notification.created_at) }]);
    const keptStream = await pool.query(
      `SELECT device_id, retention_from, read_at, stream_impressions, tableoid::regclass::text AS partition FROM device_messages ORDER BY device_id`,
    );
    expect(keptStream.rows).toEqual(
      [...devices].sort().map((device_id) => ({
        device_id,
        retention_from: published,
        read_at: published,
        stream_impressions: 2,
        partition: partitionOf('device_messages', published),
      })),
    );
    // only the 400-day-old session is in a default partition; the maintenance purges or splits it by the retention set
    for (const table of tables)
      expect((await pool.query(`SELECT count(*)::int AS n FROM ${table}_default`)).rows).toEqual([{ n: table === 'app_sessions' ? 1 : 0 }]);
    // the copy counted nothing again
    expect((await pool.query(`SELECT day, shard, sessions, opens, active_users FROM app_daily_stats ORDER BY 1, 2`)).rows).toEqual(
      statsBefore,
    );

    // read through the repositories as before
    const activity = new ActivityRepository();
    expect(await activity.opensOf(db, notification.id)).toEqual({ direct: 1, indirect: 1, devices: 2 });
    expect(await new ConversionsRepository().countsFor(db, notification.id)).toEqual([{ source: '', name: 'purchase', count: 2 }]);
    expect(await messages.impressionTotals(db, message)).toEqual({ stream: 4, full_screen: 0, in_app: 0 });
    expect((await messages.streamPage(db, devices[0]!, new Date(now), null, 10)).map((m) => m.id)).toEqual([message.id]);

    // reports sent again with another date (no started_at, no opened_at: now) find the rows from before the upgrade:
    // the session that had no duration takes it, and nothing is stored or counted twice
    await db.transaction().execute(async (trx) => {
      await activity.recordSession(trx, app.id, devices[0]!, { id: sessions[1]!.id, startedAt: new Date(now), durationSeconds: 60 });
      await activity.recordSession(trx, app.id, devices[0]!, { id: sessions[0]!.id, startedAt: new Date(now), durationSeconds: 99 });
      await activity.recordOpen(trx, app.id, devices[0]!, { notificationId: notification.id, kind: 'direct', openedAt: new Date(now) });
    });
    expect((await pool.query(`SELECT id, duration_seconds FROM app_sessions ORDER BY started_at`)).rows).toEqual(
      [...sessions]
        .sort((a, b) => a.at.getTime() - b.at.getTime())
        .map((r) => ({ id: r.id, duration_seconds: r === sessions[1] ? 60 : r.duration })),
    );
    expect(await activity.opensOf(db, notification.id)).toEqual({ direct: 1, indirect: 1, devices: 2 });
    expect((await pool.query(`SELECT day, shard, sessions, opens, active_users FROM app_daily_stats ORDER BY 1, 2`)).rows).toEqual(
      statsBefore,
    );
  });
});

const NOTIFICATION_PARTITIONING = '037_notification_partitions.sql';
const TIME_ORDERED_IDS = '033_time_ordered_ids.sql';

/**
 * The upgrade to time-ordered ids and day-partitioned idempotency keys: a database of the schema before migration 033
 * with a notification, a message and idempotency keys, migrated; the rows keep their ids, new rows take time-ordered
 * ones, and the live keys are each in its day's partition and still answer a retry.
 */
describe('migrations 033 and 034 on a database of the previous schema', () => {
  const before = useDatabaseBefore(TIME_ORDERED_IDS);

  it('keeps the ids and the live idempotency keys, which still answer; new rows take time-ordered ids', async () => {
    const { db, pool } = before.handle;
    const { app, audience, notification } = await seed(before.handle, 'com.example.upgrade33', 1);
    const message = await insertMessage(db, { appId: app.id, audienceId: audience.id, published: new Date(), resolved: false });
    const now = Date.now();
    const keys = [
      { key: 'live-recent', at: new Date(now - 60_000), status: 201 },
      { key: 'live-old', at: new Date(now - 23 * 3_600_000), status: null },
      // past its 24 hours: a request already ignored it, so it is not copied
      { key: 'expired', at: new Date(now - 25 * 3_600_000), status: 201 },
    ];
    await pool.query(
      `INSERT INTO idempotency_keys (app_id, key, request_hash, status, body, resource_id, created_at)
       SELECT $1, k, '\\x00'::bytea, s, '{"id":"x"}', $2, t FROM unnest($3::text[], $4::smallint[], $5::timestamptz[]) AS r(k, s, t)`,
      [app.id, notification.id, keys.map((k) => k.key), keys.map((k) => k.status), keys.map((k) => k.at.toISOString())],
    );

    await before.upgrade();

    expect((await pool.query(`SELECT relkind FROM pg_class WHERE relname = 'idempotency_keys'`)).rows).toEqual([{ relkind: 'p' }]);
    const kept = await pool.query<{ key: string; created_at: Date; status: number | null; resource_id: string; partition: string }>(
      `SELECT key, created_at, status, resource_id, tableoid::regclass::text AS partition FROM idempotency_keys ORDER BY created_at`,
    );
    expect(kept.rows).toEqual(
      keys
        .slice(0, 2)
        .reverse()
        .map((k) => ({
          key: k.key,
          created_at: k.at,
          status: k.status,
          resource_id: notification.id,
          partition: `idempotency_keys_p${dayOf(k.at).replaceAll('-', '')}`,
        })),
    );
    // a retry finds its key (answered or not), locked; the expired key is free again and taken by a new row
    const repository = new IdempotencyRepository();
    await db.transaction().execute(async (trx) => {
      expect(await repository.claim(trx, app.id, 'live-recent', Buffer.from([1]))).toMatchObject({
        status: 201,
        resource_id: notification.id,
      });
      expect(await repository.claim(trx, app.id, 'live-old', Buffer.from([1]))).toMatchObject({ status: null });
      expect(await repository.claim(trx, app.id, 'expired', Buffer.from([1]))).toBeUndefined();
    });
    expect((await pool.query(`SELECT count(*)::int AS n FROM idempotency_keys WHERE key = 'expired'`)).rows).toEqual([{ n: 1 }]);

    // the rows from before keep their (random) ids; new ones are time-ordered
    expect((await pool.query(`SELECT id FROM notifications`)).rows).toEqual([{ id: notification.id }]);
    expect((await pool.query(`SELECT id FROM messages`)).rows).toEqual([{ id: message.id }]);
    const { id } = (
      await pool.query<{ id: string }>(
        `INSERT INTO notifications (app_id, audience_id, request, payload) VALUES ($1, $2, '{}', '{}') RETURNING id`,
        [app.id, audience.id],
      )
    ).rows[0]!;
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});

/**
 * Migration 037 on a database of the schema before it: notifications (an id from before migration 033, random, and a
 * time-ordered one of today), their batches, fan-out ranges and opens, written in plain SQL; upgraded, each is in its
 * day's partition (the random id in the default one), and the collapse and transactional keys still name theirs.
 */
describe('migration 037 on a database of the previous schema', () => {
  const before = useDatabaseBefore(NOTIFICATION_PARTITIONING);

  it('keeps every notification with its batches, ranges and opens, each by the day of its id, and their keys', async () => {
    const { db, pool } = before.handle;
    const { app, devices, audience } = await seed(before.handle, 'com.example.upgrade37', 1);
    // a random id far from today's (from before migration 033), a collapse key's of today, a transactional send's
    const legacy = 'c0ffee00-1234-4abc-8def-0123456789ab';
    const inserted = await pool.query<{ id: string; collapse_key: string | null }>(
      `INSERT INTO notifications (id, app_id, audience_id, request, payload, collapse_key, transactional_key, state)
       VALUES ($1, $2, $3, '{}', '{"alert": "old"}', NULL, NULL, 'sent'),
              (pushd_uuid7(), $2, $3, '{}', '{"alert": "score"}', 'score', NULL, 'sent'),
              (pushd_uuid7(), $2, NULL, '{}', '{"alert": "code"}', NULL, '["user_id","u1","otp"]', 'sent')
       RETURNING id, collapse_key`,
      [legacy, app.id, audience.id],
    );
    const [, collapsed, transactional] = inserted.rows.map((r) => r.id) as [string, string, string];
    const ids = [legacy, collapsed, transactional];
    await pool.query(
      `INSERT INTO delivery_batches (id, notification_id, generation, seq, platform, development, device_ids, pending_device_ids, state, succeeded)
       SELECT n || '-g1-b1', n, 1, 1, 'ios', false, ARRAY[$2::uuid], '{}', 'done', 1 FROM unnest($1::uuid[]) n`,
      [ids, devices[0]],
    );
    await pool.query(
      `INSERT INTO fanout_ranges (notification_id, generation, range_no, cursor_id, next_seq, done)
       SELECT n, 1, 0, $2, 2, true FROM unnest($1::uuid[]) n`,
      [ids, devices[0]],
    );
    await pool.query(
      `INSERT INTO push_opens (notification_id, kind, device_id, app_id, opened_at) SELECT n, 'direct', $2, $3, now() FROM unnest($1::uuid[]) n`,
      [ids, devices[0], app.id],
    );

    await before.upgrade();

    expect(
      (
        await pool.query(
          `SELECT relname, relkind FROM pg_class WHERE relname IN ('notifications', 'delivery_batches', 'fanout_ranges') ORDER BY relname`,
        )
      ).rows,
    ).toEqual([
      { relname: 'delivery_batches', relkind: 'p' },
      { relname: 'fanout_ranges', relkind: 'p' },
      { relname: 'notifications', relkind: 'p' },
    ]);
    const today = `_p${dayOf(new Date()).replaceAll('-', '')}`;
    const partitionOf = (id: string) => (id === legacy ? '_default' : today);
    for (const [table, column] of [
      ['notifications', 'id'],
      ['delivery_batches', 'notification_id'],
      ['fanout_ranges', 'notification_id'],
      ['push_opens', 'notification_id'],
    ] as const) {
      const rows = await pool.query<{ id: string; partition: string }>(
        `SELECT ${column} AS id, tableoid::regclass::text AS partition FROM ${table} WHERE ${column} = ANY($1::uuid[]) ORDER BY ${column}`,
        [ids],
      );
      expect(rows.rows).toEqual(
        [...ids].sort().map((id) => ({
          id,
          partition: table === 'push_opens' ? `push_opens${today}` : `${table}${partitionOf(id)}`,
        })),
      );
    }

    // read back: each notification and its batch; the keys name the same notifications as before
    const notifications = new NotificationsRepository();
    for (const id of ids) expect(await notifications.findForApp(db, app.id, id)).toMatchObject({ id, state: 'sent' });
    const repos = createRepositories();
    for (const id of ids) {
      expect((await repos.batches.loadAttempts(db, [`${id}-g1-b1`])).get(`${id}-g1-b1`)?.batch).toMatchObject({
        notification_id: id,
        state: 'done',
      });
      expect(await repos.fanout.rangesOf(db, id, 1)).toMatchObject([{ range_no: 0, done: true }]);
    }
    const again = await notifications.insertOrCollapse(db, {
      appId: app.id,
      audienceId: audience.id,
      request: {},
      payload: { alert: 'score 2' },
      collapseKey: 'score',
    });
    expect(again).toMatchObject({ id: collapsed, generation: 2, payload: { alert: 'score 2' } });
    await db.transaction().execute(async (trx) => {
      expect(await notifications.claimTransactional(trx, app.id, '["user_id","u1","otp"]', randomUUID())).toEqual({
        id: transactional,
        generation: 1,
      });
    });
    // the key is named in its table (migration 041), and a new key names the id it is claimed for
    const fresh = randomUUID();
    await db.transaction().execute(async (trx) => {
      expect(await notifications.claimTransactional(trx, app.id, '["user_id","u2","otp"]', fresh)).toBeUndefined();
    });
    expect(
      (await pool.query(`SELECT transactional_key, notification_id FROM notification_transactional_keys ORDER BY transactional_key`)).rows,
    ).toEqual([
      { transactional_key: '["user_id","u1","otp"]', notification_id: transactional },
      { transactional_key: '["user_id","u2","otp"]', notification_id: fresh },
    ]);
  });
});

const MESSAGE_PARTITIONING = '040_message_partitions.sql';

/**
 * Migration 040 on a database of the schema before it: a message from before migration 033 (a random id) shown long,
 * and one of today (time-ordered, made when it was created), with stream rows and a push, written in plain SQL;
 * upgraded, each is in the partition of its id's day (the random one in the default one) and reads back as before,
 * and a message made after it takes the id of the day its retention ends.
 */
describe('migration 040 on a database of the previous schema', () => {
  const before = useDatabaseBefore(MESSAGE_PARTITIONING);

  it('keeps every message with its stream rows and push, read back as before; a new one goes by its retention day', async () => {
    const { db, pool } = before.handle;
    const { app, devices, audience } = await seed(before.handle, 'com.example.upgrade40', 2);
    const legacy = 'c0ffee00-1234-4abc-8def-0123456789ab';
    const inserted = await pool.query<{ id: string }>(
      `INSERT INTO messages (id, app_id, audience_id, request, title, type, publish_at, unpublish_at, expires_at, created_at)
       VALUES ($1, $2, $3, '{"title": "old"}', 'old', 'default', now() - interval '10 days', now() + interval '100 days',
               now() + interval '190 days', now() - interval '10 days'),
              (pushd_uuid7(), $2, $3, '{"title": "new"}', 'new', 'default', now(), NULL, now() + interval '90 days', now())
       RETURNING id`,
      [legacy, app.id, audience.id],
    );
    const [, today] = inserted.rows.map((r) => r.id) as [string, string];
    await pool.query(
      `INSERT INTO device_messages (device_id, message_id, retention_from, read_at, stream_impressions)
       SELECT d, m.id, coalesce(m.unpublish_at, m.publish_at), now(), 1 FROM unnest($1::uuid[]) d, messages m`,
      [devices],
    );
    const push = await pool.query<{ id: string }>(
      `INSERT INTO notifications (app_id, audience_id, request, payload, message_id) VALUES ($1, $2, '{}', '{}', $3) RETURNING id`,
      [app.id, audience.id, today],
    );

    await before.upgrade();

    expect((await pool.query(`SELECT relkind FROM pg_class WHERE relname = 'messages'`)).rows).toEqual([{ relkind: 'p' }]);
    const located = await pool.query(`SELECT id, tableoid::regclass::text AS partition FROM messages ORDER BY created_at`);
    expect(located.rows).toEqual([
      { id: legacy, partition: 'messages_default' },
      { id: today, partition: `messages_p${dayOf(new Date()).replaceAll('-', '')}` },
    ]);
    // no foreign key names messages any more: their partitions are dropped whole
    expect((await pool.query(`SELECT conname FROM pg_constraint WHERE confrelid = 'messages'::regclass`)).rows).toEqual([]);

    // read back through the repository as before: each message with its push, both streams, the impressions
    const messages = new MessagesRepository();
    const now = new Date();
    expect(await messages.findForApp(db, app.id, legacy, now)).toMatchObject({ id: legacy, title: 'old', notification_id: null });
    expect(await messages.findForApp(db, app.id, today, now)).toMatchObject({ id: today, title: 'new', notification_id: push.rows[0]!.id });
    expect((await messages.listForApp(db, app.id, now, 10, 0)).map((m) => m.id)).toEqual([today, legacy]);
    for (const device of devices) expect((await messages.streamPage(db, device, now, null, 10)).map((m) => m.id)).toEqual([today, legacy]);
    expect(await messages.impressionTotals(db, (await messages.findForApp(db, app.id, legacy, now))!)).toEqual({
      stream: 2,
      full_screen: 0,
      in_app: 0,
    });

    // a message made now takes an id of the instant its retention ends: the day no partition was made for yet
    const made = await insertMessage(db, { appId: app.id, audienceId: audience.id, published: now, resolved: false });
    expect(parseInt(made.id.replaceAll('-', '').slice(0, 12), 16)).toBe(made.expires_at.getTime());
    expect((await pool.query(`SELECT tableoid::regclass::text AS p FROM messages WHERE id = $1`, [made.id])).rows).toEqual([
      { p: 'messages_default' },
    ]);
  });
});

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

const AUDIENCE_KEYS = '044_audience_keys.sql';

/**
 * Migration 044 on a database of the schema before it: audiences keyed by the whole SHA-256 of their spec in hex and
 * the all-devices one by '*', with a notification and a message naming them, written in plain SQL; upgraded, every
 * row is kept as it was, the same spec sent again finds the same audience without writing it, the app's list keeps
 * its order, and deleting the app still takes its notifications and audiences.
 */
describe('migration 044 on a database of the previous schema', () => {
  const before = useDatabaseBefore(AUDIENCE_KEYS);

  it('keeps every audience with its id, found again by the same spec, and deleting the app still takes them', async () => {
    const { db, pool } = before.handle;
    const { app, devices } = await seed(before.handle, 'com.example.upgrade44', 2);
    const oneDevice: Filter[] = [{ name: 'device_id', criteria: [devices[0]!] }];
    const twoRules: Filter[] = [
      { name: 'locale', criteria: ['fr_FR'] },
      { name: 'device_id', criteria: [devices[1]!], not_filter: true },
    ];
    // the previous key: the whole digest of the canonical form, in hex
    const oldKey = (filters: Filter[]) =>
      createHash('sha256')
        .update(stableStringify(canonicalFilters(filters)))
        .digest('hex');
    const made = await pool.query<{ id: string }>(
      `INSERT INTO audiences (app_id, spec_key, kind, filters, name, created_at)
       VALUES ($1, '*', 'all', NULL, 'All devices', now() - interval '3 days'),
              ($1, $2, 'filters', $3, 'api_audience_one', now() - interval '2 days'),
              ($1, $4, 'filters', $5, 'api_audience_two', now() - interval '1 day')
       RETURNING id`,
      [
        app.id,
        oldKey(oneDevice),
        JSON.stringify(canonicalFilters(oneDevice)),
        oldKey(twoRules),
        JSON.stringify(canonicalFilters(twoRules)),
      ],
    );
    const [all, one, two] = made.rows.map((r) => r.id) as [string, string, string];
    await pool.query(`INSERT INTO notifications (app_id, audience_id, request, payload) VALUES ($1, $2, '{}', '{"alert": "one"}')`, [
      app.id,
      one,
    ]);
    await pool.query(
      `INSERT INTO messages (app_id, audience_id, request, title, type, publish_at, expires_at)
       VALUES ($1, $2, '{"title": "two"}', 'two', 'default', now(), now() + interval '90 days')`,
      [app.id, two],
    );
    const rowsOf = async () =>
      (await pool.query(`SELECT id, name, kind, filters, created_at, updated_at, test FROM audiences ORDER BY created_at, id`)).rows;
    const kept = await rowsOf();
    const audiences = new AudiencesRepository();
    const listed = (await audiences.listForApp(db, app.id, 10, 0)).map((a) => a.id);

    await before.upgrade();

    expect(await rowsOf()).toEqual(kept);
    expect(
      (
        await pool.query(
          `SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute WHERE attrelid = 'audiences'::regclass AND attname = 'spec_key'`,
        )
      ).rows,
    ).toEqual([{ type: 'uuid' }]);
    expect((await audiences.listForApp(db, app.id, 10, 0)).map((a) => a.id)).toEqual(listed);
    // each spec, asked for as a request does, is the audience it made before, and is not written again
    const versions = async () => (await pool.query(`SELECT id, xmin::text FROM audiences ORDER BY id`)).rows;
    const unwritten = await versions();
    expect((await audiences.upsertAllDevices(db, app.id)).id).toBe(all);
    const { key, canonical } = audienceSpec(twoRules);
    expect((await audiences.upsertFilters(db, app.id, key, canonical)).id).toBe(two);
    const spec = { appId: app.id, ...audienceSpec(oneDevice) };
    const [inserted] = await new NotificationsRepository().insertCut(
      db,
      [{ id: randomUUID(), appId: app.id, audienceId: null, audienceSpecKey: spec.key, request: {}, payload: {}, collapseKey: null }],
      null,
      audiences.specAudiences([spec]),
    );
    expect(inserted!.audience_id).toBe(one);
    expect(await versions()).toEqual(unwritten);

    // no foreign key is checked as a notification or an audience is inserted; deleting the app takes their rows still
    expect(
      (
        await pool.query(
          `SELECT conname FROM pg_constraint WHERE contype = 'f' AND conrelid IN ('notifications'::regclass, 'audiences'::regclass)`,
        )
      ).rows,
    ).toEqual([]);
    expect((await pool.query(`SELECT count(*)::int AS n FROM notifications WHERE app_id = $1`, [app.id])).rows).toEqual([{ n: 3 }]);
    await pool.query(`DELETE FROM apps WHERE id = $1`, [app.id]);
    const counts = async () =>
      (await pool.query(`SELECT (SELECT count(*) FROM notifications)::int AS n, (SELECT count(*) FROM audiences)::int AS a`)).rows[0];
    expect(await counts()).toEqual({ n: 0, a: 0 });
    expect((await pool.query(`SELECT count(*)::int AS n FROM messages`)).rows).toEqual([{ n: 0 }]);
    // and emptying the apps empties them
    const other = (await pool.query<{ id: string }>(`INSERT INTO apps (bundle_id, name) VALUES ('o', 'o') RETURNING id`)).rows[0]!.id;
    const { id: otherAll } = await audiences.upsertAllDevices(db, other);
    await pool.query(`INSERT INTO notifications (app_id, audience_id, request, payload) VALUES ($1, $2, '{}', '{}')`, [other, otherAll]);
    expect(await counts()).toEqual({ n: 1, a: 1 });
    await pool.query(`TRUNCATE apps CASCADE`);
    expect(await counts()).toEqual({ n: 0, a: 0 });
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
