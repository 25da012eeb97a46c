import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { useDatabaseBefore } from '../helpers/migrations-before.js';

/**
 * 035 on a database that counted caps in 032's fixed windows: each device's pushes of the windows still open become
 * send times at the latest instant they may have been sent, so the rolling caps admit no more than the fixed ones.
 */
describe('migration 035 (rolling frequency caps) on a database in use', () => {
  const db = useDatabaseBefore('035');

  it('turns the open windows into send times no earlier than they may have been, and forgets the closed ones', async () => {
    const pool = db.pool();
    await migrate(pool, db.before());
    const [a, b, c] = [
      '00000000-0000-4000-8000-00000000000a',
      '00000000-0000-4000-8000-00000000000b',
      '00000000-0000-4000-8000-00000000000c',
    ];
    const hour = "date_trunc('hour', now())";
    const day = "date_trunc('day', now())";
    await pool.query(`
      INSERT INTO device_cap_counts (device_id, window_seconds, window_start, count) VALUES
        ('${a}', 3600, ${hour}, 1), ('${a}', 86400, ${day}, 3),
        ('${b}', 86400, ${day}, 2),
        ('${c}', 3600, ${hour} - interval '1 hour', 1), ('${c}', 86400, ${day} - interval '1 day', 5)`);

    const { rows: open } = await pool.query<{ start: Date }>(
      `SELECT window_start AS start FROM device_cap_counts WHERE device_id = $1 AND window_seconds = 3600`,
      [a],
    );
    const beforeHour = open[0]!.start.getTime() - 1;
    const migratedAt = Date.now();
    await migrate(pool);
    const { rows } = await pool.query<{ device_id: string; sent_at: Date[]; last_sent_at: Date }>(
      `SELECT device_id, sent_at, last_sent_at FROM device_cap_sends ORDER BY device_id`,
    );
    // a: the hour's one at the migration, the day's other two just before the hour began; b: the day's two at the
    // migration; c: nothing open
    expect(rows.map((r) => r.device_id)).toEqual([a, b]);
    const [ra, rb] = rows.map((r) => r.sent_at.map((t) => t.getTime()));
    const atMigration = (t: number) => Math.abs(t - migratedAt) < 5_000;
    expect(atMigration(ra![0]!)).toBe(true);
    expect(ra!.slice(1)).toEqual([beforeHour, beforeHour]);
    expect(rb!.length === 2 && rb!.every(atMigration)).toBe(true);
    expect(rows.map((r) => r.last_sent_at.getTime())).toEqual([ra![0], rb![0]]);
    const { rows: gone } = await pool.query(`SELECT to_regclass('device_cap_counts') AS t`);
    expect(gone).toEqual([{ t: null }]);
  });
});

describe('migration 035 on an app whose cap is above what it now allows', () => {
  const db = useDatabaseBefore('035');

  it('keeps a cap set above 1,000 before at 1,000, the most send times a device now keeps', async () => {
    const pool = db.pool();
    await migrate(pool, db.before());
    const caps = [
      { limit: 5000, window: 'day' },
      { limit: 2, window: 'hour' },
    ];
    const { rows: apps } = await pool.query<{ id: string }>(
      `INSERT INTO apps (bundle_id, name, frequency_caps) VALUES ('com.example.caps', 'caps', $1) RETURNING id`,
      [JSON.stringify(caps)],
    );
    await migrate(pool);
    const { rows } = await pool.query(`SELECT frequency_caps FROM apps WHERE id = $1`, [apps[0]!.id]);
    expect(rows[0].frequency_caps).toEqual([
      { limit: 1000, window: 'day' },
      { limit: 2, window: 'hour' },
    ]);
  });
});
