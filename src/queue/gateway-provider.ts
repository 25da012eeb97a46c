import type { Config } from '../config.js';
import type { AppsRepository } from '../db/repositories/apps.js';
import type { Platform } from '../db/schema.js';
import { GatewayPool, gatewayPoolOptionsFromConfig } from '../gateways/pool.js';
import type { PushGateway } from '../gateways/types.js';
import type { Logger } from '../logger.js';
import type { GatewayProvider } from './gateways.js';

/** Gateways from the app's stored credentials, one long-lived gateway per app, platform and environment. */
export class PooledGatewayProvider implements GatewayProvider {
  private readonly pool: GatewayPool;

  constructor(
    config: Config,
    log: Logger,
    private readonly apps: AppsRepository,
  ) {
    this.pool = new GatewayPool(gatewayPoolOptionsFromConfig(config, log));
  }

  async gatewayFor(appId: string, platform: Platform, development: boolean): Promise<PushGateway | null> {
    const app = await this.apps.findById(appId);
    if (!app) return null;
    return this.pool.get(
      { id: app.id, bundleId: app.bundle_id, apnsCredentials: app.apns_credentials, fcmCredentials: app.fcm_credentials },
      platform,
      development ? 'development' : 'production',
    );
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
