import { hash } from 'node:crypto';
import { isPlainObject, type Criterion, type Filter } from './filters.js';

/**
 * The canonical form of an on-the-fly audience: two specs that select the same devices by construction
 * (key order, filter order, criteria order, duplicates, not_filter:false vs absent, unit aliases) are equal.
 */
const UNIT_ALIASES: Record<string, string> = { inch: 'in', yards: 'yd', feet: 'ft', kilometers: 'km', miles: 'mi', meters: 'm' };

export function canonicalFilters(filters: Filter[]): Filter[] {
  const canonical = filters.map((f) => {
    const criteria = uniqueSorted(f.criteria.map(canonicalCriterion));
    const out: Filter = { name: f.name, criteria };
    if (f.not_filter === true) out.not_filter = true;
    return out;
  });
  return uniqueSorted(canonical);
}

/** A short stable key of the canonical form (a uuid); stored under a unique index so equal specs share one row. */
export function specKey(filters: Filter[]): string {
  return audienceSpec(filters).key;
}

/** The canonical form of filters and its key, computed once (a unicast request needs both). */
export function audienceSpec(filters: Filter[]): { key: string; canonical: Filter[] } {
  const one = filters.length === 1 ? filters[0]! : undefined;
  const value = one?.criteria.length === 1 ? one.criteria[0] : undefined;
  // One device or one user, the shape of most traffic: canonical as it is, its stable JSON written directly
  if (one && one.not_filter !== true && typeof value === 'string')
    return {
      key: digest(`[{"criteria":[${JSON.stringify(value)}],"name":${JSON.stringify(one.name)}}]`),
      canonical: [{ name: one.name, criteria: [value] }],
    };
  const canonical = canonicalFilters(filters);
  return { key: digest(stableStringify(canonical)), canonical };
}

/**
 * The first 128 bits of the text's SHA-256, written as a uuid: 16 bytes in the row and its unique index (migration
 * 044). Two specs share a key only by a collision crafted at about 2^64 hashes, and then only within one app.
 */
function digest(text: string): string {
  const h = hash('sha256', text, 'hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** The key of the all-devices audience: the nil uuid, which no digest of a filter list is but by chance. */
export const ALL_DEVICES_SPEC_KEY = '00000000-0000-0000-0000-000000000000';

function canonicalCriterion(c: Criterion): Criterion {
  if (isPlainObject(c) && 'unit' in c && typeof c.unit === 'string') {
    return { ...c, unit: UNIT_ALIASES[c.unit] ?? c.unit } as Criterion;
  }
  return c;
}

function uniqueSorted<T>(items: T[]): T[] {
  const byKey = new Map(items.map((i) => [stableStringify(i), i] as const));
  return [...byKey.keys()].sort().map((k) => byKey.get(k)!);
}

/** JSON with object keys sorted at every depth. */
export function stableStringify(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableStringify).join(',')}]`;
  if (isPlainObject(value)) {
    const entries = Object.keys(value)
      .sort()
      .filter((k) => value[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${stableStringify(value[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Filters that name devices one by one: an audience of at most this many devices is resolved when it is created. */
export const DIRECT_AUDIENCE_MAX_DEVICES = 100;

/**
 * Whether the filters pick out a few named devices or users (a non-negated `device_id` or `user_id` filter with
 * few criteria): such an audience is small and found through an index, so resolving it costs one cheap query.
 */
export function namesFewDevices(filters: Filter[] | null): boolean {
  return (filters ?? []).some(
    (f) =>
      !f.not_filter &&
      (f.name === 'device_id' || f.name === 'user_id') &&
      f.criteria.length > 0 &&
      f.criteria.length <= DIRECT_AUDIENCE_MAX_DEVICES,
  );
}
