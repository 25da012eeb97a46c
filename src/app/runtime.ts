import type { Config } from '../platform/config.js';
import { openDatabase, type DatabaseHandle } from '../db/database.js';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../db/embedded.js';
import { migrate } from '../db/migrate.js';
import { ReadReplica } from '../db/read-replica.js';
import type { Logger } from '../platform/logger.js';
import { loadSecretsKeys, type SecretsKeySource } from '../platform/secrets-key.js';
import { SecretsService } from '../services/secrets.js';
import { AppService } from '../services/apps.js';
import { AuditService } from '../services/audit.js';
import { createRepositories } from '../services/deps.js';

export interface DatabaseRuntime {
  url: string;
  /** a session connection's URL, for LISTEN and the PostgreSQL queue backend (DATABASE_LISTEN_URL, else `url`) */
  listenUrl: string;
  handle: DatabaseHandle;
  /** the replica reads go to while it keeps up (DATABASE_READ_URL); null: they go to the primary */
  replica: ReadReplica | null;
  embedded?: EmbeddedDatabase;
  /** the keys that seal and open the apps' secrets, every stored one checked to open */
  secrets: SecretsKeySource;
  close(): Promise<void>;
}

/**
 * Connects to DATABASE_URL, or starts the embedded PostgreSQL under DATA_DIR; applies migrations, seals the secrets
 * stored plain before migration 046 and checks that this process opens every stored one. Without migrations (a
 * benchmark reaching the server to make its databases) none of that, nor the keys.
 */
export async function openDatabaseRuntime(config: Config, log: Logger): Promise<DatabaseRuntime>;
export async function openDatabaseRuntime(config: Config, log: Logger, opts: { migrate: false }): Promise<Omit<DatabaseRuntime, 'secrets'>>;
export async function openDatabaseRuntime(
  config: Config,
  log: Logger,
  opts: { migrate: boolean } = { migrate: true },
): Promise<Omit<DatabaseRuntime, 'secrets'> & { secrets?: SecretsKeySource }> {
  // before the database: a missing key stops start-up without starting anything
  const secrets = opts.migrate ? await loadSecretsKeys(config) : undefined;
  let embedded: EmbeddedDatabase | undefined;
  let url = config.DATABASE_URL;
  if (!url) {
    embedded = await startEmbeddedPostgres(config.dataDir, config.EMBEDDED_PG_PORT, log);
    url = embedded.url;
  }
  const handle = openDatabase(url, config.DATABASE_POOL_SIZE, config.DATABASE_PREPARE_THRESHOLD);
  try {
    if (opts.migrate) {
      const applied = await migrate(handle.pool);
      if (applied.length) log.info({ applied }, 'migrations applied');
    }
    if (secrets) {
      const check = await secretsService(handle.db, secrets).prepare();
      if (check.sealed) log.info({ sealed: check.sealed }, 'secrets stored plain are now sealed');
    }
  } catch (err) {
    await handle.close();
    await embedded?.stop();
    throw err;
  }
  let replica: ReadReplica | null = null;
  // only the API reads there: a worker keeps no replica connection
  if (config.DATABASE_READ_URL && config.ROLE !== 'worker') {
    const replicaHandle = openDatabase(config.DATABASE_READ_URL, config.DATABASE_POOL_SIZE, config.DATABASE_PREPARE_THRESHOLD);
    replica = new ReadReplica({ replica: replicaHandle, primary: handle.pool, maxLagSeconds: config.READ_MAX_LAG_SECONDS, log });
    await replica.start();
  }
  // once, whoever asks first (an orderly shutdown, or a signal during a CLI command): the others wait for it
  let closing: Promise<void> | undefined;
  return {
    url,
    listenUrl: config.DATABASE_LISTEN_URL ?? url,
    handle,
    replica,
    embedded,
    ...(secrets ? { secrets } : {}),
    close() {
      closing ??= (async () => {
        try {
          await replica?.close();
          await handle.close();
        } finally {
          await embedded?.stop();
        }
      })();
      return closing;
    },
  };
}

function secretsService(db: DatabaseHandle['db'], secrets: SecretsKeySource): SecretsService {
  return new SecretsService({ db, repos: createRepositories(), keyring: secrets.keyring, keyFrom: secrets.currentFrom });
}

/** The operator's services on a runtime's database (the command line's, a backup's): no app changes followed. */
export function operatorServices(rt: DatabaseRuntime): { apps: AppService; audit: AuditService; secrets: SecretsService } {
  const db = rt.handle.db;
  const repos = createRepositories();
  return {
    apps: new AppService({ db, repos, secrets: rt.secrets.keyring }),
    audit: new AuditService({ db, readDb: db, repos }),
    secrets: secretsService(rt.handle.db, rt.secrets),
  };
}
