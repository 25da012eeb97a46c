import type { Logger } from '../../platform/logger.js';
import { GatewayPool, type GatewayPoolOptions } from '../pool.js';
import type { GatewayProvider } from '../provider.js';
import { GatewayThreads } from './threads.js';

export interface GatewayRuntimeOptions {
  pool: Omit<GatewayPoolOptions, 'log'>;
  /** Worker threads that run the gateways; 0 runs them on the calling thread. */
  threads: number;
  logLevel: string;
  /** How long closing may wait for in-flight sends: within the process's own shutdown budget. */
  closeTimeoutMs: number;
  /** The module a gateway thread runs: by default the compiled thread-main.js beside this file. */
  threadEntry?: URL;
}

/**
 * The gateways of a process: one long-lived gateway per app, platform and environment, in worker threads, or in the
 * process's own thread when `threads` is 0. Delivery asks them with the app's credentials it read
 * (`DeliveryStore.credentialsOf`): nothing here reads or calls back.
 */
export function createGatewayProvider(options: GatewayRuntimeOptions, log: Logger): GatewayProvider {
  if (options.threads === 0) return new GatewayPool({ ...options.pool, log });
  return new GatewayThreads(options.threads, { pool: options.pool, logLevel: options.logLevel }, log, {
    entry: options.threadEntry ?? new URL('./thread-main.js', import.meta.url),
    closeTimeoutMs: options.closeTimeoutMs,
  });
}
