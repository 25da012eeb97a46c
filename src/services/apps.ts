import type { Db } from '../db/database.js';
import { ApiKeysRepository, AppsRepository, type AppSummary, type KeyWithApp } from '../db/repositories/apps.js';
import type { SecretsKeyring } from '../domain/secrets.js';
import type { KeyRole } from '../db/schema.js';
import { ConflictError, NotFoundError, ValidationError } from '../domain/errors.js';
import { parseApnsCredentials, parseFcmServiceAccount, type ApnsCredentials, type FcmServiceAccount } from '../domain/credentials.js';
import { generateApiKey, hashApiKey, KEY_ROLES, keyHint } from '../domain/keys.js';
import { generateIdentitySecret } from '../domain/identity.js';
import { isUuid } from '../domain/cursor.js';
import { isTimeZone } from '../domain/schedule.js';
import { GroupRunner } from '../platform/group-runner.js';
import type { AppChanges, FollowedCache } from '../db/app-changes.js';
import { generateVapidCredentials, parseVapidCredentials } from '../domain/web-push.js';
import type { QuietHours } from '../domain/quiet-hours.js';
import type { FrequencyCap } from '../domain/frequency-caps.js';
import { parseHmsCredentials } from '../domain/hms.js';

const BUNDLE_ID = /^[A-Za-z0-9][A-Za-z0-9.-]{0,254}$/;

/** An app's limits on when and how much its notifications send (`pushd app set-limits`, `/v6/app`). */
export interface AppLimits {
  app_id: string;
  max_per_minute: number | null;
  default_time_zone: string | null;
  quiet_hours: QuietHours | null;
  frequency_caps: FrequencyCap[] | null;
}

/** Apps and their keys: keys are shown once, at creation; only their hash is stored. */
export class AppService {
  private readonly apps: AppsRepository;
  private readonly keys: ApiKeysRepository;

  private readonly keyLookups: GroupRunner<Buffer, KeyWithApp | undefined>;
  /** the active keys found, by hash in hex (none kept: every lookup reads the database) */
  private readonly activeKeys: FollowedCache<string, KeyWithApp> | null;
  /** each app's VAPID public key, by app id ('' when it has none) */
  private readonly vapidKeys: FollowedCache<string, string> | null;

  constructor(
    private readonly db: Db,
    /** seals what is stored, opens what is read: the apps' credentials and identity secrets */
    private readonly secrets: SecretsKeyring,
    /** the changes this process follows, to keep the active keys it found (none: the CLI) */
    private readonly changes: AppChanges | null = null,
  ) {
    this.apps = new AppsRepository();
    this.keys = new ApiKeysRepository();
    this.activeKeys = changes?.cache() ?? null;
    this.vapidKeys = changes?.cache() ?? null;
    this.keyLookups = new GroupRunner(
      async (hashes) => {
        const found = await this.keys.findActiveByHashes(this.db, hashes);
        return hashes.map((h) => {
          const key = found.get(h.toString('hex'));
          const secret = key?.identity_secret;
          try {
            return {
              status: 'fulfilled',
              value: key && { ...key, identity_secret: secret ? this.secrets.open(secret, 'identity_secret') : null },
            };
          } catch (err) {
            return { status: 'rejected', reason: err };
          }
        });
      },
      { maxInFlight: 1, maxGroup: 100 },
    );
  }

  /**
   * A new app with its keys and its identity secret, shown once; identity verification is on: the sdk key binds a
   * device to a user id or e-mail address only with its hash (src/domain/identity.ts).
   */
  async createApp(bundleId: string, name?: string): Promise<{ app: AppSummary; keys: Record<KeyRole, string>; identity_secret: string }> {
    if (!BUNDLE_ID.test(bundleId)) throw new ValidationError('bundle-id must be letters, digits, dots and dashes');
    if (await this.apps.findByBundleId(this.db, bundleId)) throw new ConflictError(`an app with bundle id ${bundleId} exists`);
    const identitySecret = generateIdentitySecret();
    return this.db.transaction().execute(async (trx) => {
      const app = await this.apps.create(trx, bundleId, name ?? bundleId, this.secrets.seal(identitySecret, 'identity_secret'));
      const keys = {} as Record<KeyRole, string>;
      for (const role of KEY_ROLES) {
        const key = generateApiKey();
        await this.keys.create(trx, app.id, role, hashApiKey(key), keyHint(key));
        keys[role] = key;
      }
      return { app, keys, identity_secret: identitySecret };
    });
  }

  /**
   * Identity verification of an app: `on` (a secret is made if it has none), `off` (the secret is kept, so turning
   * it on again accepts the hashes already issued), `rotate` (a new secret: hashes made with the old one no longer
   * bind a device). The answer carries the secret, except for `off`. Every process applies it once it hears the change.
   */
  async setIdentityVerification(
    appId: string,
    action: 'on' | 'off' | 'rotate',
  ): Promise<{ app_id: string; identity_verification: boolean; identity_secret?: string }> {
    const change =
      action === 'off'
        ? { on: false }
        : {
            ...(action === 'on' ? { on: true } : {}),
            secret: { value: this.secrets.seal(generateIdentitySecret(), 'identity_secret'), ifNone: action === 'on' },
          };
    const now = isUuid(appId) ? await this.apps.setIdentityVerification(this.db, appId, change) : undefined;
    if (!now) throw new NotFoundError('app');
    this.changes?.changed();
    return {
      app_id: appId,
      identity_verification: now.identity_verification,
      ...(action !== 'off' && now.identity_secret ? { identity_secret: this.secrets.open(now.identity_secret, 'identity_secret') } : {}),
    };
  }

  /**
   * What shapes when the app's notifications go out: a ceiling on its pushes a minute across all its
   * notifications and workers (null: none), and the time zone of its devices that have none (null: UTC).
   */
  async setLimits(
    appId: string,
    limits: {
      maxPerMinute?: number | null;
      defaultTimeZone?: string | null;
      quietHours?: QuietHours | null;
      frequencyCaps?: FrequencyCap[] | null;
    },
  ): Promise<AppLimits> {
    const { maxPerMinute, defaultTimeZone } = limits;
    if (maxPerMinute != null && !(Number.isInteger(maxPerMinute) && maxPerMinute >= 1))
      throw new ValidationError('max-per-minute must be a whole number of at least 1, or "none"');
    if (defaultTimeZone != null && !isTimeZone(defaultTimeZone))
      throw new ValidationError(`default-time-zone must be an IANA time zone such as Europe/Paris, got ${defaultTimeZone}`);
    if (!(await this.apps.setLimits(this.db, appId, limits).catch(() => false))) throw new NotFoundError('app');
    this.changes?.changed();
    return this.limitsOf(appId);
  }

  /** What `setLimits` sets, as the app has it now (read from the database, not a cache). */
  async limitsOf(appId: string): Promise<AppLimits> {
    const now = await this.apps.campaignSettings(this.db, appId);
    const frequency_caps = await this.apps.frequencyCapsOf(this.db, appId);
    return {
      app_id: appId,
      max_per_minute: now.max_per_minute,
      default_time_zone: now.default_time_zone,
      quiet_hours: now.quiet_hours,
      frequency_caps,
    };
  }

  async createKey(appId: string, role: string): Promise<{ app_id: string; role: KeyRole; key: string }> {
    if (!(KEY_ROLES as readonly string[]).includes(role)) throw new ValidationError(`role must be one of ${KEY_ROLES.join(', ')}`);
    if (!(await this.apps.findById(this.db, appId).catch(() => undefined))) throw new NotFoundError('app');
    const key = generateApiKey();
    await this.keys.create(this.db, appId, role as KeyRole, hashApiKey(key), keyHint(key));
    return { app_id: appId, role: role as KeyRole, key };
  }

  /** Stores an app's APNs or FCM credentials, validated first: a bad key is refused now, not at send time. */
  async setPushCredentials(appId: string, platform: 'apns', raw: unknown): Promise<ApnsCredentials>;
  async setPushCredentials(appId: string, platform: 'fcm', raw: unknown): Promise<FcmServiceAccount>;
  async setPushCredentials(appId: string, platform: 'apns' | 'fcm', raw: unknown): Promise<ApnsCredentials | FcmServiceAccount> {
    const credentials = platform === 'apns' ? parseApnsCredentials(raw) : parseFcmServiceAccount(raw);
    if (!(await this.apps.findById(this.db, appId).catch(() => undefined))) throw new NotFoundError('app');
    await this.apps.setCredentials(this.db, appId, platform, this.secrets.seal(JSON.stringify(credentials), `${platform}_credentials`));
    this.changes?.changed();
    return credentials;
  }

  /**
   * Gives the app a VAPID key pair for Web Push: the given one (checked to be one P-256 pair), else a new one. The
   * answer holds the subject and the public key, never the private key.
   */
  async setWebPush(
    appId: string,
    given: { subject: string; publicKey?: string | undefined; privateKey?: string | undefined },
  ): Promise<{ subject: string; public_key: string }> {
    if ((given.publicKey === undefined) !== (given.privateKey === undefined))
      throw new ValidationError('public-key and private-key go together: give both, or neither to generate a pair');
    const credentials =
      given.publicKey === undefined
        ? generateVapidCredentials(given.subject)
        : parseVapidCredentials({ subject: given.subject, public_key: given.publicKey, private_key: given.privateKey });
    const sealed = this.secrets.seal(JSON.stringify(credentials), 'web_push_credentials');
    if (!(await this.apps.setCredentials(this.db, appId, 'web_push', sealed).catch(() => false))) throw new NotFoundError('app');
    this.changes?.changed();
    return { subject: credentials.subject, public_key: credentials.public_key };
  }

  /** Gives the app its HMS credentials (Huawei Push Kit), checked first; the answer names the app id, never the secret. */
  async setHms(appId: string, given: { hmsAppId: string; clientSecret: string }): Promise<{ app_id: string }> {
    const credentials = parseHmsCredentials({ app_id: given.hmsAppId, client_secret: given.clientSecret });
    const sealed = this.secrets.seal(JSON.stringify(credentials), 'hms_credentials');
    if (!(await this.apps.setCredentials(this.db, appId, 'hms', sealed).catch(() => false))) throw new NotFoundError('app');
    this.changes?.changed();
    return { app_id: credentials.app_id };
  }

  /** The app's VAPID public key (base64url), which a web page subscribes with; 404 when it has none. */
  async vapidPublicKey(appId: string): Promise<string> {
    const read = async () => {
      const stored = await this.apps.webPushCredentials(this.db, appId);
      if (stored === undefined) return undefined;
      return stored === null ? '' : String(this.secrets.openJson(stored, 'web_push_credentials').public_key ?? '');
    };
    const key = this.vapidKeys ? await this.vapidKeys.get(appId, read) : await read();
    if (!key) throw new NotFoundError('web push key (pushd app set-web-push)');
    return key;
  }

  /**
   * The active key with this value and its app, or undefined (unknown or revoked); found by the key's hash, so a
   * key that is found matches. A key found is kept while the changes to keys are followed; the lookups of
   * concurrent requests share one query.
   */
  findActiveKey(key: string): Promise<KeyWithApp | undefined> {
    const hash = hashApiKey(key);
    if (!this.activeKeys) return this.keyLookups.submit(hash);
    return this.activeKeys.get(hash.toString('hex'), () => this.keyLookups.submit(hash));
  }

  async getApp(appId: string): Promise<AppSummary> {
    const app = await this.apps.findById(this.db, appId);
    if (!app) throw new NotFoundError('app');
    return { id: app.id, bundle_id: app.bundle_id, name: app.name };
  }

  async revokeKey(key: string): Promise<void> {
    const revoked = await this.keys.revokeByHash(this.db, hashApiKey(key));
    this.changes?.changed();
    if (!revoked) throw new NotFoundError('active key');
  }

  /**
   * Gives one key a rate limit of its own (an sdk key: per client address), or with null returns it to its
   * role's default. `perSecond` 0 means no limit.
   */
  async setKeyRateLimit(key: string, limit: { perSecond: number; burst: number } | null): Promise<void> {
    if (limit) {
      if (!Number.isFinite(limit.perSecond) || limit.perSecond < 0) throw new ValidationError('per-second must be a number >= 0');
      if (!Number.isInteger(limit.burst) || limit.burst < 1 || limit.burst > 2 ** 31 - 1) {
        throw new ValidationError('burst must be an integer >= 1');
      }
    }
    const set = await this.keys.setRateLimitByHash(this.db, hashApiKey(key), limit);
    this.changes?.changed();
    if (!set) throw new NotFoundError('active key');
  }

  listApps() {
    return this.apps.list(this.db);
  }
}
