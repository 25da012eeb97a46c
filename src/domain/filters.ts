import { z } from 'zod';
import { isDateValue } from './date-math.js';
import {
  ATTRIBUTE_NAME,
  DEVICE_ATTRIBUTES,
  DISTANCE_UNITS_IN_METERS,
  NOTIFICATIONS_ALLOWED_VALUES,
  PLATFORM_VALUES,
  type AttributeKind,
  type CustomType,
  type DeviceAttribute,
} from './vocabulary.js';

/**
 * The filter language of on-the-fly audiences: which names exist, what criteria each accepts.
 * Filters in one array are AND'ed, criteria inside one filter OR'ed, `not_filter` negates.
 */
export type FilterTarget =
  | { type: 'device'; attribute: DeviceAttribute; kind: AttributeKind }
  | { type: 'custom'; customType: CustomType; attribute: string; kind: AttributeKind }
  | { type: 'event'; source: string; event: string };

const CUSTOM_KIND: Record<CustomType, AttributeKind> = {
  string: 'string',
  integer: 'number',
  float: 'number',
  date: 'date',
  boolean: 'boolean',
};

/** Resolves a filter name; null when it names nothing the language knows. */
export function parseFilterName(name: string): FilterTarget | null {
  if (Object.hasOwn(DEVICE_ATTRIBUTES, name)) {
    const attribute = name as DeviceAttribute;
    return { type: 'device', attribute, kind: DEVICE_ATTRIBUTES[attribute] };
  }
  const custom = /^custom\.(string|integer|float|date|boolean)\.(.+)$/.exec(name);
  if (custom) {
    const customType = custom[1] as CustomType;
    return ATTRIBUTE_NAME.test(custom[2]!) ? { type: 'custom', customType, attribute: custom[2]!, kind: CUSTOM_KIND[customType] } : null;
  }
  if (name.startsWith('events.')) {
    // events.<name> (SDK) or events.<source>.<name>; sources may hold spaces ("Public Api"), names may not hold dots.
    const rest = name.slice('events.'.length);
    const dot = rest.lastIndexOf('.');
    const source = dot < 0 ? '' : rest.slice(0, dot);
    const event = dot < 0 ? rest : rest.slice(dot + 1);
    if (!ATTRIBUTE_NAME.test(event) || (dot >= 0 && !/^[^.]{1,255}$/.test(source))) return null;
    return { type: 'event', source, event };
  }
  return null;
}

// ---- criteria shapes ----

const finite = z.number({ error: 'must be a number' }).refine(Number.isFinite, 'must be a finite number');
const latitude = finite.refine((v) => v >= -90 && v <= 90, 'latitude must be between -90 and 90');
const longitude = finite.refine((v) => v >= -180 && v <= 180, 'longitude must be between -180 and 180');
export const pointSchema = z.strictObject({ latitude, longitude }, { error: 'must be an object with latitude and longitude' });

export const distanceCriterion = z.strictObject({
  point: pointSchema,
  distance: finite.refine((v) => v >= 0, 'distance must be >= 0'),
  unit: z.string({ error: 'must be a string' }).refine((u) => Object.hasOwn(DISTANCE_UNITS_IN_METERS, u), {
    message: `unit must be one of ${Object.keys(DISTANCE_UNITS_IN_METERS).join(', ')}`,
  }),
});
export const polygonCriterion = z.strictObject({
  polygon: z.array(pointSchema, { error: 'must be an array of points' }).min(3, 'polygon needs at least 3 points'),
});

type RangeValue = number | string;
export interface RangeCriterion {
  gt?: RangeValue;
  gte?: RangeValue;
  lt?: RangeValue;
  lte?: RangeValue;
}
export type DistanceCriterion = z.infer<typeof distanceCriterion>;
export type PolygonCriterion = z.infer<typeof polygonCriterion>;
export type Criterion = string | number | boolean | RangeCriterion | DistanceCriterion | PolygonCriterion;

export interface Filter {
  name: string;
  criteria: Criterion[];
  not_filter?: boolean;
}

const RANGE_KEYS = ['gt', 'gte', 'lt', 'lte'] as const;

export const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
export const isRange = (c: unknown): c is RangeCriterion => isPlainObject(c) && RANGE_KEYS.some((k) => k in c);
export const isDistance = (c: unknown): c is DistanceCriterion => isPlainObject(c) && 'distance' in c;
export const isPolygon = (c: unknown): c is PolygonCriterion => isPlainObject(c) && 'polygon' in c;

/** Checks one criterion against what the attribute accepts; returns an error message or null. */
function checkCriterion(target: FilterTarget, c: unknown): { message: string; path?: (string | number)[] } | null {
  const kind = target.type === 'event' ? 'event' : target.kind;
  if (kind === 'geo') {
    if (!isPlainObject(c)) return { message: 'must be a distance or polygon object' };
    const schema = 'polygon' in c ? polygonCriterion : distanceCriterion;
    const r = schema.safeParse(c);
    if (r.success) return null;
    const issue = r.error.issues[0]!;
    return { message: issue.message, path: issue.path as (string | number)[] };
  }
  if (isPlainObject(c)) {
    if ('distance' in c || 'polygon' in c) return { message: 'distance and polygon criteria only apply to location and sdk_location' };
    if (!isRange(c)) return { message: 'a range object needs at least one of gt, gte, lt, lte' };
    for (const key of Object.keys(c)) {
      if (!(RANGE_KEYS as readonly string[]).includes(key))
        return { message: `unknown range key (allowed: gt, gte, lt, lte)`, path: [key] };
    }
    if (kind !== 'number' && kind !== 'date' && kind !== 'event')
      return { message: 'range criteria only apply to numbers, dates and events' };
    const values = RANGE_KEYS.filter((k) => k in c).map((k) => [k, c[k]] as const);
    const isNumber = (v: unknown) => typeof v === 'number' && Number.isFinite(v);
    const isDate = (v: unknown) => typeof v === 'string' && isDateValue(v);
    if (kind === 'number') return firstBad(values, isNumber, 'must be a number');
    if (kind === 'date') return firstBad(values, isDate, 'must be an ISO 8601 date or date-math expression within years 1 to 9999');
    // events: numbers bound the count, dates bound the last occurrence; one range object is one or the other
    const first = values[0]![1];
    return typeof first === 'number'
      ? firstBad(values, isNumber, 'must be a number (the range bounds the event count)')
      : firstBad(
          values,
          isDate,
          'must be an ISO 8601 date or date-math expression within years 1 to 9999 (the range bounds the last occurrence)',
        );
  }
  if (target.type === 'device' && target.attribute === 'platform')
    return typeof c === 'string' && (PLATFORM_VALUES as readonly string[]).includes(c)
      ? null
      : { message: `must be one of ${PLATFORM_VALUES.join(', ')}` };
  switch (kind) {
    case 'string':
    case 'tags':
      return typeof c === 'string' ? null : { message: 'must be a string' };
    case 'enum':
      return typeof c === 'string' && (NOTIFICATIONS_ALLOWED_VALUES as readonly string[]).includes(c)
        ? null
        : { message: `must be one of ${NOTIFICATIONS_ALLOWED_VALUES.join(', ')}` };
    case 'number':
      return typeof c === 'number' && Number.isFinite(c) ? null : { message: 'must be a number or a range object' };
    case 'date':
      return typeof c === 'string' && isDateValue(c)
        ? null
        : { message: 'must be an ISO 8601 date or date-math expression within years 1 to 9999, or a range object' };
    case 'boolean':
      return typeof c === 'boolean' ? null : { message: 'must be a boolean' };
    case 'event':
      if (c === true) return null;
      return typeof c === 'number' && Number.isInteger(c) && c >= 0
        ? null
        : { message: 'must be true, a count (integer >= 0) or a range object' };
  }
  return { message: 'is not a valid criterion' };
}

/** Names the first bound that is not of the kind the attribute compares as. */
function firstBad(values: (readonly [string, unknown])[], ok: (v: unknown) => boolean, message: string) {
  const bad = values.find(([, v]) => !ok(v));
  return bad ? { message, path: [bad[0]] } : null;
}

export const filterSchema = z
  .strictObject(
    {
      name: z.string({ error: 'must be a string' }),
      criteria: z.array(z.unknown(), { error: 'must be an array' }).min(1, 'must have at least one element'),
      not_filter: z.boolean({ error: 'must be a boolean' }).optional(),
    },
    { error: (issue) => (issue.code === 'invalid_type' ? 'must be a filter object {"name", "criteria", "not_filter"?}' : undefined) },
  )
  .superRefine((f, ctx) => {
    const target = parseFilterName(f.name);
    if (!target) {
      ctx.addIssue({
        code: 'custom',
        path: ['name'],
        message: 'must be a device attribute, custom.<string|integer|float|date|boolean>.<name>, events.<name> or events.<source>.<name>',
      });
      return;
    }
    f.criteria.forEach((c, i) => {
      const problem = checkCriterion(target, c);
      if (problem) ctx.addIssue({ code: 'custom', path: ['criteria', i, ...(problem.path ?? [])], message: problem.message });
    });
  })
  .transform((f) => f as Filter);

/** Filters one audience may hold: each is a join its statement plans, and a hundred take the planner seconds. */
export const MAX_FILTERS = 50;
/** Polygon points one audience may hold in all: its statement tests each edge inline. */
export const MAX_POLYGON_POINTS = 1000;

/** An audience's filter list, within what its statement can plan and run in a request's time. */
export const filterListSchema = z
  .array(filterSchema, { error: 'must be an array of filters' })
  .max(MAX_FILTERS, `must hold at most ${MAX_FILTERS} filters`)
  .superRefine((filters, ctx) => {
    let points = 0;
    for (const [i, f] of filters.entries())
      for (const [j, c] of f.criteria.entries()) {
        // a criterion its filter refused (a polygon that is not an array) has no points to count
        if (!isPolygon(c) || !Array.isArray(c.polygon)) continue;
        points += c.polygon.length;
        if (points > MAX_POLYGON_POINTS) {
          ctx.addIssue({
            code: 'custom',
            path: [i, 'criteria', j, 'polygon'],
            message: `polygons hold at most ${MAX_POLYGON_POINTS} points in all`,
          });
          return;
        }
      }
  });
