import type { Logger } from '../../platform/logger.js';
import { GatewayPool, type AppPushCredentials, type GatewayPoolOptions } from '../pool.js';
import type { GatewayProvider } from '../provider.js';
import type { PushEnvironment, PushGateway, PushPlatform } from '../types.js';
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

/** An app's push credentials as stored, read for every batch so a change applies to the next one. */
export type CredentialsLookup = (appId: string) => Promise<AppPushCredentials | null>;

/**
 * The gateways of a delivery worker: one long-lived gateway per app, platform and environment, in worker
 * threads, or in the worker's own thread when `threads` is 0.
 */
export function createGatewayProvider(options: GatewayRuntimeOptions, log: Logger, credentialsOf: CredentialsLookup): GatewayProvider {
  if (options.threads === 0) {
    const pool = new GatewayPool({ ...options.pool, log });
    return new StoredCredentialsGateways(
      credentialsOf,
      (app, platform, environment) => pool.get(app, platform, environment),
      () => pool.close(),
    );
  }
  const threads = new GatewayThreads(options.threads, { pool: options.pool, logLevel: options.logLevel }, log, {
    entry: options.threadEntry ?? new URL('./thread-main.js', import.meta.url),
    closeTimeoutMs: options.closeTimeoutMs,
  });
  return new StoredCredentialsGateways(
    credentialsOf,
    (app, platform, environment) => threads.gateway(app, platform, environment),
    () => threads.close(),
  );
}

class StoredCredentialsGateways implements GatewayProvider {
  constructor(
    private readonly credentialsOf: CredentialsLookup,
    private readonly gatewayOf: (app: AppPushCredentials, platform: PushPlatform, environment: PushEnvironment) => PushGateway,
    readonly close: () => Promise<void>,
  ) {}

  async gatewayFor(appId: string, platform: PushPlatform, development: boolean): Promise<PushGateway | null> {
    const app = await this.credentialsOf(appId);
    if (!app) return null;
    return this.gatewayOf(app, platform, development ? 'development' : 'production');
  }
}
