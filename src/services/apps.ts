import type { AuditRepository } from '../db/repositories/audit.js';
import type { Db } from '../db/database.js';
import type { ApiKeysRepository, AppsRepository, AppSummary, KeyListing, KeyWithApp } from '../db/repositories/apps.js';
import type { Database, KeyRole } from '../db/schema.js';
import type { Transaction } from 'kysely';
import type { Sealed, SecretsKeyring } from '../domain/secrets.js';
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
import { CLI_ACTOR, type Actor, type AppSettingName } from '../domain/audit.js';
import type { ServiceDeps } from './deps.js';

const BUNDLE_ID = /^[A-Za-z0-9][A-Za-z0-9.-]{0,254}$/;

/** How far behind a key's last use `key list` may be: each process writes a key's use at most this often. */
export const KEY_USE_EVERY_SECONDS = 300;

/** An app's limits on when and how much its notifications send (`pushd app set-limits`, `/v6/app`). */
export interface AppLimits {
  app_id: string;
  max_per_minute: number | null;
  default_time_zone: string | null;
  quiet_hours: QuietHours | null;
  frequency_caps: FrequencyCap[] | null;
}

export type AppServiceDeps = Pick<ServiceDeps, 'db' | 'repos'> & {
  /** seals what is stored, opens what is read: the apps' credentials and identity secrets */
  secrets: SecretsKeyring;
  /** the changes this process follows, to keep the active keys it found (none: the CLI) */
  changes?: AppChanges | null;
};

/**
 * Apps and their keys: keys are shown once, at creation; only their hash is stored. Each change is recorded in the
 * audit log in its transaction, as made by `actor` (the request's key; without one, the operator's command line).
 */
export class AppService {
  private readonly apps: AppsRepository;
  private readonly keys: ApiKeysRepository;
  private readonly audit: AuditRepository;

  private readonly keyLookups: GroupRunner<Buffer, KeyWithApp | undefined>;
  /** when this process last noted each key's use, by key id */
  private readonly usesNoted = new Map<string, number>();
  /** the active keys found, by hash in hex (none kept: every lookup reads the database) */
  private readonly activeKeys: FollowedCache<string, KeyWithApp> | null;
  /** each app's VAPID public key, by app id ('' when it has none) */
  private readonly vapidKeys: FollowedCache<string, string> | null;

  private readonly db: Db;
  private readonly secrets: SecretsKeyring;
  private readonly changes: AppChanges | null;

  constructor(deps: AppServiceDeps) {
    this.db = deps.db;
    this.secrets = deps.secrets;
    this.changes = deps.changes ?? null;
    this.apps = deps.repos.apps;
    this.keys = deps.repos.apiKeys;
    this.audit = deps.repos.audit;
    this.activeKeys = this.changes?.cache() ?? null;
    this.vapidKeys = this.changes?.cache() ?? null;
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
  async createApp(
    bundleId: string,
    name?: string,
    actor: Actor = CLI_ACTOR,
  ): Promise<{ app: AppSummary; keys: Record<KeyRole, string>; identity_secret: string }> {
    if (!BUNDLE_ID.test(bundleId)) throw new ValidationError('bundle-id must be letters, digits, dots and dashes');
    if (await this.apps.findByBundleId(this.db, bundleId)) throw new ConflictError(`an app with bundle id ${bundleId} exists`);
    const identitySecret = generateIdentitySecret();
    return this.db.transaction().execute(async (trx) => {
      const app = await this.apps.create(trx, bundleId, name ?? bundleId, this.secrets.seal(identitySecret, 'identity_secret'));
      const keys = {} as Record<KeyRole, string>;
      const keyIds = {} as Record<KeyRole, string>;
      for (const role of KEY_ROLES) {
        const key = generateApiKey();
        keyIds[role] = (await this.keys.create(trx, app.id, role, hashApiKey(key), keyHint(key))).id;
        keys[role] = key;
      }
      await this.audit.recordChange(trx, actor, app.id, 'app.created', { bundle_id: app.bundle_id, name: app.name, key_ids: keyIds });
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
    actor: Actor = CLI_ACTOR,
  ): Promise<{ app_id: string; identity_verification: boolean; identity_secret?: string }> {
    const change =
      action === 'off'
        ? { on: false }
        : {
            ...(action === 'on' ? { on: true } : {}),
            secret: { value: this.secrets.seal(generateIdentitySecret(), 'identity_secret'), ifNone: action === 'on' },
          };
    const now = await this.inTransaction(appId, async (trx) => {
      const set = await this.apps.setIdentityVerification(trx, appId, change);
      if (set)
        await this.audit.recordChange(
          trx,
          actor,
          appId,
          action === 'rotate' ? 'identity_verification.rotated' : `identity_verification.${action}`,
          {},
        );
      return set;
    });
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
    actor: Actor = CLI_ACTOR,
  ): Promise<AppLimits> {
    const { maxPerMinute, defaultTimeZone } = limits;
    if (maxPerMinute != null && !(Number.isInteger(maxPerMinute) && maxPerMinute >= 1))
      throw new ValidationError('max-per-minute must be a whole number of at least 1, or "none"');
    if (defaultTimeZone != null && !isTimeZone(defaultTimeZone))
      throw new ValidationError(`default-time-zone must be an IANA time zone such as Europe/Paris, got ${defaultTimeZone}`);
    const changed = (Object.keys(SETTING_NAMES) as (keyof typeof SETTING_NAMES)[])
      .filter((k) => limits[k] !== undefined)
      .map((k) => SETTING_NAMES[k]);
    await this.inTransaction(appId, async (trx) => {
      const set = await this.apps.setLimits(trx, appId, limits);
      if (set) await this.audit.recordChange(trx, actor, appId, 'settings.changed', { changed });
      return set;
    });
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

  async createKey(appId: string, role: string, actor: Actor = CLI_ACTOR): Promise<{ app_id: string; role: KeyRole; key: string }> {
    if (!(KEY_ROLES as readonly string[]).includes(role)) throw new ValidationError(`role must be one of ${KEY_ROLES.join(', ')}`);
    const key = generateApiKey();
    await this.inTransaction(appId, async (trx) => {
      if (!(await this.apps.findById(trx, appId))) return undefined;
      const { id } = await this.keys.create(trx, appId, role as KeyRole, hashApiKey(key), keyHint(key));
      await this.audit.recordChange(trx, actor, appId, 'key.created', { key_id: id, role: role as KeyRole });
      return id;
    });
    return { app_id: appId, role: role as KeyRole, key };
  }

  /** Stores an app's APNs or FCM credentials, validated first: a bad key is refused now, not at send time. */
  async setPushCredentials(appId: string, platform: 'apns', raw: unknown, actor?: Actor): Promise<ApnsCredentials>;
  async setPushCredentials(appId: string, platform: 'fcm', raw: unknown, actor?: Actor): Promise<FcmServiceAccount>;
  async setPushCredentials(
    appId: string,
    platform: 'apns' | 'fcm',
    raw: unknown,
    actor: Actor = CLI_ACTOR,
  ): Promise<ApnsCredentials | FcmServiceAccount> {
    const credentials = platform === 'apns' ? parseApnsCredentials(raw) : parseFcmServiceAccount(raw);
    await this.storeCredentials(appId, platform, this.secrets.seal(JSON.stringify(credentials), `${platform}_credentials`), actor);
    return credentials;
  }

  /**
   * Gives the app a VAPID key pair for Web Push: the given one (checked to be one P-256 pair), else a new one. The
   * answer holds the subject and the public key, never the private key.
   */
  async setWebPush(
    appId: string,
    given: { subject: string; publicKey?: string | undefined; privateKey?: string | undefined },
    actor: Actor = CLI_ACTOR,
  ): Promise<{ subject: string; public_key: string }> {
    if ((given.publicKey === undefined) !== (given.privateKey === undefined))
      throw new ValidationError('public-key and private-key go together: give both, or neither to generate a pair');
    const credentials =
      given.publicKey === undefined
        ? generateVapidCredentials(given.subject)
        : parseVapidCredentials({ subject: given.subject, public_key: given.publicKey, private_key: given.privateKey });
    await this.storeCredentials(appId, 'web_push', this.secrets.seal(JSON.stringify(credentials), 'web_push_credentials'), actor);
    return { subject: credentials.subject, public_key: credentials.public_key };
  }

  /** Gives the app its HMS credentials (Huawei Push Kit), checked first; the answer names the app id, never the secret. */
  async setHms(appId: string, given: { hmsAppId: string; clientSecret: string }, actor: Actor = CLI_ACTOR): Promise<{ app_id: string }> {
    const credentials = parseHmsCredentials({ app_id: given.hmsAppId, client_secret: given.clientSecret });
    await this.storeCredentials(appId, 'hms', this.secrets.seal(JSON.stringify(credentials), 'hms_credentials'), actor);
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
  async findActiveKey(key: string): Promise<KeyWithApp | undefined> {
    const hash = hashApiKey(key);
    const found = await (this.activeKeys
      ? this.activeKeys.get(hash.toString('hex'), () => this.keyLookups.submit(hash))
      : this.keyLookups.submit(hash));
    if (found) this.noteUse(found.id);
    return found;
  }

  /**
   * Notes a key's use for `key list`, at most once every KEY_USE_EVERY_SECONDS a process, after the answer: a failed
   * write is tried again at the next use, and never fails the request.
   */
  private noteUse(keyId: string): void {
    const now = Date.now(); // real time, not the Clock: markUsed's own check is PostgreSQL's now()
    if (now - (this.usesNoted.get(keyId) ?? -Infinity) < KEY_USE_EVERY_SECONDS * 1000) return;
    this.usesNoted.set(keyId, now);
    this.keys.markUsed(this.db, [keyId], KEY_USE_EVERY_SECONDS).catch(() => this.usesNoted.delete(keyId));
  }

  /** An app's keys, active and revoked: ids, roles, their first characters, when made, last used and revoked. */
  async listKeys(appId: string): Promise<KeyListing[]> {
    if (!isUuid(appId) || !(await this.apps.findById(this.db, appId))) throw new NotFoundError('app');
    return this.keys.listOfApp(this.db, appId);
  }

  async getApp(appId: string): Promise<AppSummary> {
    const app = await this.apps.findById(this.db, appId);
    if (!app) throw new NotFoundError('app');
    return { id: app.id, bundle_id: app.bundle_id, name: app.name };
  }

  /** Revokes an active key, named by its value or (`{ id }`) by its id, as `key list` shows it. */
  async revokeKey(key: string | { id: string }, actor: Actor = CLI_ACTOR): Promise<void> {
    const revoked = await this.db.transaction().execute(async (trx) => {
      // an id that is not a UUID names no key, and the statement would fail the transaction
      if (typeof key !== 'string' && !isUuid(key.id)) return undefined;
      const found = await this.keys.revoke(trx, typeof key === 'string' ? { keyHash: hashApiKey(key) } : key);
      if (found) await this.audit.recordChange(trx, actor, found.app_id, 'key.revoked', { key_id: found.id, role: found.role });
      return found;
    });
    this.changes?.changed();
    if (!revoked) throw new NotFoundError('active key');
  }

  /**
   * Gives one key a rate limit of its own (an sdk key: per client address), or with null returns it to its
   * role's default. `perSecond` 0 means no limit.
   */
  async setKeyRateLimit(
    key: string | { id: string },
    limit: { perSecond: number; burst: number } | null,
    actor: Actor = CLI_ACTOR,
  ): Promise<void> {
    if (limit) {
      if (!Number.isFinite(limit.perSecond) || limit.perSecond < 0) throw new ValidationError('per-second must be a number >= 0');
      if (!Number.isInteger(limit.burst) || limit.burst < 1 || limit.burst > 2 ** 31 - 1) {
        throw new ValidationError('burst must be an integer >= 1');
      }
    }
    const set = await this.db.transaction().execute(async (trx) => {
      if (typeof key !== 'string' && !isUuid(key.id)) return undefined;
      const found = await this.keys.setRateLimit(trx, typeof key === 'string' ? { keyHash: hashApiKey(key) } : key, limit);
      const recorded = limit && { per_second: limit.perSecond, burst: limit.burst };
      if (found)
        await this.audit.recordChange(trx, actor, found.app_id, 'key.limit_set', { key_id: found.id, role: found.role, limit: recorded });
      return found;
    });
    this.changes?.changed();
    if (!set) throw new NotFoundError('active key');
  }

  listApps() {
    return this.apps.list(this.db);
  }

  /** Stores one gateway's credentials, sealed, with its audit row, which names the gateway only. */
  private async storeCredentials(
    appId: string,
    platform: 'apns' | 'fcm' | 'web_push' | 'hms',
    credentials: Sealed,
    actor: Actor,
  ): Promise<void> {
    await this.inTransaction(appId, async (trx) => {
      const set = await this.apps.setCredentials(trx, appId, platform, credentials);
      if (set) await this.audit.recordChange(trx, actor, appId, 'credentials.set', { platform });
      return set;
    });
    this.changes?.changed();
  }

  /** Runs a change of the app in a transaction; 404 when it finds no such app (answers false or undefined). */
  private async inTransaction<T>(appId: string, change: (trx: Transaction<Database>) => Promise<T | false | undefined>): Promise<T> {
    // not a UUID: no such app, and the statement would fail the transaction
    const done = isUuid(appId) ? await this.db.transaction().execute(change) : undefined;
    if (done === false || done === undefined) throw new NotFoundError('app');
    return done;
  }
}

/** The settings `setLimits` takes, by the names the API and the audit log give them. */
const SETTING_NAMES = {
  maxPerMinute: 'max_per_minute',
  defaultTimeZone: 'default_time_zone',
  quietHours: 'quiet_hours',
  frequencyCaps: 'frequency_caps',
} as const satisfies Record<string, AppSettingName>;
