import { createHash } from 'node:crypto';
import { stableStringify } from './audience-spec.js';
import { ValidationError } from './errors.js';

/** How long a key answers its first answer again; after that it is free and its row is purged. */
export const IDEMPOTENCY_KEY_TTL_HOURS = 24;

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/** The Idempotency-Key header's value, or undefined without one; anything but 1–255 visible ASCII characters is a 400. */
export function parseIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (typeof header !== 'string' || !KEY_PATTERN.test(header)) {
    throw new ValidationError('Idempotency-Key: must be 1 to 255 visible ASCII characters (no spaces), sent once');
  }
  return header;
}

/**
 * What a key is bound to: the method, the path and the body as canonical JSON (object keys sorted), so a retry
 * that serialises the same body with its keys in another order is the same request.
 */
export function requestFingerprint(method: string, path: string, body: unknown): Buffer {
  return createHash('sha256')
    .update(`${method.toUpperCase()} ${path}\n${stableStringify(body ?? null)}`)
    .digest();
}
