import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { QuietHours } from '../../domain/quiet-hours.js';
import type { FrequencyCap } from '../../domain/frequency-caps.js';
import type { App, Database, KeyRole } from '../schema.js';
import type { Sealed, SecretColumn } from '../../domain/secrets.js';

export interface AppSummary {
  id: string;
  bundle_id: string;
  name: string;
}

export interface CampaignSettings {
  default_time_zone: string | null;
  max_per_minute: number | null;
  quiet_hours: QuietHours | null;
}

export interface IdentityVerification {
  identity_verification: boolean;
  identity_secret: Sealed | null;
}

/** An app's secrets as stored (sealed, or plain where a database from before migration 046 still holds them). */
export type StoredSecrets = { id: string } & Record<SecretColumn, string | null>;
const CREDENTIAL_COLUMNS = {
  apns: 'apns_credentials',
  fcm: 'fcm_credentials',
  web_push: 'web_push_credentials',
  hms: 'hms_credentials',
} as const;

export class AppsRepository {
  /** A new app, with identity verification on under `identitySecret`. */
  async create(db: Db, bundleId: string, name: string, identitySecret: Sealed): Promise<AppSummary> {
    return db
      .insertInto('apps')
      .values({ bundle_id: bundleId, name, identity_secret: identitySecret, identity_verification: true })
      .returning(['id', 'bundle_id', 'name'])
      .executeTakeFirstOrThrow();
  }

  async list(db: Db): Promise<(AppSummary & { created_at: Date })[]> {
    return db.selectFrom('apps').select(['id', 'bundle_id', 'name', 'created_at']).orderBy('created_at').orderBy('id').execute();
  }

  async findById(db: Db, id: string): Promise<App | undefined> {
    return db.selectFrom('apps').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** The push credentials of several apps, by app id (an unknown id is absent). */
  async pushCredentialsOf(
    db: Db,
    ids: string[],
  ): Promise<
    Map<string, Pick<App, 'id' | 'bundle_id' | 'apns_credentials' | 'fcm_credentials' | 'web_push_credentials' | 'hms_credentials'>>
  > {
    const rows = await db
      .selectFrom('apps')
      .select(['id', 'bundle_id', 'apns_credentials', 'fcm_credentials', 'web_push_credentials', 'hms_credentials'])
      .where(sql<boolean>`id = any(${ids}::uuid[])`)
      .execute();
    return new Map(rows.map((row) => [row.id, row]));
  }

  /** The app's VAPID credentials as stored (null: none set, undefined: no such app). */
  async webPushCredentials(db: Db, id: string): Promise<Sealed | null | undefined> {
    const row = await db.selectFrom('apps').select('web_push_credentials').where('id', '=', id).executeTakeFirst();
    return row && row.web_push_credentials;
  }

  /** What shapes when an app's notifications go out: its default time zone and its ceiling on pushes a minute. */
  async campaignSettings(db: Db, id: string): Promise<CampaignSettings> {
    const row = await db
      .selectFrom('apps')
      .select(['default_time_zone', 'max_per_minute', 'quiet_hours'])
      .where('id', '=', id)
      .executeTakeFirst();
    return row ?? { default_time_zone: null, max_per_minute: null, quiet_hours: null };
  }

  /** The app's frequency caps; null when it has none (or there is no such app). */
  async frequencyCapsOf(db: Db, id: string): Promise<FrequencyCap[] | null> {
    const row = await db.selectFrom('apps').select('frequency_caps').where('id', '=', id).executeTakeFirst();
    return row?.frequency_caps ?? null;
  }

  /** `campaignSettings` of several apps at once, by app id. */
  async campaignSettingsOf(db: Db, ids: string[]): Promise<Map<string, CampaignSettings>> {
    const rows = await db
      .selectFrom('apps')
      .select(['id', 'default_time_zone', 'max_per_minute', 'quiet_hours'])
      .where(sql<boolean>`id = any(${ids}::uuid[])`)
      .execute();
    return new Map(rows.map(({ id, ...settings }) => [id, settings]));
  }

  async setLimits(
    db: Db,
    id: string,
    limits: {
      maxPerMinute?: number | null;
      defaultTimeZone?: string | null;
      quietHours?: QuietHours | null;
      frequencyCaps?: FrequencyCap[] | null;
    },
  ): Promise<boolean> {
    const r = await db
      .updateTable('apps')
      .set({
        ...(limits.maxPerMinute !== undefined ? { max_per_minute: limits.maxPerMinute } : {}),
        ...(limits.defaultTimeZone !== undefined ? { default_time_zone: limits.defaultTimeZone } : {}),
        ...(limits.quietHours !== undefined ? { quiet_hours: limits.quietHours && JSON.stringify(limits.quietHours) } : {}),
        ...(limits.frequencyCaps !== undefined ? { frequency_caps: limits.frequencyCaps && JSON.stringify(limits.frequencyCaps) } : {}),
      })
      .where('id', '=', id)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /**
   * Turns identity verification on or off (`on` absent: as it is) and stores `secret`: in place of the app's, or
   * with `ifNone` only where it has none. Undefined when there is no such app.
   */
  async setIdentityVerification(
    db: Db,
    id: string,
    change: { on?: boolean; secret?: { value: Sealed; ifNone: boolean } },
  ): Promise<IdentityVerification | undefined> {
    const { on, secret } = change;
    return db
      .updateTable('apps')
      .set({
        ...(on !== undefined ? { identity_verification: on } : {}),
        ...(secret ? { identity_secret: secret.ifNone ? sql<Sealed>`coalesce(identity_secret, ${secret.value})` : secret.value } : {}),
      })
      .where('id', '=', id)
      .returning(['identity_verification', 'identity_secret'])
      .executeTakeFirst();
  }

  /** Every app's secrets as stored, the app rows locked (`forUpdate`) for a transaction that reseals them. */
  async storedSecrets(db: Db, opts: { forUpdate: boolean }): Promise<StoredSecrets[]> {
    const query = db
      .selectFrom('apps')
      .select(['id', 'apns_credentials', 'fcm_credentials', 'web_push_credentials', 'hms_credentials', 'identity_secret'])
      .orderBy('id');
    return opts.forUpdate ? query.forUpdate().execute() : query.execute();
  }

  /**
   * Makes this transaction's reseal unannounced (migration 046's trigger): a value sealed anew means the same, so the
   * processes keep what they opened.
   */
  async quietReseal(trx: Transaction<Database>): Promise<void> {
    await sql`select set_config('pushd.resealing', 'on', true)`.execute(trx);
  }

  /** Replaces an app's secrets with these sealed ones (the same values, sealed anew): all of them in one statement. */
  async resealSecrets(db: Db, id: string, sealed: Record<SecretColumn, Sealed | null>): Promise<void> {
    await db.updateTable('apps').set(sealed).where('id', '=', id).execute();
  }

  async findByBundleId(db: Db, bundleId: string): Promise<AppSummary | undefined> {
    return db.selectFrom('apps').select(['id', 'bundle_id', 'name']).where('bundle_id', '=', bundleId).executeTakeFirst();
  }

  async setCredentials(db: Db, id: string, platform: keyof typeof CREDENTIAL_COLUMNS, credentials: Sealed): Promise<boolean> {
    const column = CREDENTIAL_COLUMNS[platform];
    const r = await db
      .updateTable('apps')
      .set({ [column]: credentials })
      .where('id', '=', id)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }
}

export interface KeyWithApp {
  id: string;
  role: KeyRole;
  key_hash: Buffer;
  app_id: string;
  bundle_id: string;
  rate_limit_per_second: number | null;
  rate_limit_burst: number | null;
  /** the app's identity secret while verification is on, else null (never shown: IdentitySecret wraps it) */
  identity_secret: string | null;
}

/** A key by its id, with its app and role. */
export interface KeyOfApp {
  id: string;
  app_id: string;
  role: KeyRole;
}
/** A key as `pushd key list` shows it. */
export type KeyListing = {
  id: string;
  role: KeyRole;
  key_hint: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
};

/** A key found, its app's identity secret as stored (AppService opens it). */
export type StoredKeyWithApp = Omit<KeyWithApp, 'identity_secret'> & { identity_secret: Sealed | null };

export class ApiKeysRepository {
  async create(db: Db, appId: string, role: KeyRole, keyHash: Buffer, hint: string): Promise<{ id: string }> {
    return db
      .insertInto('api_keys')
      .values({ app_id: appId, role, key_hash: keyHash, key_hint: hint, revoked_at: null })
      .returning('id')
      .executeTakeFirstOrThrow();
  }

  /** The active keys with these hashes (and their apps), by hash in hex. */
  async findActiveByHashes(db: Db, keyHashes: Buffer[]): Promise<Map<string, StoredKeyWithApp>> {
    const rows = await db
      .selectFrom('api_keys')
      .innerJoin('apps', 'apps.id', 'api_keys.app_id')
      .select([
        'api_keys.id',
        'api_keys.role',
        'api_keys.key_hash',
        'api_keys.app_id',
        'apps.bundle_id',
        'api_keys.rate_limit_per_second',
        'api_keys.rate_limit_burst',
        sql<Sealed | null>`case when apps.identity_verification then apps.identity_secret end`.as('identity_secret'),
      ])
      // one array parameter: the same statement text (and prepared statement) whatever the number of keys
      .where(sql<boolean>`api_keys.key_hash = any(${keyHashes}::bytea[])`)
      .where('api_keys.revoked_at', 'is', null)
      .execute();
    return new Map(rows.map((k) => [k.key_hash.toString('hex'), k]));
  }

  /** Sets (or, with null, clears) the rate limit of the active key with this hash; the key, or undefined when there is none. */
  async setRateLimit(
    db: Db,
    key: { id: string } | { keyHash: Buffer },
    limit: { perSecond: number; burst: number } | null,
  ): Promise<KeyOfApp | undefined> {
    return db
      .updateTable('api_keys')
      .set({ rate_limit_per_second: limit?.perSecond ?? null, rate_limit_burst: limit?.burst ?? null })
      .where((w) => ('id' in key ? w('id', '=', key.id) : w('key_hash', '=', key.keyHash)))
      .where('revoked_at', 'is', null)
      .returning(['id', 'app_id', 'role'])
      .executeTakeFirst();
  }

  /** An app's keys, active and revoked, oldest first: what identifies them, never their hash. */
  async listOfApp(db: Db, appId: string): Promise<KeyListing[]> {
    return db
      .selectFrom('api_keys')
      .select(['id', 'role', 'key_hint', 'created_at', 'last_used_at', 'revoked_at'])
      .where('app_id', '=', appId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  /** Notes that these keys were used now, unless a use within `withinSeconds` is noted already. */
  async markUsed(db: Db, ids: string[], withinSeconds: number): Promise<void> {
    await db
      .updateTable('api_keys')
      .set({ last_used_at: sql`now()` })
      .where(sql<boolean>`id = any(${ids}::uuid[])`)
      .where((w) =>
        w.or([w('last_used_at', 'is', null), w('last_used_at', '<', sql<Date>`now() - make_interval(secs => ${withinSeconds})`)]),
      )
      .execute();
  }

  /** Revokes the active key with this id or hash; the key, or undefined when there is none. */
  async revoke(db: Db, key: { id: string } | { keyHash: Buffer }): Promise<KeyOfApp | undefined> {
    return db
      .updateTable('api_keys')
      .set({ revoked_at: new Date() })
      .where((w) => ('id' in key ? w('id', '=', key.id) : w('key_hash', '=', key.keyHash)))
      .where('revoked_at', 'is', null)
      .returning(['id', 'app_id', 'role'])
      .executeTakeFirst();
  }
}
