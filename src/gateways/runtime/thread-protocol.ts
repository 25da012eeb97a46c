/** Messages between the delivery worker and its gateway threads (./threads.ts, ./thread-main.ts). */
import type { AppPushCredentials, GatewayPoolOptions } from '../pool.js';
import type { NotificationPush, PushEnvironment, PushOutcome, PushPlatform, WebPushKeys } from '../types.js';

export interface GatewayThreadData {
  pool: Omit<GatewayPoolOptions, 'log'>;
  logLevel: string;
}

export type ToGatewayThread =
  /** an app's credentials, posted once per change: the sends after it use them (messages arrive in order) */
  | { type: 'credentials'; app: AppPushCredentials }
  | {
      type: 'send';
      id: number;
      appId: string;
      platform: PushPlatform;
      environment: PushEnvironment;
      push: NotificationPush;
      tokens: string[];
      /** web devices' subscription keys, by position as tokens */
      keys?: (WebPushKeys | undefined)[];
    }
  | { type: 'close' };

export type FromGatewayThread = { type: 'sent'; id: number; outcomes: PushOutcome[] } | { type: 'closed' };
