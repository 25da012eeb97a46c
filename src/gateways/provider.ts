import type { Platform } from '../db/schema.js';
import type { PushGateway } from './types.js';

/** Gives the delivery worker the long-lived gateway of an app, platform and environment. */
export interface GatewayProvider {
  /** null when the app has no credentials for that platform. */
  gatewayFor(appId: string, platform: Platform, development: boolean): Promise<PushGateway | null>;
  close(): Promise<void>;
}
