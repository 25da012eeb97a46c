import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate, MigrationError, MIGRATIONS_DIR } from '../../src/db/migrate.js';
import { createHarness, type Harness } from '../helpers/harness.js';

/** migrate() on a directory of its own: a failing file throws MigrationError and leaves nothing of itself. */
describe('migrations', () => {
  let h: Harness;
  let dir: string;
  beforeAll(async () => {
    h = await createHarness();
    dir = await mkdtemp(path.join(os.tmpdir(), 'pushd-migrations-'));
  });
  afterAll(async () => {
    await h?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const tables = async () =>
    (
      await h.db.pool.query<{ t: string }>(
        "SELECT table_name AS t FROM information_schema.tables WHERE table_schema = 'public' AND table_name LIKE 'mt_%'",
      )
    ).rows
      .map((r) => r.t)
      .sort();
  const applied = async () =>
    (await h.db.pool.query<{ version: string }>("SELECT version FROM schema_migrations WHERE version LIKE '9%'")).rows
      .map((r) => r.version)
      .sort();

  it('applies nothing of a failing file, throws MigrationError naming it, and resumes once it is fixed', async () => {
    await writeFile(path.join(dir, '901_ok.sql'), 'CREATE TABLE mt_ok (id int);');
    // the first statement would succeed alone: the whole file must roll back
    await writeFile(
      path.join(dir, '902_bad.sql'),
      'CREATE TABLE mt_partial (id int);\nINSERT INTO mt_partial VALUES (1);\nCREATE TABLE mt_broken (id int,);',
    );
    await writeFile(path.join(dir, '903_later.sql'), 'CREATE TABLE mt_later (id int);');
    await writeFile(path.join(dir, 'README.md'), 'not a migration');

    const err = await migrate(h.db.pool, dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MigrationError);
    expect((err as Error).message).toMatch(/^migration 902_bad\.sql failed: syntax error/);
    expect(await tables()).toEqual(['mt_ok']);
    expect(await applied()).toEqual(['901_ok.sql']);

    await writeFile(path.join(dir, '902_bad.sql'), 'CREATE TABLE mt_partial (id int);');
    expect(await migrate(h.db.pool, dir)).toEqual(['902_bad.sql', '903_later.sql']);
    expect(await tables()).toEqual(['mt_later', 'mt_ok', 'mt_partial']);
    expect(await migrate(h.db.pool, dir)).toEqual([]);
  });

  it('the shipped migrations are all applied by the harness and re-running applies none', async () => {
    expect(await migrate(h.db.pool, MIGRATIONS_DIR)).toEqual([]);
  });

  it('a database that applied a migration under its released name does not apply it again after a rename', async () => {
    await h.db.pool.query(`UPDATE schema_migrations SET version = '010_delivery.sql' WHERE version = '003_delivery.sql'`);
    expect(await migrate(h.db.pool, MIGRATIONS_DIR)).toEqual([]);
    const versions = (await h.db.pool.query<{ version: string }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version);
    expect(versions).toContain('003_delivery.sql');
    expect(versions).not.toContain('010_delivery.sql');
  });

  it('concurrent migrators apply each file once', async () => {
    const h2 = await createHarness();
    try {
      await h2.db.pool.query('DROP TABLE IF EXISTS schema_migrations');
      const d = await mkdtemp(path.join(os.tmpdir(), 'pushd-migrations-'));
      await writeFile(path.join(d, '950_once.sql'), 'CREATE TABLE mt_once (id int);');
      const results = await Promise.all(Array.from({ length: 5 }, () => migrate(h2.db.pool, d)));
      expect(results.flat()).toEqual(['950_once.sql']);
      await rm(d, { recursive: true, force: true });
    } finally {
      await h2.close();
    }
  });
});
