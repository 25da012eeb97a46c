import { describe, expect, it } from 'vitest';
import { openDatabaseRuntime } from '../../src/app/runtime.js';
import { migrate } from '../../src/db/migrate.js';
import { parseApnsCredentials, parseFcmServiceAccount } from '../../src/domain/credentials.js';
import { generateVapidCredentials } from '../../src/domain/web-push.js';
import { SECRET_COLUMNS, sealedKeyId } from '../../src/domain/secrets.js';
import { ConfigError, loadConfig } from '../../src/platform/config.js';
import { createLogger } from '../../src/platform/logger.js';
import { TEST_SECRETS_KEY, testKeyring } from '../engines/secrets-key.js';
import { generateApnsKey, generateServiceAccount } from '../mocks/index.js';
import { useDatabaseBefore } from '../helpers/migrations-before.js';

/**
 * 046 on a database that stored its secrets plain (jsonb credentials, a hex identity secret): the first start seals
 * every value once under its key, what is opened is what was stored, and nothing plain can be written after.
 */
describe('migration 046 (secrets at rest) on a database in use', () => {
  const db = useDatabaseBefore('046');

  it('seals every plain secret at the first start, once, keeping each value', async () => {
    const pool = db.pool();
    expect((await migrate(pool, db.before())).at(-1)).toBe('045_batch_replica_identity.sql');
    const plain = {
      apns_credentials: { ...parseApnsCredentials(generateApnsKey().credentials) },
      fcm_credentials: { ...parseFcmServiceAccount(generateServiceAccount().json) },
      web_push_credentials: { ...generateVapidCredentials('mailto:ops@example.com') },
      hms_credentials: { app_id: '10000001', client_secret: 'an-hms-client-secret' },
      identity_secret: 'ab'.repeat(32),
    };
    const {
      rows: [app],
    } = await pool.query<{ id: string }>(
      `INSERT INTO apps (bundle_id, name, apns_credentials, fcm_credentials, web_push_credentials, hms_credentials,
         identity_secret, identity_verification)
       VALUES ('com.example.plain', 'Plain', $1, $2, $3, $4, $5, true) RETURNING id`,
      [plain.apns_credentials, plain.fcm_credentials, plain.web_push_credentials, plain.hms_credentials, plain.identity_secret],
    );
    // an app with no credentials, and one whose credential is JSON null, as jsonb could hold
    await pool.query(`INSERT INTO apps (bundle_id, name) VALUES ('com.example.bare', 'Bare')`);
    await pool.query(`INSERT INTO apps (bundle_id, name, fcm_credentials) VALUES ('com.example.null', 'Null', 'null'::jsonb)`);

    const url = (pool as unknown as { options: { connectionString: string } }).options.connectionString;
    const log = createLogger('silent');
    // on DATABASE_URL without a key the upgrade refuses, naming the setting, and leaves every value as it was
    await expect(openDatabaseRuntime(loadConfig({ DATABASE_URL: url }), log)).rejects.toThrow(ConfigError);
    await expect(openDatabaseRuntime(loadConfig({ DATABASE_URL: url }), log)).rejects.toThrow(/SECRETS_KEY/);
    expect((await pool.query(`SELECT identity_secret FROM apps WHERE id = $1`, [app!.id])).rows).toEqual([
      { identity_secret: plain.identity_secret },
    ]);

    const config = loadConfig({ DATABASE_URL: url, SECRETS_KEY: TEST_SECRETS_KEY, LOG_LEVEL: 'silent' });
    const first = await openDatabaseRuntime(config, log);
    await first.close();
    const keyring = testKeyring();
    const { rows } = await pool.query<Record<string, string | null>>(
      `SELECT bundle_id, ${SECRET_COLUMNS.join(', ')} FROM apps ORDER BY bundle_id`,
    );
    const byBundle = new Map(rows.map((r) => [r.bundle_id, r]));
    const sealed = byBundle.get('com.example.plain')!;
    for (const column of SECRET_COLUMNS) {
      expect(sealedKeyId(sealed[column]!), column).toBe(keyring.currentId);
      const opened = keyring.open(sealed[column]!, column);
      expect(column === 'identity_secret' ? opened : JSON.parse(opened), column).toEqual(plain[column]);
    }
    expect(SECRET_COLUMNS.map((c) => byBundle.get('com.example.bare')![c])).toEqual([null, null, null, null, null]);
    expect(byBundle.get('com.example.null')!.fcm_credentials).toBeNull();

    // a later start finds nothing plain: the same sealed values, not sealed again
    const second = await openDatabaseRuntime(config, log);
    await second.close();
    const again = await pool.query(`SELECT ${SECRET_COLUMNS.join(', ')} FROM apps WHERE id = $1`, [app!.id]);
    expect(again.rows[0]).toEqual(Object.fromEntries(SECRET_COLUMNS.map((c) => [c, sealed[c]])));

    // what is written from now on must be sealed
    await expect(pool.query(`UPDATE apps SET identity_secret = 'plain' WHERE id = $1`, [app!.id])).rejects.toThrow(/apps_secrets_sealed/);
    await expect(pool.query(`UPDATE apps SET hms_credentials = '{"app_id": "1"}' WHERE id = $1`, [app!.id])).rejects.toThrow(
      /apps_secrets_sealed/,
    );
  });
});
