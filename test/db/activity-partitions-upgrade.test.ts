import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ActivityRepository } from '../../src/db/repositories/activity.js';
import { ConversionsRepository } from '../../src/db/repositories/conversions.js';
import { MessagesRepository } from '../../src/db/repositories/messages.js';
import { insertMessage } from '../http/message-support.js';
import { DAY_MS, dayOf, seed, useDatabaseBefore } from './upgrade-support.js';

const PARTITIONING = '023_time_partitions.sql';

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
      await activity.recordSessions(trx, [
        { appId: app.id, deviceId: devices[0]!, id: sessions[1]!.id, startedAt: new Date(now), durationSeconds: 60 },
      ]);
      await activity.recordSessions(trx, [
        { appId: app.id, deviceId: devices[0]!, id: sessions[0]!.id, startedAt: new Date(now), durationSeconds: 99 },
      ]);
      await activity.recordOpens(trx, [
        { appId: app.id, deviceId: devices[0]!, notificationId: notification.id, kind: 'direct', openedAt: new Date(now) },
      ]);
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
