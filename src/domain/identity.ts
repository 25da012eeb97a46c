import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { inspect } from 'node:util';
import { IdentityNotProvenError } from './errors.js';

/**
 * Identity verification: a phone may bind its device to a user (user_id) or an e-mail address (user_email), both of
 * which route pushes, only with proof from the customer's backend: the hex HMAC-SHA256 of the value, keyed with the
 * app's identity secret (the string as printed), which the phone never holds.
 */
export const IDENTITY_FIELDS = ['user_id', 'user_email'] as const;
export type IdentityField = (typeof IDENTITY_FIELDS)[number];

/** The request field that carries the proof of each identity field. */
export const AUTH_HASH_FIELD: Record<IdentityField, string> = {
  user_id: 'user_id_auth_hash',
  user_email: 'user_email_auth_hash',
};

const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;

/** A new app's identity secret: 256 random bits, hex (shown once by the CLI, used as is as the HMAC key). */
export function generateIdentitySecret(): string {
  return randomBytes(32).toString('hex');
}

/** What the customer's backend computes for a value: hex HMAC-SHA256 keyed with the secret. */
export function identityHash(secret: string, value: string): string {
  return createHmac('sha256', secret).update(value, 'utf8').digest('hex');
}

/**
 * An app's identity secret, as the request path holds it: it checks hashes, and shows as a placeholder if a log or a
 * serializer ever meets it.
 */
export class IdentitySecret {
  readonly #secret: string;

  constructor(secret: string) {
    this.#secret = secret;
  }

  /** Whether `hash` is the hex HMAC-SHA256 of `value` under this secret (any case), compared in constant time. */
  proves(value: string, hash: unknown): boolean {
    if (typeof hash !== 'string' || !HEX_SHA256.test(hash)) return false;
    return timingSafeEqual(Buffer.from(identityHash(this.#secret, value), 'hex'), Buffer.from(hash, 'hex'));
  }

  toJSON(): string {
    return '[identity secret]';
  }

  [inspect.custom](): string {
    return '[identity secret]';
  }
}

/** An identity field a request sets to a new value, with the hash it sent for it (if any). */
export interface IdentityClaim {
  field: IdentityField;
  value: string;
  hash: unknown;
}

/**
 * The identity fields of a device write (absent: unchanged, null: cleared) whose hash does not prove them. Clearing
 * needs no proof: it binds the device to nobody.
 */
export function unprovenClaims(
  fields: Partial<Record<IdentityField, string | null>>,
  hashes: Partial<Record<IdentityField, unknown>>,
  secret: IdentitySecret,
): IdentityClaim[] {
  const unproven: IdentityClaim[] = [];
  for (const field of IDENTITY_FIELDS) {
    const value = fields[field];
    if (typeof value !== 'string') continue;
    if (!secret.proves(value, hashes[field])) unproven.push({ field, value, hash: hashes[field] });
  }
  return unproven;
}

/**
 * What a device holds after a change that moves it to another push token (another phone): its user id and e-mail
 * address as the request leaves them. The new phone behind them needs their proof as much as a new binding does.
 */
export function identitiesKept(
  current: Partial<Record<IdentityField, string | null>>,
  fields: Partial<Record<IdentityField, string | null>>,
): Partial<Record<IdentityField, string | null>> {
  return Object.fromEntries(
    IDENTITY_FIELDS.map((field) => [field, fields[field] !== undefined ? fields[field] : (current[field] ?? null)]),
  );
}

/**
 * Refuses the first unproven claim that changes what the device holds (`current`: its stored values, none for a new
 * device). Re-sending the value a device already has binds nothing new, so it needs no hash: app versions released
 * before verification was turned on keep registering the devices they already bound.
 */
export function refuseUnprovenChanges(
  claims: IdentityClaim[],
  current: Partial<Record<IdentityField, string | null>> | undefined,
  at = 'device.',
): void {
  for (const claim of claims) {
    if (current?.[claim.field] === claim.value) continue;
    const hashField = `${at}${AUTH_HASH_FIELD[claim.field]}`;
    if (claim.hash === undefined || claim.hash === null)
      throw new IdentityNotProvenError(
        `${hashField}: is required to set ${claim.field} with the sdk key ` +
          `(the hex HMAC-SHA256 of ${claim.field}, made by your backend with the app's identity secret)`,
      );
    throw new IdentityNotProvenError(
      `${hashField}: does not match ${claim.field} (the hex HMAC-SHA256 of it with the app's identity secret)`,
    );
  }
}

/** The request field that carries the proof of the identity a change leaves (the user logging out). */
export const LEAVING_HASH_FIELD: Record<IdentityField, string> = {
  user_id: 'previous_user_id_auth_hash',
  user_email: 'previous_user_email_auth_hash',
};

/**
 * Refuses a change of an identity the device holds (to another value, or cleared) that `leaving` does not prove: the
 * hash of the value it leaves. Without it, whoever knows a phone's token takes it from its user, by binding it to
 * themselves with their own valid hash, or by clearing it first.
 */
export function refuseUnprovenLeave(
  current: Partial<Record<IdentityField, string | null>>,
  fields: Partial<Record<IdentityField, string | null>>,
  leaving: Partial<Record<IdentityField, unknown>>,
  secret: IdentitySecret,
): void {
  for (const field of IDENTITY_FIELDS) {
    const held = current[field];
    const next = fields[field];
    if (typeof held !== 'string' || next === undefined || next === held || secret.proves(held, leaving[field])) continue;
    const hashField = `device.${LEAVING_HASH_FIELD[field]}`;
    if (leaving[field] === undefined || leaving[field] === null)
      throw new IdentityNotProvenError(
        `${hashField}: is required to change ${field} with the sdk key once the device has one ` +
          `(the hex HMAC-SHA256 of the ${field} it leaves, made by your backend)`,
      );
    throw new IdentityNotProvenError(`${hashField}: does not match the ${field} the device has (the hex HMAC-SHA256 of it)`);
  }
}

/** The proofs a request carries under their own names (`user_id_auth_hash`, …), keyed by the field each proves. */
export function proofsIn(fields: Partial<Record<string, unknown>>): Partial<Record<IdentityField, unknown>> {
  return Object.fromEntries(IDENTITY_FIELDS.map((field) => [field, fields[AUTH_HASH_FIELD[field]]]));
}
