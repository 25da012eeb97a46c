import { hash, randomFillSync, timingSafeEqual } from 'node:crypto';
import type { DeviceFields, Platform } from './device-input.js';
import { IdentityNotProvenError } from './errors.js';
import {
  AUTH_HASH_FIELD,
  IDENTITY_FIELDS,
  identitiesKept,
  refuseUnprovenChanges,
  unprovenClaims,
  type IdentityField,
  type IdentitySecret,
} from './identity.js';

/**
 * The device credential (docs/identity.md): a secret a registration that creates a device answers once, which the
 * SDK sends back as `device.credential` to change where the device's pushes go or whether it gets them. The sdk key
 * ships in every app and a push token is no secret, so neither proves that a change comes from the device itself.
 */
export { CREDENTIAL_FIELD } from './device-input.js';
import { CREDENTIAL_FIELD } from './device-input.js';

const CREDENTIAL_BYTES = 24;
/**
 * Credentials' random bytes, drawn from the system's generator 170 credentials at a time, as `randomUUID` draws its
 * own: a call into it cost 5–9 µs of a new registration's 250. Each credential's bytes are wiped once read.
 */
const pool = Buffer.alloc(CREDENTIAL_BYTES * 170);
let drawn = pool.length;

/** A new device's credential (192 random bits, base64url: 32 characters) and the SHA-256 of it that is stored. */
export function issueCredential(): { credential: string; hash: Buffer } {
  if (drawn === pool.length) {
    randomFillSync(pool);
    drawn = 0;
  }
  const credential = pool.toString('base64url', drawn, drawn + CREDENTIAL_BYTES);
  pool.fill(0, drawn, (drawn += CREDENTIAL_BYTES));
  return { credential, hash: credentialHash(credential) };
}

export function credentialHash(credential: string): Buffer {
  return hash('sha256', credential, 'buffer');
}

/** Whether `sent` is the credential whose hash is stored, compared in constant time. */
function matches(stored: Buffer | null, sent: unknown): boolean {
  if (!stored || typeof sent !== 'string' || sent.length > 256) return false;
  return timingSafeEqual(stored, credentialHash(sent));
}

/**
 * Whether a request proves itself with the device's credential: false when it sent none; a credential sent that is
 * not the device's is refused, naming `field`.
 */
export function credentialProven(stored: Buffer | null, sent: unknown, field: string): boolean {
  if (sent === undefined || sent === null) return false;
  if (matches(stored, sent)) return true;
  throw new IdentityNotProvenError(`${field}: does not match the device's credential`);
}

const HEX = /^[0-9a-fA-F]+$/;

/**
 * A push token as pushd stores and looks it up: APNs hands out hex, which it reads in any case, so an iOS device's
 * hex token is lower-cased (its two cases are one phone); FCM and HMS tokens are case-sensitive and a Web Push
 * endpoint is a URL the browser made, both kept as given.
 */
export function normalizeToken<T extends string | null | undefined>(platform: Platform | undefined, token: T): T {
  return (platform === 'ios' && typeof token === 'string' && HEX.test(token) ? token.toLowerCase() : token) as T;
}

/** An APNs token of a Live Activity (an activity's, or a push-to-start one), as normalizeToken stores an iPhone's. */
export function normalizeApnsToken(token: string): string {
  return normalizeToken('ios', token);
}

/** What a change by the sdk key is judged against: the stored device's user, delivery fields and credential. */
export interface HeldDevice {
  user_id: string | null;
  user_email: string | null;
  platform: Platform;
  token: string | null;
  web_push_p256dh: string | null;
  web_push_auth: string | null;
  development: boolean;
  notifications_allowed: string | null;
  credential_hash: Buffer | null;
  /** the device's client has sent its credential once, so it keeps it: from then on a change needs it */
  credential_held: boolean;
}

/** The fields that decide where a device's pushes go and whether it gets them, each as a write would change it. */
const DELIVERY: { name: string; changed: (d: HeldDevice, f: DeviceFields) => boolean }[] = [
  { name: 'token', changed: (d, f) => f.token !== undefined && f.token !== d.token },
  {
    name: 'subscription',
    changed: (d, f) =>
      (f.web_push_p256dh !== undefined && f.web_push_p256dh !== d.web_push_p256dh) ||
      (f.web_push_auth !== undefined && f.web_push_auth !== d.web_push_auth),
  },
  { name: 'platform', changed: (d, f) => f.platform !== undefined && f.platform !== d.platform },
  { name: 'development', changed: (d, f) => f.development !== undefined && f.development !== d.development },
  {
    name: 'notifications_allowed',
    changed: (d, f) => f.notifications_allowed !== undefined && f.notifications_allowed !== d.notifications_allowed,
  },
];

/** The delivery fields a write changes on the device (a web device's token is its subscription). */
export function deliveryChanges(device: HeldDevice, fields: DeviceFields): string[] {
  const changed = DELIVERY.filter((d) => d.changed(device, fields)).map((d) => d.name);
  return device.platform === 'web' && changed.includes('token')
    ? [...new Set(changed.map((c) => (c === 'token' ? 'subscription' : c)))]
    : changed;
}

/** What an sdk write sent that may prove it comes from the device: its credential and the proofs of its user. */
export interface DeviceProofs {
  credential?: unknown;
  authHashes: Partial<Record<IdentityField, unknown>>;
}

/**
 * Refuses a change by the sdk key of a device's delivery fields that nothing proves comes from the device: its
 * credential, or, for a device bound to a user while the app verifies identities, that user's hash (the one it
 * keeps; the one it leaves is checked by refuseUnprovenLeave). A device without a credential (registered before
 * there were any), or whose client never sent it back, is open while no user is bound. A credential sent must be
 * the device's. Answers whether the credential was sent and matched (the device's client holds it).
 */
export function refuseUnprovenDeviceChange(
  device: HeldDevice,
  fields: DeviceFields,
  proofs: DeviceProofs,
  identity: IdentitySecret | null,
): boolean {
  if (credentialProven(device.credential_hash, proofs.credential, `device.${CREDENTIAL_FIELD}`)) return true;
  const changes = deliveryChanges(device, fields);
  if (changes.length === 0) return false;
  const bound = IDENTITY_FIELDS.some((f) => device[f] !== null);
  if (bound && identity) {
    const claims = unprovenClaims(identitiesKept(device, fields), proofs.authHashes, identity);
    if (claims.length === 0) return false;
    // a device without a credential has only its user's proof, as before there were credentials
    if (!device.credential_hash) refuseUnprovenChanges(claims, undefined);
    throw required(changes, `or ${AUTH_HASH_FIELD[claims[0]!.field]} of the device's user`);
  }
  if (device.credential_held) throw required(changes, 'which its registration answered');
  return false;
}

function required(changes: string[], alternative: string): IdentityNotProvenError {
  return new IdentityNotProvenError(
    `device.${CREDENTIAL_FIELD}: is required to change ${changes.join(', ')} of this device with the sdk key (${alternative})`,
  );
}

/**
 * Refuses, for the sdk key, taking a push token another device of the app holds (it would lose it): unless that
 * device is open to anyone (no credential its client keeps, no user bound while the app verifies identities), the
 * request must prove its user, as changing that device's token directly would.
 */
export function refuseTakingToken(holder: HeldDevice, authHashes: DeviceProofs['authHashes'], identity: IdentitySecret | null): void {
  const bound = IDENTITY_FIELDS.some((f) => holder[f] !== null);
  const proven = bound && identity !== null && unprovenClaims(identitiesKept(holder, {}), authHashes, identity).length === 0;
  if (!proven && (holder.credential_held || (bound && identity)))
    throw new IdentityNotProvenError(
      "device.token: is another device's push token; only that device (with its credential) or its user's proof gives it up",
    );
}
