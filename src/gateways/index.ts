/** Public surface of the push gateways; the delivery worker needs nothing else. */
export type {
  NotificationPush,
  PushEnvironment,
  PushGateway,
  PushOutcome,
  PushOutcomeKind,
  PushPlatform,
  PushResult,
  PushTarget,
} from './types.js';
export { GatewayPool, UnavailableGateway, gatewayPoolOptionsFromConfig, type AppPushCredentials, type GatewayPoolOptions } from './pool.js';
export { ApnsGateway, type ApnsGatewayOptions } from './apns.js';
export { FcmGateway, type FcmGatewayOptions } from './fcm.js';
export {
  CredentialsError,
  parseApnsCredentials,
  parseFcmServiceAccount,
  type ApnsCredentials,
  type FcmServiceAccount,
} from './credentials.js';
export { classify, OUTCOME_TABLE, parseRetryAfter, type Classification, type GatewayAnswer } from './outcomes.js';
