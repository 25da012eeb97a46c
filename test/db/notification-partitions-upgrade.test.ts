import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { IdempotencyRepository } from '../../src/db/repositories/idempotency.js';
import { MessagesRepository } from '../../src/db/repositories/messages.js';
import { NotificationsRepository } from '../../src/db/repositories/notifications.js';
import { createRepositories } from '../../src/services/deps.js';
import { insertMessage } from '../http/message-support.js';
import { dayOf, seed, useDatabaseBefore } from './upgrade-support.js';

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
