import type { AppPushCredentials } from './pool.js';
import type { PushEnvironment, PushGateway, PushPlatform } from './types.js';

/**
 * The process's long-lived gateways, one per app's credentials, platform and environment: a `GatewayPool` on the
 * calling thread, or `GatewayThreads` over the pools of worker threads.
 */
export interface GatewayProvider {
  get(app: AppPushCredentials, platform: PushPlatform, environment: PushEnvironment): PushGateway;
  close(): Promise<void>;
}
