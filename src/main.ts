import { ConfigError, loadConfig, redactedConfig } from './config.js';
import { createContext } from './context.js';
import { buildServer } from './http/server.js';
import { AppsRepository } from './db/repositories/apps.js';
import { createLogger } from './logger.js';
import { Metrics } from './metrics.js';
import { PooledGatewayProvider } from './queue/gateway-provider.js';
import { JobQueues } from './queue/queues.js';
import { startPipeline } from './queue/pipeline.js';
import { openDatabaseRuntime } from './runtime.js';

/**
 * Starts the service. ROLE=all runs the API and the workers in one process; api or worker runs one side,
 * so ops can scale them apart. SIGTERM/SIGINT: stop taking work, finish what is in flight, close.
 */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger(config.LOG_LEVEL);
  log.info({ config: redactedConfig(config) }, 'starting');

  const database = await openDatabaseRuntime(config, log);
  const queues = new JobQueues(
    config.REDIS_URL
      ? { kind: 'redis', redisUrl: config.REDIS_URL, databaseUrl: database.url, prefix: config.QUEUE_PREFIX }
      : { kind: 'postgres', databaseUrl: database.url, prefix: config.QUEUE_PREFIX },
  );
  const metrics = new Metrics();
  const workers = config.ROLE !== 'api';
  const gateways = workers ? new PooledGatewayProvider(config, log, new AppsRepository(database.handle.db)) : undefined;
  const pipeline = startPipeline(config, log, database.handle.db, queues, { workers, gateways, metrics });
  const ctx = createContext(config, log, database.handle.db, queues, pipeline.scheduler, metrics);

  const server = config.ROLE === 'worker' ? null : await buildServer(ctx);
  if (server) {
    const address = await server.listen({ port: config.PORT, host: config.HOST });
    log.info({ address, role: config.ROLE, queue: queues.conn.kind }, 'listening');
  } else {
    log.info({ role: config.ROLE, queue: queues.conn.kind }, 'worker running');
  }

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      log.error('shutdown timed out; exiting');
      process.exit(1);
    }, config.SHUTDOWN_TIMEOUT_MS);
    force.unref();
    try {
      await server?.close(); // stop accepting requests, let in-flight ones finish
      await pipeline.close(); // workers finish in-flight batches, gateways close
      await queues.close();
      await database.close();
      log.info('stopped');
      process.exit(0);
    } catch (err) {
      log.error({ err }, 'error during shutdown');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
