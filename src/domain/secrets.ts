import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Secrets at rest: every credential and secret an app stores is sealed with AES-256-GCM under a key-encryption key
 * the database never holds. A sealed value is `pushd:v1:<key id>:<iv>:<ciphertext>:<tag>` (base64url parts), so the
 * key that opens it is named by the value itself and a rotation can tell what it still has to reseal.
 */

/** A value sealed by `SecretsKeyring.seal`: the only kind a secret column stores. */
export type Sealed = string & { readonly __sealed: unique symbol };

/** The apps columns that hold secrets, each value sealed with its column's name as additional data. */
export const SECRET_COLUMNS = [
  'apns_credentials',
  'fcm_credentials',
  'web_push_credentials',
  'hms_credentials',
  'identity_secret',
] as const;
/**
 * The columns of other tables that hold secrets, named with their table (a webhook endpoint's and a journey's signing secrets);
 * sealed and opened as the apps columns, resealed by a rotation with them.
 */
export const OTHER_SECRET_COLUMNS = ['webhook_endpoints.secret', 'webhook_endpoints.previous_secret', 'journeys.webhook_secret'] as const;
export type SecretColumn = (typeof SECRET_COLUMNS)[number];
/** Any column a sealed value belongs to: its name is the additional data that binds the value to it. */
export type SealedColumn = SecretColumn | (typeof OTHER_SECRET_COLUMNS)[number];

export const SECRETS_KEY_BYTES = 32;
const PREFIX = 'pushd:v1:';
const IV_BYTES = 12;
const SEALED = /^pushd:v1:([0-9a-f]{16}):([A-Za-z0-9_-]+):([A-Za-z0-9_-]*):([A-Za-z0-9_-]+)$/;

/** A sealed value names a key this keyring does not hold, or does not open under the key it names. */
export class SecretsKeyError extends Error {}

/** The id a sealed value names its key by: a short digest of the key, which tells nothing of the key itself. */
export function keyIdOf(key: Buffer): string {
  return createHash('sha256').update('pushd secrets key id\0').update(key).digest('hex').slice(0, 16);
}

/** The key written as base64 (a setting or a key file); undefined when it is not 32 bytes in base64. */
export function decodeSecretsKey(text: string): Buffer | undefined {
  const trimmed = text.trim();
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(trimmed)) return undefined;
  const key = Buffer.from(trimmed, 'base64');
  return key.length === SECRETS_KEY_BYTES ? key : undefined;
}

/** A new key, as a key file holds it (base64 and a newline). */
export function newSecretsKeyText(): string {
  return `${randomBytes(SECRETS_KEY_BYTES).toString('base64')}\n`;
}

export function isSealed(value: string): value is Sealed {
  return value.startsWith(PREFIX);
}

/** The id of the key a sealed value was sealed under; undefined for a value that is not sealed. */
export function sealedKeyId(value: string): string | undefined {
  return SEALED.exec(value)?.[1];
}

/** How often at most a keyring reads its key files again, when a value names a key it does not hold. */
const RELOAD_EVERY_MS = 1000;

/**
 * The keys a process holds: the current one seals, it and the previous ones open. Keys given as files are read
 * again (`reload`) before sealing and when a value names a key not held, so a running
 * process takes up the key a rotation installed; it never forgets one it held.
 */
export class SecretsKeyring {
  readonly #keys = new Map<string, Buffer>();
  #current: Buffer;
  #currentId: string;
  #reloadedAt = 0;

  constructor(
    current: Buffer,
    previous: Buffer[] = [],
    private readonly reload?: () => { current?: Buffer | undefined; others: Buffer[] },
  ) {
    this.#current = current;
    this.#currentId = keyIdOf(current);
    for (const key of [current, ...previous]) this.#keys.set(keyIdOf(key), key);
  }

  get currentId(): string {
    return this.#currentId;
  }

  private refresh(): void {
    if (!this.reload || Date.now() - this.#reloadedAt < RELOAD_EVERY_MS) return;
    this.#reloadedAt = Date.now();
    const { current, others } = this.reload();
    for (const key of others) this.#keys.set(keyIdOf(key), key);
    if (!current) return;
    this.#keys.set(keyIdOf(current), current);
    this.#current = current;
    this.#currentId = keyIdOf(current);
  }

  /** The ids of the keys that open values, the current one first. */
  get keyIds(): string[] {
    return [...this.#keys.keys()];
  }

  holds(keyId: string): boolean {
    return this.#keys.has(keyId);
  }

  /** This keyring's keys with `key` current instead: what a rotation reseals with. */
  rotatedTo(key: Buffer): SecretsKeyring {
    return new SecretsKeyring(
      key,
      [...this.#keys.values()].filter((k) => !k.equals(key)),
    );
  }

  seal(plain: string, column: SealedColumn): Sealed {
    this.refresh();
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#current, iv);
    cipher.setAAD(additionalData(this.currentId, column));
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    const parts = [iv, body, cipher.getAuthTag()].map((b) => b.toString('base64url'));
    return `${PREFIX}${this.currentId}:${parts.join(':')}` as Sealed;
  }

  /** The plain value; throws SecretsKeyError when its key is not held or it does not open (changed, or moved from another column). */
  open(sealed: string, column: SealedColumn): string {
    const parts = SEALED.exec(sealed);
    if (!parts) throw new SecretsKeyError(`${column}: the stored value is not sealed`);
    const [, keyId, iv, body, tag] = parts as unknown as [string, string, string, string, string];
    if (!this.#keys.has(keyId)) this.refresh();
    const key = this.#keys.get(keyId);
    if (!key)
      throw new SecretsKeyError(
        `${column}: sealed under key ${keyId}, which is not one of this process's keys (${this.keyIds.join(', ')})`,
      );
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
      decipher.setAAD(additionalData(keyId, column));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretsKeyError(`${column}: the value sealed under key ${keyId} does not open (it was changed or belongs elsewhere)`);
    }
  }

  /** A sealed JSON document (credentials), opened and parsed. */
  openJson(sealed: string, column: SecretColumn): Record<string, unknown> {
    return JSON.parse(this.open(sealed, column)) as Record<string, unknown>;
  }
}

function additionalData(keyId: string, column: SealedColumn): Buffer {
  return Buffer.from(`${PREFIX}${keyId}:${column.includes('.') ? column : `apps.${column}`}`, 'utf8');
}
