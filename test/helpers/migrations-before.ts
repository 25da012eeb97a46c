import { randomBytes } from 'node:crypto';
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import { MIGRATIONS_DIR } from '../../src/db/migrate.js';

/**
 * A database of its own for a file that tests one migration on data in use: `pool()` reaches it, `before()` is a
 * directory of the shipped migrations numbered below `upTo` (migrate to it, write the old rows, then migrate all).
 */
export function useDatabaseBefore(upTo: string): { pool: () => pg.Pool; before: () => string } {
  const adminUrl = inject('adminDatabaseUrl');
  const name = `t_m${upTo}_${randomBytes(4).toString('hex')}`;
  let pool: pg.Pool;
  let before: string;
  beforeAll(async () => {
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    pool = new pg.Pool({ connectionString: url.toString() });
    before = await mkdtemp(path.join(os.tmpdir(), `pushd-migrations-before-${upTo}-`));
    for (const file of await readdir(MIGRATIONS_DIR)) {
      if (file.endsWith('.sql') && file < upTo) await copyFile(path.join(MIGRATIONS_DIR, file), path.join(before, file));
    }
  });
  afterAll(async () => {
    await pool?.end();
    await rm(before, { recursive: true, force: true });
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  });
  return { pool: () => pool, before: () => before };
}
