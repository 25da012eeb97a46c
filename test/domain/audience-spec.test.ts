import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ALL_DEVICES_SPEC_KEY, audienceSpec, canonicalFilters, specKey, stableStringify } from '../../src/domain/audience-spec.js';
import type { Filter } from '../../src/domain/filters.js';

/** Random filter lists (shape only: canonicalisation does not validate) and ways of rewriting one equivalently. */
const criterion = fc.oneof(
  fc.string({ maxLength: 6 }),
  fc.integer(),
  fc.boolean(),
  fc.record({ gt: fc.integer(), lte: fc.integer() }, { requiredKeys: ['gt'] }),
  fc.record({
    point: fc.record({ latitude: fc.integer({ min: -90, max: 90 }), longitude: fc.integer({ min: -180, max: 180 }) }),
    distance: fc.nat(),
    unit: fc.constantFrom('km', 'mi', 'm'),
  }),
);
const filterArb = fc.record({
  name: fc.constantFrom('locale', 'badge', 'tags', 'custom.string.a', 'events.x'),
  criteria: fc.array(criterion, { minLength: 1, maxLength: 4 }),
  not_filter: fc.option(fc.boolean(), { nil: undefined }),
});
const filtersArb = fc.array(filterArb, { minLength: 1, maxLength: 4 });

/** Rebuilds an object with its keys in reverse order, at every depth. */
function reverseKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(reverseKeys);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v)
        .reverse()
        .map(([k, x]) => [k, reverseKeys(x)]),
    );
  return v;
}

function rewrite(filters: Filter[], seed: number): Filter[] {
  const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
  const shuffle = <T>(xs: T[]) =>
    xs
      .map((x) => [rnd(1000), x] as const)
      .sort((a, b) => a[0] - b[0])
      .map(([, x]) => x);
  return shuffle(
    filters.map((f) => {
      const criteria = shuffle([...f.criteria, ...(rnd(2) ? [f.criteria[0]!] : [])]); // maybe a duplicate
      const out: Filter = { name: f.name, criteria };
      if (f.not_filter) out.not_filter = true;
      else if (rnd(2)) out.not_filter = false;
      return reverseKeys(out) as Filter;
    }),
  );
}

/** The first 128 bits of the text's SHA-256 written as a uuid, computed apart from the code under test. */
const uuidOfSha256 = (text: string) =>
  createHash('sha256')
    .update(text)
    .digest('hex')
    .slice(0, 32)
    .replace(/^(.{8})(.{4})(.{4})(.{4})/, '$1-$2-$3-$4-');

describe('audience spec canonical form', () => {
  it('writes one filter of one string criterion (one device, one user) as the general canonical form would', () => {
    const general = (filters: Filter[]) => {
      const canonical = canonicalFilters(filters);
      return { key: uuidOfSha256(stableStringify(canonical)), canonical };
    };
    fc.assert(
      fc.property(
        fc.constantFrom('device_id', 'user_id', 'custom.string.a"b'),
        fc.string({ maxLength: 40 }),
        fc.option(fc.boolean(), { nil: undefined }),
        (name, value, notFilter) => {
          const filters: Filter[] = [{ name, criteria: [value], ...(notFilter !== undefined && { not_filter: notFilter }) }];
          expect(audienceSpec(filters)).toStrictEqual(general(filters));
        },
      ),
    );
  });

  it('is invariant under reordering, duplicates and not_filter:false', () => {
    fc.assert(
      fc.property(filtersArb, fc.nat(), (filters, seed) => {
        expect(specKey(rewrite(filters as Filter[], seed))).toBe(specKey(filters as Filter[]));
      }),
    );
  });

  it('is idempotent', () => {
    fc.assert(
      fc.property(filtersArb, (filters) => {
        const once = canonicalFilters(filters as Filter[]);
        expect(canonicalFilters(once)).toStrictEqual(once);
      }),
    );
  });

  it('treats unit aliases as their unit', () => {
    const at = (unit: string) => [{ name: 'location', criteria: [{ point: { latitude: 1, longitude: 2 }, distance: 3, unit }] }];
    for (const [alias, unit] of [
      ['kilometers', 'km'],
      ['miles', 'mi'],
      ['meters', 'm'],
      ['feet', 'ft'],
      ['yards', 'yd'],
      ['inch', 'in'],
    ]) {
      expect(specKey(at(alias!))).toBe(specKey(at(unit!)));
    }
    expect(specKey(at('km'))).not.toBe(specKey(at('mi')));
    expect(specKey(at('nauticalmiles'))).not.toBe(specKey(at('mi')));
  });

  it('tells different specs apart', () => {
    const base = [{ name: 'locale', criteria: ['fr_FR'] }];
    const keys = [
      base,
      [{ name: 'locale', criteria: ['fr_FR'], not_filter: true }],
      [{ name: 'locale', criteria: ['de_DE'] }],
      [{ name: 'time_zone', criteria: ['fr_FR'] }],
      [{ name: 'locale', criteria: ['fr_FR', 'de_DE'] }],
      [
        { name: 'locale', criteria: ['fr_FR'] },
        { name: 'development', criteria: [true] },
      ],
      [{ name: 'badge', criteria: [1] }],
      [{ name: 'badge', criteria: ['1'] }],
    ].map((f) => specKey(f as Filter[]));
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('keeps the all-devices key apart from every filter key', () => {
    // the first 128 bits of the canonical form's SHA-256, as a uuid
    expect(specKey([{ name: 'locale', criteria: ['x'] }])).toBe(uuidOfSha256('[{"criteria":["x"],"name":"locale"}]'));
    expect(ALL_DEVICES_SPEC_KEY).toBe('00000000-0000-0000-0000-000000000000');
  });

  it('stableStringify sorts keys at every depth and drops undefined', () => {
    expect(stableStringify({ b: 1, a: { d: [{ z: 1, y: 2 }], c: undefined } })).toBe('{"a":{"d":[{"y":2,"z":1}]},"b":1}');
  });
});
