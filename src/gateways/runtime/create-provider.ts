import type { Config } from '../../platform/config.js';
import type { AppsRepository } from '../../db/repositories/apps.js';
import type { Platform } from '../../db/schema.js';
import { GatewayPool, gatewayPoolOptionsFromConfig, type AppPushCredentials } from '../pool.js';
import type { PushEnvironment, PushGateway } from '../types.js';
import type { Logger } from '../../platform/logger.js';
import type { GatewayProvider } from '../provider.js';
import { GatewayThreads } from './threads.js';

/**
 * The gateways of a delivery worker, from each app's stored credentials: one long-lived gateway per app,
 * platform and environment, in GATEWAY_THREADS worker threads, or in the worker's own thread when 0.
 */
export function createGatewayProvider(config: Config, log: Logger, apps: AppsRepository): GatewayProvider {
  if (config.GATEWAY_THREADS === 0) {
    const pool = new GatewayPool(gatewayPoolOptionsFromConfig(config, log));
    return new StoredCredentialsGateways(
      apps,
      (app, platform, environment) => pool.get(app, platform, environment),
      () => pool.close(),
    );
  }
  // the pool options are plain data (origins, limits), so they cross to the threads as they are
  const { log: _log, ...pool } = gatewayPoolOptionsFromConfig(config);
  const threads = new GatewayThreads(config.GATEWAY_THREADS, { pool, logLevel: config.LOG_LEVEL }, log);
  return new StoredCredentialsGateways(
    apps,
    (app, platform, environment) => threads.gateway(app, platform, environment),
    () => threads.close(),
  );
}

/** Looks up the app's credentials for every batch, so a credentials change applies to the next batch. */
class StoredCredentialsGateways implements GatewayProvider {
  constructor(
    private readonly apps: AppsRepository,
    private readonly gatewayOf: (app: AppPushCredentials, platform: Platform, environment: PushEnvironment) => PushGateway,
    readonly close: () => Promise<void>,
  ) {}

  async gatewayFor(appId: string, platform: Platform, development: boolean): Promise<PushGateway | null> {
    const app = await this.apps.findById(appId);
    if (!app) return null;
    return this.gatewayOf(
      { id: app.id, bundleId: app.bundle_id, apnsCredentials: app.apns_credentials, fcmCredentials: app.fcm_credentials },
      platform,
      development ? 'development' : 'production',
    );
  }
}
