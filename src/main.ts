import { Lifecycle, startPushd } from './app/start.js';
import { ConfigError, loadConfig, redactedConfig, type Config } from './platform/config.js';
import { createLogger, type Logger } from './platform/logger.js';

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
  const lifecycle = new Lifecycle();
  installShutdown(config, log, lifecycle);
  log.info({ config: redactedConfig(config) }, 'starting');

  const pushd = await startPushd(config, log, lifecycle);
  const queue = pushd.queues.conn.kind;
  if (!pushd.api) {
    log.info({ role: config.ROLE, queue }, 'worker running');
    return;
  }
  const address = await pushd.api.server.listen({ port: config.PORT, host: config.HOST });
  log.info({ address, role: config.ROLE, queue }, 'listening');
}

function installShutdown(config: Config, log: Logger, lifecycle: Lifecycle): void {
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      log.error({ component: lifecycle.closing }, 'shutdown timed out; exiting');
      process.exit(1);
    }, config.SHUTDOWN_TIMEOUT_MS);
    force.unref();
    const ok = await lifecycle.close(log);
    log.info('stopped');
    process.exit(ok ? 0 : 1);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
