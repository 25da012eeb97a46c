import { copyFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.js';
import { migrate, MIGRATIONS_DIR } from '../../src/db/migrate.js';
import { useDatabaseBefore as useMigrationsBefore } from '../helpers/migrations-before.js';

/** What the tests of an upgrade of day-partitioned tables share: a database before a migration, and its first rows. */

export const DAY_MS = 86_400_000;
export const dayOf = (at: Date) => at.toISOString().slice(0, 10);

/** The shipped migrations from `first` on, in the order they apply. */
async function laterMigrations(first: string): Promise<string[]> {
  return (await readdir(MIGRATIONS_DIR)).filter((f) => /^\d+_.*\.sql$/.test(f) && f >= first).sort();
}

/**
 * An app with `count` devices, its audience of all and a push to it, written in plain SQL as the previous schema
 * takes them: today's repositories write columns later migrations add.
 */
export async function seed({ pool }: DatabaseHandle, bundleId: string, count: number) {
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
 * A database of the describe block's own with the shipped migrations before `migration` (those numbered below its
 * number) applied, as a database of the release before it has them; `upgrade()` applies that migration and every
 * later one. The database and its directory of migrations are test/helpers/migrations-before.ts's.
 */
export function useDatabaseBefore(migration: string) {
  const database = useMigrationsBefore(migration.slice(0, migration.indexOf('_')));
  const state = {} as { handle: DatabaseHandle; upgrade(): Promise<void> };
  beforeAll(async () => {
    const { connectionString } = (database.pool() as unknown as { options: { connectionString: string } }).options;
    state.handle = openDatabase(connectionString, 4, 0);
    await migrate(state.handle.pool, database.before());
  });
  // runs before the helper's own afterAll (vitest runs them in reverse order), which drops the database
  afterAll(async () => {
    await state.handle?.close();
  });
  state.upgrade = async () => {
    const upgrade = await laterMigrations(migration);
    for (const file of upgrade) await copyFile(path.join(MIGRATIONS_DIR, file), path.join(database.before(), file));
    expect(await migrate(state.handle.pool, database.before())).toEqual(upgrade);
  };
  return state;
}
