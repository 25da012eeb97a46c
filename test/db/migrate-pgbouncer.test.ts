import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { startPgBouncer, type PgBouncer } from '../engines/pgbouncer.js';
import { freshDatabase } from '../system/proc.js';

const FILES = 6;

/**
 * Migrators whose connections go through PgBouncer in transaction mode, where consecutive statements of one client
 * may run on different server connections: a session advisory lock would be taken on one and released on another
 * (or taken again, re-entrantly, by another client that lands on it). Each file is applied once, and no lock is left.
 */
describe('migrations through PgBouncer in transaction mode', () => {
  let bouncer: PgBouncer;
  let database: Awaited<ReturnType<typeof freshDatabase>>;
  let dir: string;

  beforeAll(async () => {
    bouncer = await startPgBouncer({ serverUrl: inject('adminDatabaseUrl'), poolSize: 2 });
    database = await freshDatabase();
    dir = await mkdtemp(path.join(os.tmpdir(), 'pushd-migrations-'));
    for (let i = 1; i <= FILES; i++)
      // a table per file, filled slowly enough that the migrators' statements interleave
      await writeFile(path.join(dir, `9${String(i).padStart(2, '0')}_t.sql`), `CREATE TABLE mb_${i} (id int); SELECT pg_sleep(0.05);`);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
    await database?.drop();
    await bouncer?.stop();
  });

  it('concurrent migrators apply each file once and leave no advisory lock held', async () => {
    const pools = Array.from({ length: 5 }, () => new pg.Pool({ connectionString: bouncer.through(database.url), max: 2 }));
    try {
      const results = await Promise.all(pools.map((p) => migrate(p, dir)));
      expect(results.flat().sort()).toEqual(Array.from({ length: FILES }, (_, i) => `9${String(i + 1).padStart(2, '0')}_t.sql`));
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
    const direct = new pg.Client({ connectionString: database.url });
    await direct.connect();
    try {
      // pg_locks covers the whole server: other tests' databases hold locks of their own
      const held = await direct.query(`
        select count(*)::int as n
        from pg_locks
        where locktype = 'advisory'
          and database = (select oid from pg_database where datname = current_database())
      `);
      expect(held.rows[0].n).toBe(0);
    } finally {
      await direct.end();
    }
  });
});
