import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';

// Two levels up from src/db: the package root's migrations/, or dist/migrations, which the build copies there.
export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations', import.meta.url));
// Files renamed since they were released: a database that applied the old name has applied the new one.
const RENAMED: Record<string, string> = { '010_delivery.sql': '003_delivery.sql' };
// Serialises migrations across processes (API and workers may start together).
const MIGRATION_LOCK = 0x70757368;

export class MigrationError extends Error {}

/**
 * Applies every numbered .sql file in migrations/ not yet applied, each in its own transaction. The lock that
 * serialises migrators is transaction-scoped: behind PgBouncer in transaction mode a session lock could be taken on
 * one server connection and released on another.
 */
export async function migrate(pool: pg.Pool, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = (await readdir(dir)).filter((f) => /^\d+_.*\.sql$/.test(f)).sort();
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await locked(client, async () => {
      await client.query(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
      );
      for (const [from, to] of Object.entries(RENAMED)) {
        await client.query('UPDATE schema_migrations SET version = $2 WHERE version = $1', [from, to]);
      }
    });
    const done = new Set((await client.query<{ version: string }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
    for (const file of files) {
      if (done.has(file)) continue;
      const sql = await readFile(path.join(dir, file), 'utf8');
      const ran = await locked(client, async () => {
        // another migrator may have applied it since `done` was read
        const found = await client.query('SELECT 1 FROM schema_migrations WHERE version = $1', [file]);
        if (found.rowCount) return false;
        await client.query(sql);
        await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [file]);
        return true;
      }).catch((err: unknown) => {
        throw new MigrationError(`migration ${file} failed: ${(err as Error).message}`);
      });
      if (ran) applied.push(file);
    }
  } finally {
    client.release();
  }
  return applied;
}

/** Runs `work` in a transaction that holds the migration lock. */
async function locked<T>(client: pg.PoolClient, work: () => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    const result = await work();
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
