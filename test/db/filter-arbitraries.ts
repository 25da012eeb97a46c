import fc from 'fast-check';
import { resolveDate } from '../../src/domain/date-math.js';
import type { Filter } from '../../src/domain/filters.js';
import { DISTANCE_UNITS_IN_METERS } from '../../src/domain/vocabulary.js';
import { snapCoordinate } from '../../src/domain/geo.js';
import type { CustomType, RefDevice, Scalar } from './filter-reference.js';

/**
 * Random devices and filter lists over every attribute kind. Values come from small pools so filters hit
 * often, and dates include the exact instants the date-math pool resolves to, so range bounds (gt vs gte,
 * rounding) are met exactly, not just approached.
 */
export const STRING_POOLS: Record<string, string[]> = {
  locale: ['en_US', 'fr_FR', 'de_DE'],
  time_zone: ['Europe/Paris', 'UTC'],
  os_name: ['iOS', 'Android'],
  os_version: ['17.4', '14'],
  app_version: ['1.0', '1.1', '2.0'],
  sdk_version: ['6.0.1', '5.9'],
  country: ['FR', 'US', 'DE'],
  marketing_name: ['Pixel 8', 'iPhone15,2'],
  user_id: ['u1', 'u2', 'u3'],
  user_email: ['a@x.io', 'b@x.io'],
  notifications_allowed: ['Enabled', 'Disabled', 'Unknown'],
};

export const DATE_MATH = [
  'now',
  'now-1h',
  'now-1d',
  'now-7d',
  'now/d',
  'now-1d/d',
  'now/w',
  'now-1w/w',
  'now/M',
  'now-1M',
  'now-1M/M',
  'now-1y',
  'now+1d',
  'now-30d/d',
  'now-24H',
  'now-1d+12h',
  '2024-01-31||+1M',
  '2024-02-29||/M',
];

const NUMBERS = [-1, 0, 1, 2, 2.5, 3, 5, 7];
const FLOATS = [0.1, 0.5, 1.5, -2.25, 3];
const COLORS = ['red', 'green', 'blue'];
const EVENTS: [string, string][] = [
  ['', 'open'],
  ['', 'buy'],
  ['Public Api', 'buy'],
  ['Mixpanel', 'open'],
];
const GRID = [-1, -0.5, 0, 0.5, 1, 1.5];
const UNITS = Object.keys(DISTANCE_UNITS_IN_METERS);

const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: null, freq: 3 });

/** The instants a scenario's dates are drawn from: the date-math pool resolved at `now`, and neighbours. */
function instants(now: Date): Date[] {
  const resolved = DATE_MATH.map((e) => resolveDate(e, now));
  return [
    ...resolved,
    ...resolved.map((d) => new Date(d.getTime() - 1)),
    new Date('2024-01-31T00:00:00Z'),
    new Date('2024-03-01T00:00:00Z'),
  ];
}

const dateArb = (now: Date) =>
  fc.oneof(
    fc.constantFrom(...instants(now)),
    fc.integer({ min: 0, max: 400 * 86_400_000 }).map((ms) => new Date(now.getTime() - ms)),
  );

// Stored coordinates are snapped as the API stores them (tiny values are 0); criteria are not, on purpose.
const pointArb = fc.oneof(
  { weight: 4, arbitrary: fc.record({ lat: fc.constantFrom(...GRID), lng: fc.constantFrom(...GRID) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      lat: fc.double({ min: -2, max: 2, noNaN: true }).map(snapCoordinate),
      lng: fc.double({ min: -2, max: 2, noNaN: true }).map(snapCoordinate),
    }),
  },
);

function customArb(now: Date): fc.Arbitrary<RefDevice['custom']> {
  const attr = (type: CustomType, values: fc.Arbitrary<Scalar>, arrays = true) =>
    maybe((arrays ? fc.array(values, { minLength: 1, maxLength: 3 }) : values.map((v) => [v])).map((vs) => ({ type, values: vs })));
  return fc
    .record({
      s1: attr('string', fc.constantFrom(...COLORS)),
      n1: attr('integer', fc.integer({ min: -3, max: 3 })),
      f1: attr('float', fc.constantFrom(...FLOATS)),
      d1: attr('date', dateArb(now)),
      b1: attr('boolean', fc.boolean(), false),
      // the same name with different types on different devices
      x: maybe(
        fc.oneof(
          fc.constant({ type: 'string' as const, values: ['red'] as Scalar[] }),
          fc.constant({ type: 'integer' as const, values: [1] as Scalar[] }),
        ),
      ),
    })
    .map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== null)) as RefDevice['custom']);
}

function deviceArb(now: Date): fc.Arbitrary<RefDevice> {
  const strings = fc.record(
    Object.fromEntries(Object.entries(STRING_POOLS).map(([k, pool]) => [k, maybe(fc.constantFrom(...pool))])) as Record<
      string,
      fc.Arbitrary<string | null>
    >,
  );
  const events = fc.subarray(EVENTS).chain((keys) =>
    fc.tuple(
      ...keys.map(([source, name]) =>
        fc.record({
          source: fc.constant(source),
          name: fc.constant(name),
          count: fc.integer({ min: 1, max: 4 }),
          a: dateArb(now),
          b: dateArb(now),
        }),
      ),
    ),
  );
  return fc.record({
    id: fc.uuid({ version: 4 }),
    platform: fc.constantFrom('ios' as const, 'android' as const),
    erased: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
    development: fc.boolean(),
    strings,
    badge: maybe(fc.integer({ min: 0, max: 5 })),
    tags: fc.subarray(['a', 'b', 'c', 'd']),
    created_at: dateArb(now),
    registered_at: dateArb(now),
    sdk: maybe(pointArb),
    ip: maybe(pointArb),
    custom: customArb(now),
    events: events.map((es) =>
      es.map((e) => ({ source: e.source, name: e.name, count: e.count, first: e.a < e.b ? e.a : e.b, last: e.a < e.b ? e.b : e.a })),
    ),
  });
}

// ---- filters ----

function rangeArb<T>(values: fc.Arbitrary<T>) {
  return fc.record({ gt: values, gte: values, lt: values, lte: values }, { requiredKeys: [] }).filter((r) => Object.keys(r).length > 0);
}

const dateValueArb = (now: Date) =>
  fc.oneof(
    fc.constantFrom(...DATE_MATH),
    fc.constantFrom(...instants(now)).map((d) => d.toISOString()),
  );
const numberCriteria = fc.array(fc.oneof(fc.constantFrom(...NUMBERS), rangeArb(fc.constantFrom(...NUMBERS))), {
  minLength: 1,
  maxLength: 3,
});
const dateCriteria = (now: Date) => fc.array(fc.oneof(dateValueArb(now), rangeArb(dateValueArb(now))), { minLength: 1, maxLength: 3 });
const pick = <T>(pool: T[]) => fc.subarray(pool, { minLength: 1, maxLength: Math.min(3, pool.length) });

const geoCriterion = fc.oneof(
  fc
    .record({
      point: fc.oneof(
        fc.record({ latitude: fc.constantFrom(...GRID), longitude: fc.constantFrom(...GRID) }),
        fc.record({ latitude: fc.double({ min: -2, max: 2, noNaN: true }), longitude: fc.double({ min: -2, max: 2, noNaN: true }) }),
      ),
      meters: fc.oneof(
        { weight: 6, arbitrary: fc.double({ min: 0, max: 300_000, noNaN: true }) },
        { weight: 1, arbitrary: fc.constantFrom(0, 25_000_000) },
      ),
      unit: fc.constantFrom(...UNITS),
    })
    .map(({ point, meters, unit }) => ({ point, distance: meters / DISTANCE_UNITS_IN_METERS[unit]!, unit })),
  fc
    .array(fc.record({ latitude: fc.constantFrom(...GRID), longitude: fc.constantFrom(...GRID) }), { minLength: 3, maxLength: 6 })
    .map((polygon) => ({ polygon })),
);

function filterArb(now: Date, ids: string[]): fc.Arbitrary<Filter> {
  const stringFilters = Object.entries(STRING_POOLS).map(([name, pool]) =>
    fc.record({ name: fc.constant(name), criteria: pick(name === 'notifications_allowed' ? pool : [...pool, 'zz']) }),
  );
  const kinds: fc.Arbitrary<{ name: string; criteria: unknown[] }>[] = [
    ...stringFilters,
    fc.record({
      name: fc.constant('device_id'),
      criteria: pick([
        ...ids.slice(0, 4),
        ...ids.slice(0, 1).map((s) => s.toUpperCase()),
        '00000000-0000-4000-8000-000000000000',
        'not-a-uuid',
      ]),
    }),
    fc.record({ name: fc.constant('development'), criteria: pick([true, false]) }),
    fc.record({ name: fc.constant('tags'), criteria: pick(['a', 'b', 'c', 'd', 'e']) }),
    fc.record({ name: fc.constant('badge'), criteria: numberCriteria }),
    fc.record({ name: fc.constantFrom('created_at', 'registered_at'), criteria: dateCriteria(now) }),
    fc.record({
      name: fc.constantFrom('custom.string.s1', 'custom.string.x', 'custom.string.missing'),
      criteria: pick([...COLORS, 'black']),
    }),
    fc.record({
      name: fc.constantFrom('custom.integer.n1', 'custom.integer.x', 'custom.float.f1', 'custom.float.n1'),
      criteria: fc.array(fc.oneof(fc.constantFrom(...NUMBERS, ...FLOATS), rangeArb(fc.constantFrom(...NUMBERS, ...FLOATS))), {
        minLength: 1,
        maxLength: 3,
      }),
    }),
    fc.record({ name: fc.constant('custom.date.d1'), criteria: dateCriteria(now) }),
    fc.record({ name: fc.constantFrom('custom.boolean.b1', 'custom.boolean.s1'), criteria: pick([true, false]) }),
    fc.record({
      name: fc.constantFrom('events.open', 'events.buy', 'events.Public Api.buy', 'events.Mixpanel.open', 'events.never'),
      criteria: fc.array(
        fc.oneof(
          fc.constant(true),
          fc.integer({ min: 0, max: 4 }),
          rangeArb(fc.constantFrom(0, 0.5, 1, 2, 3, 5)),
          rangeArb(dateValueArb(now)),
        ),
        { minLength: 1, maxLength: 3 },
      ),
    }),
    fc.record({ name: fc.constantFrom('location', 'sdk_location'), criteria: fc.array(geoCriterion, { minLength: 1, maxLength: 3 }) }),
  ];
  return fc.tuple(fc.oneof(...kinds), fc.boolean()).map(([f, not]) => (not ? { ...f, not_filter: true } : f) as Filter);
}

export interface Scenario {
  now: Date;
  devices: RefDevice[];
  filterLists: Filter[][];
}

const NOWS = ['2025-03-31T23:30:00.000Z', '2024-02-29T00:00:00.000Z', '2025-06-09T12:00:00.500Z', '2025-01-01T00:00:00.000Z'].map((s) =>
  new Date(s).getTime(),
);

export function scenarioArb(opts: { devices: number; filterLists: number }): fc.Arbitrary<Scenario> {
  const nowArb = fc
    .oneof(fc.constantFrom(...NOWS), fc.integer({ min: Date.UTC(2024, 0, 1), max: Date.UTC(2026, 0, 1) }))
    .map((t) => new Date(t));
  return nowArb.chain((now) =>
    fc.uniqueArray(deviceArb(now), { minLength: 1, maxLength: opts.devices, selector: (d) => d.id }).chain((devices) =>
      fc
        .array(
          fc.array(
            filterArb(
              now,
              devices.map((d) => d.id),
            ),
            { minLength: 1, maxLength: 3 },
          ),
          { minLength: opts.filterLists, maxLength: opts.filterLists },
        )
        .map((filterLists) => ({ now, devices, filterLists })),
    ),
  );
}
