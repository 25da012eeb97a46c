import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate, MigrationError, MIGRATIONS_DIR } from '../../src/db/migrate.js';
import { testKeyring } from '../engines/secrets-key.js';
import { waitFor } from '../engines/engines.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { useDatabaseBefore } from '../helpers/migrations-before.js';

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

/** 019 on a database of the schema before it, holding an app with credentials, keys and a device bound to a user. */
describe('migration 019 (identity verification) on a database in use', () => {
  const db = useDatabaseBefore('019');

  it('leaves existing apps with verification off, their data untouched, and announces changes of both columns', async () => {
    const pool = db.pool();
    expect((await migrate(pool, db.before())).at(-1)).toBe('018_documents_without_statistics.sql');
    const {
      rows: [app],
    } = await pool.query<{ id: string }>(
      `INSERT INTO apps (bundle_id, name, apns_credentials) VALUES ('com.example.old', 'Old', '{"keyId": "K"}') RETURNING id`,
    );
    await pool.query(`INSERT INTO api_keys (app_id, role, key_hash, key_hint) VALUES ($1, 'sdk', '\\x01', 'abcd')`, [app!.id]);
    await pool.query(`INSERT INTO devices (app_id, platform, token, user_id) VALUES ($1, 'ios', 'tok', 'u-42')`, [app!.id]);

    expect((await migrate(pool))[0]).toBe('019_identity_verification.sql');
    const { rows } = await pool.query(
      `SELECT a.identity_verification, a.identity_secret, a.apns_credentials, d.user_id
       FROM apps a JOIN devices d ON d.app_id = a.id WHERE a.id = $1`,
      [app!.id],
    );
    // the credentials as text since 046, until a start seals them (test/db/secrets-upgrade.test.ts)
    expect(rows).toEqual([{ identity_verification: false, identity_secret: null, apns_credentials: '{"keyId": "K"}', user_id: 'u-42' }]);
    // on needs a secret
    await expect(pool.query(`UPDATE apps SET identity_verification = true WHERE id = $1`, [app!.id])).rejects.toThrow(
      /apps_identity_verification_has_secret/,
    );

    const listener = await pool.connect();
    try {
      const heard: string[] = [];
      listener.on('notification', (n) => heard.push(n.channel));
      await listener.query('LISTEN pushd_app_changes');
      // sealed, as what is written since 046 must be
      await pool.query(`UPDATE apps SET identity_secret = $2, apns_credentials = NULL WHERE id = $1`, [
        app!.id,
        testKeyring().seal('abc', 'identity_secret'),
      ]);
      await pool.query(`UPDATE apps SET identity_verification = true WHERE id = $1`, [app!.id]);
      await waitFor('both announcements', async () => heard.length >= 2, 5_000, 20);
      expect(heard).toEqual(['pushd_app_changes', 'pushd_app_changes']);
    } finally {
      listener.release();
    }
  });
});
