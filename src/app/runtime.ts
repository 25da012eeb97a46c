import type { Config } from '../platform/config.js';
import { openDatabase, type DatabaseHandle } from '../db/database.js';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../db/embedded.js';
import { migrate } from '../db/migrate.js';
import type { Logger } from '../platform/logger.js';

export interface DatabaseRuntime {
  url: string;
  handle: DatabaseHandle;
  embedded?: EmbeddedDatabase;
  close(): Promise<void>;
}

/** Connects to DATABASE_URL, or starts the embedded PostgreSQL under DATA_DIR; applies migrations. */
export async function openDatabaseRuntime(
  config: Config,
  log: Logger,
  opts: { migrate: boolean } = { migrate: true },
): Promise<DatabaseRuntime> {
  let embedded: EmbeddedDatabase | undefined;
  let url = config.DATABASE_URL;
  if (!url) {
    embedded = await startEmbeddedPostgres(config.dataDir, config.EMBEDDED_PG_PORT, log);
    url = embedded.url;
  }
  const handle = openDatabase(url, 10, config.DATABASE_PREPARE_THRESHOLD);
  try {
    if (opts.migrate) {
      const applied = await migrate(handle.pool);
      if (applied.length) log.info({ applied }, 'migrations applied');
    }
  } catch (err) {
    await handle.close();
    await embedded?.stop();
    throw err;
  }
  // once, whoever asks first (an orderly shutdown, or a signal during a CLI command): the others wait for it
  let closing: Promise<void> | undefined;
  return {
    url,
    handle,
    embedded,
    close() {
      closing ??= (async () => {
        try {
          await handle.close();
        } finally {
          await embedded?.stop();
        }
      })();
      return closing;
    },
  };
}
