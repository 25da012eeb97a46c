import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { loadConfig, type Config } from '../../src/platform/config.js';
import { createContext, type AppContext } from '../../src/app/context.js';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.js';
import { migrate } from '../../src/db/migrate.js';
import { buildServer } from '../../src/http/server.js';
import { createLogger } from '../../src/platform/logger.js';
import { AppsRepository } from '../../src/db/repositories/apps.js';
import { Metrics } from '../../src/platform/metrics.js';
import { createGatewayProvider } from '../../src/gateways/runtime/create-provider.js';
import { startPipeline, type Pipeline } from '../../src/queue/pipeline.js';
import { JobQueues, type QueueBackendKind } from '../../src/queue/queues.js';
import { AppService } from '../../src/services/apps.js';

export type Server = Awaited<ReturnType<typeof buildServer>>;

export interface Harness {
  ctx: AppContext;
  server: Server;
  db: DatabaseHandle;
  databaseUrl: string;
  /** queue namespace of this harness; a worker process started by a test must use the same */
  queuePrefix: string;
  config: Config;
  pipeline: Pipeline;
  /** Creates an app with its three keys through the same service the CLI uses. */
  createApp(
    bundleId?: string,
  ): Promise<{ app: { id: string; bundle_id: string; name: string }; keys: { read: string; write: string; sdk: string } }>;
  close(): Promise<void>;
}

export const redisUrl = (): string | null => inject('redisUrl');

/** Basic credential header: username (empty or bundle id) and key. */
export function basic(key: string, username = ''): string {
  return `Basic ${Buffer.from(`${username}:${key}`).toString('base64')}`;
}

/**
 * A fresh database (migrated) and the real HTTP server on it; `queue` picks the BullMQ backend.
 * Workers run only when `workers` is set (delivery tests); env overrides go through the real config parser.
 */
export async function createHarness(
  opts: { queue?: QueueBackendKind; workers?: boolean; env?: Record<string, string> } = {},
): Promise<Harness> {
  const adminUrl = inject('adminDatabaseUrl');
  const name = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const databaseUrl = withDatabase(adminUrl, name);

  const config = loadConfig({ DATABASE_URL: databaseUrl, LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent', ...opts.env });
  const log = createLogger(config.LOG_LEVEL);
  const db = openDatabase(databaseUrl);
  await migrate(db.pool);
  const kind = opts.queue ?? 'postgres';
  const rUrl = redisUrl();
  if (kind === 'redis' && !rUrl) throw new Error('redis harness requested without Redis');
  const queues = new JobQueues({ kind, databaseUrl, redisUrl: rUrl ?? undefined, prefix: name });
  const metrics = new Metrics();
  const workers = opts.workers ?? false;
  const gateways = workers ? createGatewayProvider(config, log, new AppsRepository(db.db)) : undefined;
  const pipeline = startPipeline(config, log, db.db, queues, { workers, gateways, metrics });
  const ctx = createContext(config, log, db.db, queues, pipeline.scheduler, metrics);
  const server = await buildServer(ctx);
  await server.ready();

  return {
    ctx,
    server,
    db,
    databaseUrl,
    queuePrefix: name,
    config,
    pipeline,
    createApp: (bundleId = `com.test.${randomBytes(4).toString('hex')}`) => new AppService(db.db).createApp(bundleId),
    async close() {
      await server.close();
      await pipeline.close();
      await queues.close();
      await db.close();
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
      await a.end();
    },
  };
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
