import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.js';
import { migrate, MIGRATIONS_DIR } from '../../src/db/migrate.js';
import { AudiencesRepository } from '../../src/db/repositories/audiences.js';
import { ConversionsRepository } from '../../src/db/repositories/conversions.js';
import { NotificationsRepository } from '../../src/db/repositories/notifications.js';
import { AppService } from '../../src/services/apps.js';
import { freshDatabase } from '../system/proc.js';

const PARTITIONING = '023_time_partitions.sql';
const DAY_MS = 86_400_000;
const dayOf = (at: Date) => at.toISOString().slice(0, 10);

/**
 * The upgrade: a database of the schema before migration 023, with receipts and active devices in its plain
 * tables, migrated; the rows are all there, each in its day's partition, and conversions still find the receipts.
 */
describe('migration 023 on a database of the previous schema', () => {
  let database: Awaited<ReturnType<typeof freshDatabase>>;
  let dir: string;
  let handle: DatabaseHandle;

  beforeAll(async () => {
    database = await freshDatabase();
    handle = openDatabase(database.url, 4, 0);
    // the shipped migrations before 023 (whatever their numbers), applied as a database of the last release has them
    dir = await mkdtemp(path.join(os.tmpdir(), 'pushd-upgrade-'));
    for (const file of await readdir(MIGRATIONS_DIR))
      if (/^\d+_.*\.sql$/.test(file) && file < PARTITIONING) await copyFile(path.join(MIGRATIONS_DIR, file), path.join(dir, file));
    await migrate(handle.pool, dir);
  });
  afterAll(async () => {
    await handle?.close();
    await rm(dir, { recursive: true, force: true });
    await database?.drop();
  });

  it('keeps every receipt and active device, each in its day partition, and conversions attribute events to them', async () => {
    const { db, pool } = handle;
    expect((await pool.query(`SELECT relkind FROM pg_class WHERE relname = 'device_pushes'`)).rows).toEqual([{ relkind: 'r' }]);
    const { app } = await new AppService(db).createApp('com.example.upgrade');
    const devices = (
      await pool.query<{ id: string }>(
        `INSERT INTO devices (app_id, platform, token) SELECT $1, 'ios', 'tok' || i FROM generate_series(1, 3) i RETURNING id`,
        [app.id],
      )
    ).rows.map((r) => r.id);
    const audience = await new AudiencesRepository().upsertAllDevices(db, app.id);
    const notification = await new NotificationsRepository().insertOrCollapse(db, {
      appId: app.id,
      audienceId: audience.id,
      request: { to: '*', payload: { alert: 'x' } },
      payload: { alert: 'x' },
      collapseKey: null,
    });
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

    await copyFile(path.join(MIGRATIONS_DIR, PARTITIONING), path.join(dir, PARTITIONING));
    expect(await migrate(handle.pool, dir)).toEqual([PARTITIONING]);

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
