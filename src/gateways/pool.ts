/**
 * Keeps one long-lived gateway per app + platform + environment, so HTTP/2 connections, APNs JWTs
 * and OAuth tokens are reused across batches. The credentials are part of the key (as a hash): when
 * an app's credentials change, the next `get` builds a new gateway and the old one is closed after
 * its in-flight sends finish. Missing or unusable credentials give a gateway that answers `failed`
 * for every token (reason `no_credentials` / `invalid_credentials: …`), so the worker handles them
 * like any other per-token outcome.
 */
import { createHash } from 'node:crypto';
import type { Logger } from '../platform/logger.js';
import { ApnsGateway, type ApnsGatewayOptions } from './apns.js';
import { CredentialsError, parseApnsCredentials, parseFcmServiceAccount } from '../domain/credentials.js';
import { FcmGateway, type FcmGatewayOptions } from './fcm.js';
import { parseVapidCredentials } from '../domain/web-push.js';
import { WebPushGateway } from './web-push.js';
import { parseHmsCredentials } from '../domain/hms.js';
import { HmsGateway } from './hms.js';
import type { NotificationPush, PushEnvironment, PushGateway, PushPlatform, PushResult, PushTarget } from './types.js';

export interface GatewayPoolOptions {
  apnsOriginProduction: string;
  apnsOriginSandbox: string;
  fcmOrigin: string;
  googleTokenUrl: string;
  /** HMS_ORIGIN and HMS_TOKEN_URL (Huawei Push Kit); Huawei's own when absent */
  hmsOrigin?: string;
  hmsTokenUrl?: string;
  /** WEB_PUSH_ALLOWED_ORIGINS */
  webPushAllowedOrigins?: readonly string[];
  log?: Logger;
  /** Tuning passed to every APNs gateway. */
  apns?: Pick<ApnsGatewayOptions, 'maxConnections' | 'maxInFlight' | 'requestTimeoutMs' | 'heartbeatMs'>;
  /** Tuning passed to every FCM gateway, and to the Web Push gateways per push-service origin. */
  fcm?: Pick<FcmGatewayOptions, 'maxConnections' | 'maxInFlight' | 'requestTimeoutMs'>;
}

/** What the pool needs of an app row (apps.bundle_id, apps.apns_credentials, apps.fcm_credentials). */
export interface AppPushCredentials {
  id: string;
  bundleId: string;
  apnsCredentials: unknown;
  fcmCredentials: unknown;
  /** the app's VAPID key pair (apps.web_push_credentials) */
  webPushCredentials?: unknown;
  /** the app's HMS app id and client secret (apps.hms_credentials) */
  hmsCredentials?: unknown;
}

const CREDENTIALS_OF: Record<PushPlatform, (app: AppPushCredentials) => unknown> = {
  ios: (app) => app.apnsCredentials,
  android: (app) => app.fcmCredentials,
  web: (app) => app.webPushCredentials,
  huawei: (app) => app.hmsCredentials,
};

export class GatewayPool {
  private readonly gateways = new Map<string, { version: string; gateway: PushGateway }>();
  private readonly retiring = new Set<Promise<void>>();
  private closed = false;

  constructor(private readonly options: GatewayPoolOptions) {}

  get(app: AppPushCredentials, platform: PushPlatform, environment: PushEnvironment): PushGateway {
    if (this.closed) return new UnavailableGateway('retry', 'gateway pool closed');
    // FCM has one environment; APNs has a sandbox and production origin.
    const key = `${app.id}|${platform}|${platform === 'ios' ? environment : '*'}`;
    const credentials = CREDENTIALS_OF[platform](app);
    const version = platform === 'ios' ? `${hash(credentials)}|${app.bundleId}` : hash(credentials);

    const cached = this.gateways.get(key);
    if (cached?.version === version) return cached.gateway;
    if (cached) this.retire(cached.gateway);

    const gateway = this.build(app, platform, environment, credentials);
    this.gateways.set(key, { version, gateway });
    return gateway;
  }

  private build(app: AppPushCredentials, platform: PushPlatform, environment: PushEnvironment, credentials: unknown): PushGateway {
    if (credentials === null || credentials === undefined) return new UnavailableGateway('failed', 'no_credentials');
    const log = this.options.log?.child({ appId: app.id, platform, environment });
    try {
      if (platform === 'ios') {
        const parsed = parseApnsCredentials(credentials);
        return new ApnsGateway({
          ...this.options.apns,
          credentials: parsed,
          topic: parsed.topic ?? app.bundleId,
          origin: environment === 'development' ? this.options.apnsOriginSandbox : this.options.apnsOriginProduction,
          ...(log && { log }),
        });
      }
      if (platform === 'web')
        return new WebPushGateway({
          ...this.options.fcm,
          credentials: parseVapidCredentials(credentials),
          allowedOrigins: this.options.webPushAllowedOrigins ?? [],
          ...(log && { log }),
        });
      if (platform === 'huawei')
        return new HmsGateway({
          ...this.options.fcm,
          credentials: parseHmsCredentials(credentials),
          origin: this.options.hmsOrigin ?? HMS_ORIGIN,
          tokenUrl: this.options.hmsTokenUrl ?? HMS_TOKEN_URL,
          ...(log && { log }),
        });
      return new FcmGateway({
        ...this.options.fcm,
        serviceAccount: parseFcmServiceAccount(credentials),
        origin: this.options.fcmOrigin,
        tokenUrl: this.options.googleTokenUrl,
        ...(log && { log }),
      });
    } catch (err) {
      const message = (err as Error).message;
      if (err instanceof CredentialsError) {
        // Credentials are validated when set; this only happens for rows written before validation.
        log?.error({ err: message }, 'stored push credentials are unusable');
        return new UnavailableGateway('failed', `invalid_credentials: ${message}`);
      }
      // A bad origin in the configuration (e.g. http://): permanent until the server is reconfigured.
      log?.error({ err: message }, 'push gateway cannot be built');
      return new UnavailableGateway('failed', `gateway_misconfigured: ${message}`);
    }
  }

  private retire(gateway: PushGateway): void {
    const closing = gateway.close().catch((err: unknown) => this.options.log?.warn({ err }, 'closing a replaced gateway failed'));
    this.retiring.add(closing);
    void closing.finally(() => this.retiring.delete(closing));
  }

  /** Closes every gateway after its in-flight sends finish. */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.gateways.values()].map((g) => g.gateway.close());
    this.gateways.clear();
    await Promise.allSettled([...all, ...this.retiring]);
  }
}

const HMS_ORIGIN = 'https://push-api.cloud.huawei.com';
const HMS_TOKEN_URL = 'https://oauth-login.cloud.huawei.com/oauth2/v3/token';

/** Answers the same outcome for every token (no credentials, closed pool). */
export class UnavailableGateway implements PushGateway {
  constructor(
    private readonly kind: 'failed' | 'retry',
    private readonly reason: string,
  ) {}

  async send(_push: NotificationPush, targets: PushTarget[]): Promise<PushResult[]> {
    return targets.map((t) => ({ deviceId: t.deviceId, outcome: { kind: this.kind, reason: this.reason } }));
  }

  async close(): Promise<void> {}
}

/** The batches of one credentials read share its objects: each is hashed once. */
const hashes = new WeakMap<object, string>();

function hash(value: unknown): string {
  if (typeof value !== 'object' || value === null) return digest(value);
  let known = hashes.get(value);
  if (known === undefined) hashes.set(value, (known = digest(value)));
  return known;
}

function digest(value: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify(value ?? null))
    .digest('base64url');
}
