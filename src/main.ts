import { ConfigError, loadConfig, redactedConfig, type Config } from './platform/config.js';
import { createContext } from './app/context.js';
import { AppsRepository } from './db/repositories/apps.js';
import { buildServer } from './http/server.js';
import { createLogger, type Logger } from './platform/logger.js';
import { Metrics } from './platform/metrics.js';
import { createGatewayProvider } from './gateways/runtime/create-provider.js';
import { startPipeline } from './queue/pipeline.js';
import { JobQueues } from './queue/queues.js';
import { openDatabaseRuntime } from './app/runtime.js';

/**
 * Starts the service. ROLE=all runs the API and the workers in one process; api or worker runs one side,
 * so ops can scale them apart. SIGTERM/SIGINT: stop taking work, finish what is in flight, close — in the
 * reverse order of start-up. Signal handlers are installed first, so a signal during start-up also
 * closes whatever was already started.
 */
async function main(): Promise<void> {
  let config: Config;
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
  const closers: { name: string; close: () => Promise<unknown> }[] = [];
  installShutdown(config, log, closers);
  log.info({ config: redactedConfig(config) }, 'starting');

  const database = await openDatabaseRuntime(config, log);
  closers.push({ name: 'database', close: () => database.close() });
  const queues = new JobQueues(
    config.REDIS_URL
      ? { kind: 'redis', redisUrl: config.REDIS_URL, databaseUrl: database.url, prefix: config.QUEUE_PREFIX }
      : { kind: 'postgres', databaseUrl: database.url, prefix: config.QUEUE_PREFIX },
  );
  closers.push({ name: 'queues', close: () => queues.close() });
  const metrics = new Metrics();
  const workers = config.ROLE !== 'api';
  const gateways = workers ? createGatewayProvider(config, log, new AppsRepository(database.handle.db)) : undefined;
  const pipeline = startPipeline(config, log, database.handle.db, queues, { workers, gateways, metrics });
  // workers finish their in-flight batches, then gateways close
  closers.push({ name: 'pipeline', close: () => pipeline.close() });
  const ctx = createContext(config, log, database.handle.db, queues, pipeline.scheduler, metrics);

  if (config.ROLE === 'worker') {
    log.info({ role: config.ROLE, queue: queues.conn.kind }, 'worker running');
    return;
  }
  const server = await buildServer(ctx);
  closers.push({ name: 'http', close: () => server.close() }); // stop accepting, let in-flight requests finish
  const address = await server.listen({ port: config.PORT, host: config.HOST });
  log.info({ address, role: config.ROLE, queue: queues.conn.kind }, 'listening');
}

function installShutdown(config: Config, log: Logger, closers: { name: string; close: () => Promise<unknown> }[]): void {
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
    let failed = false;
    for (const c of closers.reverse()) {
      try {
        await c.close();
      } catch (err) {
        failed = true;
        log.error({ err, component: c.name }, 'error during shutdown');
      }
    }
    log.info('stopped');
    process.exit(failed ? 1 : 0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
