import { parseIsoDate } from './date-math.js';

/**
 * The one cursor format of the API: opaque base64url of a versioned JSON tuple, bound to the listing it pages
 * (a cursor of one audience is refused by another) and carrying the keyset position of the last row. A cursor
 * that does not decode, or belongs to another listing, is null: the caller answers 404, as for an unknown one.
 */
const VERSION = 1;

export function encodeCursor(listing: string, position: readonly string[]): string {
  return Buffer.from(JSON.stringify([VERSION, listing, ...position])).toString('base64url');
}

/** The position stored in a cursor of `listing` (as many strings as it was made with), or null. */
export function decodeCursor(cursor: string, listing: string, size: number): string[] | null {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!Array.isArray(parsed) || parsed.length !== size + 2 || parsed[0] !== VERSION || parsed[1] !== listing) return null;
    const position = parsed.slice(2);
    return position.every((p): p is string => typeof p === 'string') ? position : null;
  } catch {
    return null;
  }
}

/** The position before every id: where a listing keyed on ids starts. */
export const FIRST_ID = '00000000-0000-0000-0000-000000000000';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Ids are UUIDs; anything else is a 404 like an unknown id, and never reaches a uuid column. */
export const isUuid = (s: string): boolean => UUID.test(s);

/** The form a listing writes a position's time in: one PostgreSQL reads back exactly (it has no year 0). */
const POSITION_AT = /^(?!0000)\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** A time-ordered listing's position: a time (ISO 8601, to the microsecond) and an id for ties; null if not one. */
export function decodeTimeCursor(cursor: string, listing: string): { at: string; id: string } | null {
  const [at, id] = decodeCursor(cursor, listing, 2) ?? [];
  return at && POSITION_AT.test(at) && parseIsoDate(at) && id && isUuid(id) ? { at, id } : null;
}
