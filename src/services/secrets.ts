import type { Db } from '../db/database.js';
import type { StoredSecrets } from '../db/repositories/apps.js';
import {
  isSealed,
  keyIdOf,
  SECRET_COLUMNS,
  SecretsKeyError,
  sealedKeyId,
  type Sealed,
  type SecretColumn,
  type SecretsKeyring,
} from '../domain/secrets.js';
import { ConfigError } from '../platform/config.js';
import type { Repositories, ServiceDeps } from './deps.js';

/** What a start found: the plain values it sealed (a database from before migration 046), and the values it checked. */
export interface SecretsCheck {
  sealed: number;
  checked: number;
}

export type SecretsServiceDeps = Pick<ServiceDeps, 'db' | 'repos'> & {
  keyring: SecretsKeyring;
  /** where this process's key came from, named when a stored value needs another one */
  keyFrom: string;
};

/**
 * The apps' secrets as a whole: sealing the plain values an upgrade finds, checking at start-up that this process
 * opens every stored value (it never sends with what it cannot open), and resealing them under a new key.
 */
export class SecretsService {
  private readonly db: Db;
  private readonly keyring: SecretsKeyring;
  private readonly keyFrom: string;
  private readonly apps: Repositories['apps'];
  private readonly webhooks: Repositories['webhooks'];
  private readonly journeys: Repositories['journeys'];

  constructor(deps: SecretsServiceDeps) {
    this.db = deps.db;
    this.keyring = deps.keyring;
    this.keyFrom = deps.keyFrom;
    this.apps = deps.repos.apps;
    this.webhooks = deps.repos.webhooks;
    this.journeys = deps.repos.journeys;
  }

  /** Seals what is stored plain (once, by the first process to start on migration 046), then opens every value. */
  async prepare(): Promise<SecretsCheck> {
    let sealed = 0;
    if ((await this.apps.storedSecrets(this.db, { forUpdate: false })).some(hasPlain)) {
      // the rows locked: processes starting together seal each value once, the later ones see it sealed
      sealed = await this.db.transaction().execute(async (trx) => {
        let count = 0;
        for (const row of await this.apps.storedSecrets(trx, { forUpdate: true })) {
          if (!hasPlain(row)) continue;
          count += SECRET_COLUMNS.filter((c) => row[c] !== null && !isSealed(row[c])).length;
          await this.apps.resealSecrets(trx, row.id, this.sealAll(row, this.keyring));
        }
        return count;
      });
    }
    const rows = await this.apps.storedSecrets(this.db, { forUpdate: false });
    this.checkOpens(rows);
    return { sealed, checked: rows.reduce((n, row) => n + SECRET_COLUMNS.filter((c) => row[c] !== null).length, 0) };
  }

  /**
   * Reseals every value not sealed under `newKey` with it, in one transaction, without announcing a change: the
   * running processes keep what they opened and go on sending with it.
   */
  async rotate(newKey: Buffer): Promise<{ key_id: string; previous_key_ids: string[]; resealed: number; apps: number }> {
    const rotated = this.keyring.rotatedTo(newKey);
    const resealed = await this.db.transaction().execute(async (trx) => {
      await this.apps.quietReseal(trx);
      const rows = await this.apps.storedSecrets(trx, { forUpdate: true });
      this.checkOpens(rows);
      let count = 0;
      for (const row of rows) {
        const stale = SECRET_COLUMNS.filter((c) => row[c] !== null && sealedKeyId(row[c]) !== rotated.currentId).length;
        if (!stale) continue;
        count += stale;
        await this.apps.resealSecrets(trx, row.id, this.sealAll(row, rotated));
      }
      return count + (await this.resealEndpoints(trx, rotated)) + (await this.resealJourneys(trx, rotated));
    });
    const apps = (await this.apps.storedSecrets(this.db, { forUpdate: false })).length;
    return { key_id: keyIdOf(newKey), previous_key_ids: rotated.keyIds.slice(1), resealed, apps };
  }

  /** Reseals the webhook endpoints' signing secrets not sealed under `rotated`'s key; answers how many. */
  private async resealEndpoints(trx: Db, rotated: SecretsKeyring): Promise<number> {
    let count = 0;
    for (const e of await this.webhooks.storedSecrets(trx, { forUpdate: true })) {
      const values = [e.secret, e.previous_secret].filter((v) => v !== null);
      const stale = values.filter((v) => sealedKeyId(v) !== rotated.currentId).length;
      if (!stale) continue;
      count += stale;
      const reseal = (value: Sealed, column: 'webhook_endpoints.secret' | 'webhook_endpoints.previous_secret') =>
        rotated.seal(this.keyring.open(value, column), column);
      await this.webhooks.resealSecrets(trx, e.id, {
        secret: reseal(e.secret, 'webhook_endpoints.secret'),
        previous_secret: e.previous_secret && reseal(e.previous_secret, 'webhook_endpoints.previous_secret'),
      });
    }
    return count;
  }

  /** Reseals the journeys' webhook secrets not sealed under `rotated`'s key; answers how many. */
  private async resealJourneys(trx: Db, rotated: SecretsKeyring): Promise<number> {
    const stale = (await this.journeys.storedSecrets(trx)).filter((j) => sealedKeyId(j.webhook_secret) !== rotated.currentId);
    for (const j of stale)
      await this.journeys.resealSecret(
        trx,
        j.id,
        rotated.seal(this.keyring.open(j.webhook_secret, 'journeys.webhook_secret'), 'journeys.webhook_secret'),
      );
    return stale.length;
  }

  /** Each of the row's values sealed by `keyring`: a plain one as it is, a sealed one opened first. */
  private sealAll(row: StoredSecrets, keyring: SecretsKeyring): Record<SecretColumn, Sealed | null> {
    const plainOf = (column: SecretColumn, value: string): string | null => {
      if (isSealed(value)) return this.keyring.open(value, column);
      // a credential stored before 046 was a JSON document (its JSON null: none)
      return value === 'null' && column !== 'identity_secret' ? null : value;
    };
    const out = {} as Record<SecretColumn, Sealed | null>;
    for (const column of SECRET_COLUMNS) {
      const value = row[column];
      const plain = value === null ? null : plainOf(column, value);
      out[column] = plain === null ? null : keyring.seal(plain, column);
    }
    return out;
  }

  /** Throws naming the settings when a stored value names a key this process does not hold, or does not open. */
  private checkOpens(rows: StoredSecrets[]): void {
    const missing = new Map<string, number>();
    for (const row of rows) {
      for (const column of SECRET_COLUMNS) {
        const value = row[column];
        if (value === null || !isSealed(value)) continue;
        const keyId = sealedKeyId(value);
        if (keyId && !this.keyring.holds(keyId)) {
          missing.set(keyId, (missing.get(keyId) ?? 0) + 1);
          continue;
        }
        try {
          this.keyring.open(value, column);
        } catch (err) {
          throw new ConfigError(`secrets: app ${row.id}: ${(err as SecretsKeyError).message}`);
        }
      }
    }
    if (!missing.size) return;
    const which = [...missing].map(([id, n]) => `key ${id} (${n} value${n === 1 ? '' : 's'})`).join(', ');
    throw new ConfigError(
      `secrets: the stored credentials are sealed under ${which}, which this process was not given (its keys: ` +
        `${this.keyring.keyIds.join(', ')}, from ${this.keyFrom}). Start it with the key that sealed them as SECRETS_KEY or ` +
        `SECRETS_KEY_FILE, and the one it replaced as SECRETS_KEY_PREVIOUS while a rotation runs (docs/secrets.md)`,
    );
  }
}

function hasPlain(row: StoredSecrets): boolean {
  return SECRET_COLUMNS.some((c) => row[c] !== null && !isSealed(row[c]));
}
