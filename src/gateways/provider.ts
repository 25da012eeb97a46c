import type { PushGateway, PushPlatform } from './types.js';

/** Gives the delivery worker the long-lived gateway of an app, platform and environment. */
export interface GatewayProvider {
  /** null when the app has no credentials for that platform. */
  gatewayFor(appId: string, platform: PushPlatform, development: boolean): Promise<PushGateway | null>;
  close(): Promise<void>;
}
