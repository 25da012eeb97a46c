import { randomFillSync } from 'node:crypto';

const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let used = POOL_BYTES;

/**
 * `bytes` random bytes as base64url, for names that must not collide (not for secrets: those take their own
 * `randomBytes`). Drawn from a pool the system's generator fills 4 KB at a time, as `randomUUID` does: a call
 * into it costs tens of microseconds, paid once for hundreds of names instead of once for each.
 */
export function randomId(bytes: number): string {
  if (!Number.isInteger(bytes) || bytes < 1 || bytes > POOL_BYTES) throw new RangeError(`randomId: ${bytes} bytes`);
  const from = take(bytes);
  return pool.toString('base64url', from, from + bytes);
}

/**
 * A time-ordered UUID (RFC 9562 version 7): the first 48 bits are `at`, milliseconds since the epoch, the other
 * 74 of its 122 are random. Ids of rows kept by time: a day's ids are one range, so a table can be range-partitioned
 * by its id and each day's rows sit together in its primary key (`pushd_uuid7()` in SQL, migration 033, makes the
 * same). Still a UUID any client takes; a notification's tells when it was made, a message's when its retention ends
 * (migration 040).
 */
export function timeOrderedUuid(at: number = Date.now()): string {
  if (!Number.isInteger(at) || at < 0 || at >= 2 ** 48) throw new RangeError(`timeOrderedUuid: ${at}`);
  const from = take(10);
  const time = at.toString(16).padStart(12, '0');
  const hex = pool.toString('hex', from, from + 10);
  // version 7 in the 13th digit, variant 10 in the two high bits of the 17th
  const version = `7${hex.slice(1, 4)}`;
  const variant = ((parseInt(hex.slice(4, 6), 16) & 0x3f) | 0x80).toString(16) + hex.slice(6, 8);
  return `${time.slice(0, 8)}-${time.slice(8)}-${version}-${variant}-${hex.slice(8)}`;
}

/** Reserves `bytes` of the pool, refilled when they are not left; answers where they start. */
function take(bytes: number): number {
  if (used + bytes > POOL_BYTES) {
    randomFillSync(pool);
    used = 0;
  }
  const from = used;
  used += bytes;
  return from;
}
