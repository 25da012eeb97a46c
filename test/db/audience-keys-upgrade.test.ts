import { createHash, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AudiencesRepository } from '../../src/db/repositories/audiences.js';
import { NotificationsRepository } from '../../src/db/repositories/notifications.js';
import { audienceSpec, canonicalFilters, stableStringify } from '../../src/domain/audience-spec.js';
import type { Filter } from '../../src/domain/filters.js';
import { seed, useDatabaseBefore } from './upgrade-support.js';

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
