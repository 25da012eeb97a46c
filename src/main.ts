import type { AddressInfo } from 'node:net';
import { Lifecycle, startPushd } from './app/start.js';
import { listenForMetrics } from './http/metrics-access.js';
import { LISTEN_BACKLOG } from './http/overload.js';
import { ConfigError, loadConfig, redactedConfig, type Config } from './platform/config.js';
import { createLogger, type Logger } from './platform/logger.js';

/**
 * Starts the service. ROLE=all runs the API and the workers in one process; api or worker runs one side,
 * so ops can scale them apart. SIGTERM/SIGINT/SIGHUP: stop taking work, finish what is in flight, close — in the
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
  const exit = installExits(config, log, lifecycle);
  log.info({ config: redactedConfig(config) }, 'starting');

  try {
    const pushd = await startPushd(config, log, lifecycle);
    const queue = pushd.queues.conn.kind;
    if (config.METRICS_BIND) {
      const listener = await listenForMetrics(pushd.metrics, { ...config.METRICS_BIND, token: config.METRICS_TOKEN });
      lifecycle.add('metrics listener', () => listener.close());
      log.info({ address: listener.address }, 'metrics listening');
    }
    if (!pushd.api) {
      log.info({ role: config.ROLE, queue }, 'worker running');
      return;
    }
    const address = await pushd.api.server.listen({ port: config.PORT, host: config.HOST, backlog: LISTEN_BACKLOG });
    const listening = pushd.api.server.server.address() as AddressInfo;
    pushd.api.ctx.admission.watchSockets(listening.port, listening.family === 'IPv6' ? 'IPv6' : 'IPv4');
    log.info({ address, role: config.ROLE, queue }, 'listening');
  } catch (err) {
    // what did start is closed as on a signal (the embedded PostgreSQL last), then the process exits 1
    log.fatal({ err }, 'start-up failed');
    process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
    exit('start-up failed', 1);
  }
}

const REPEAT_FORCES_AFTER_MS = 500;

/**
 * Every way out stops what would outlive the process (the embedded PostgreSQL runs in a session of its own): a
 * signal closes everything in order within SHUTDOWN_TIMEOUT_MS; past it, on a second signal, or on an error
 * nothing caught, the abort steps run and the process exits 1.
 */
function installExits(config: Config, log: Logger, lifecycle: Lifecycle): (reason: string, code: number) => void {
  let stoppingSince: number | undefined;
  let aborting: Promise<never> | undefined;
  const abort = (why: string) =>
    (aborting ??= (async () => {
      log.error({ component: lifecycle.closing }, why);
      await lifecycle.abort(log);
      process.exit(1);
    })());
  const shutdown = async (reason: string, code: number) => {
    if (stoppingSince !== undefined) {
      // one Ctrl-C can arrive twice at once (the terminal's, and npm's forward of it): only a later one forces
      if (Date.now() - stoppingSince >= REPEAT_FORCES_AFTER_MS) void abort(`${reason} again while shutting down; exiting`);
      return;
    }
    stoppingSince = Date.now();
    log.info({ reason }, 'shutting down');
    setTimeout(() => void abort('shutdown timed out; exiting'), config.SHUTDOWN_TIMEOUT_MS);
    const ok = await lifecycle.close(log);
    log.info('stopped');
    process.exit(ok ? code : 1);
  };
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => void shutdown(signal, 0));
  const crash = (err: unknown) => {
    log.fatal({ err }, 'uncaught error');
    void abort('uncaught error; exiting');
  };
  process.on('uncaughtException', crash);
  process.on('unhandledRejection', crash);
  return (reason, code) => void shutdown(reason, code);
}

main().catch((err) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
