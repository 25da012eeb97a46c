import { loadConfig } from '../../src/platform/config.js';
import { ensureDatabase } from '../../src/db/embedded.js';
import { createLogger } from '../../src/platform/logger.js';
import { openDatabaseRuntime } from '../../src/app/runtime.js';

/**
 * A benchmark database that survives between runs (seeding a million devices takes minutes): on
 * DATABASE_URL's server, or the embedded PostgreSQL under .bench-data; created when missing, never dropped.
 */
export async function benchDatabaseKept(name: string): Promise<{ url: string; close(): Promise<void> }> {
  const config = loadConfig({ ...process.env, DATA_DIR: process.env.DATA_DIR ?? '.bench-data', LOG_LEVEL: 'warn' });
  const runtime = await openDatabaseRuntime(config, createLogger('warn'), { migrate: false });
  const admin = new URL(runtime.url);
  admin.pathname = '/postgres';
  await ensureDatabase(admin.toString(), name);
  const url = new URL(runtime.url);
  url.pathname = `/${name}`;
  await runtime.handle.close();
  return { url: url.toString(), close: () => runtime.embedded?.stop() ?? Promise.resolve() };
}
