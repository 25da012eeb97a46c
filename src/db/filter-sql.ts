import { sql, type RawBuilder, type SqlBool } from 'kysely';
import { PLAN_EACH_RUN } from './database.js';
import { EARLIEST_INSTANT, LATEST_INSTANT, resolveDate } from '../domain/date-math.js';
import {
  isPolygon,
  isRange,
  parseFilterName,
  type Criterion,
  type DistanceCriterion,
  type Filter,
  type FilterTarget,
  type RangeCriterion,
} from '../domain/filters.js';
import type { CustomType, DeviceAttribute } from '../domain/vocabulary.js';
import {
  boundingBox,
  chordOfRadius,
  distanceInMeters,
  MICRODEGREES,
  polygonEdges,
  snapCoordinate,
  type Edge,
  type LatLng,
} from '../domain/geo.js';
import { isUuid } from '../domain/cursor.js';

/**
 * Compiles an audience's filters to one SQL predicate over `devices AS d` (custom attributes and events are
 * EXISTS subqueries on their tables). Criteria of one filter are OR'ed, filters AND'ed. A negated filter
 * matches every device the filter does not, including devices lacking the attribute.
 *
 * Use the predicate in a WHERE clause: a positive filter on a NULL column yields NULL (= no match) so that
 * indexes stay usable; wrap it in `IS TRUE` before negating or OR'ing it with something else.
 * Date math resolves against `ctx.now`: a fan-out that reads several pages passes the same `now` to each.
 */
export interface CompileContext {
  now: Date;
}

type Predicate = RawBuilder<SqlBool>;
type Operand = RawBuilder<unknown>;
/** `nullable`: the predicate is NULL where the device lacks the attribute (matters only for negation). */
interface Compiled {
  pred: Predicate;
  nullable: boolean;
}

const TRUE: Predicate = sql<SqlBool>`true`;
const FALSE: Predicate = sql<SqlBool>`false`;

/** The filters as one predicate; a statement holding one is planned for its values each run (PLAN_EACH_RUN). */
export function compileFilters(filters: Filter[] | null, ctx: CompileContext): Predicate {
  if (!filters || filters.length === 0) return TRUE;
  return sql<SqlBool>`${sql.raw(PLAN_EACH_RUN)} ${and(filters.map((f) => compileFilter(f, ctx)))}`;
}

function compileFilter(filter: Filter, ctx: CompileContext): Predicate {
  const target = parseFilterName(filter.name);
  if (!target) throw new Error(`unknown filter name ${filter.name}`); // validated at the API; stored specs are valid
  const { pred, nullable } = compileCriteria(target, filter.criteria, ctx);
  if (!filter.not_filter) return pred;
  // `NOT EXISTS` stays an anti-join; a nullable predicate needs IS NOT TRUE so a missing value matches.
  return nullable ? sql<SqlBool>`(${pred}) is not true` : sql<SqlBool>`not ${pred}`;
}

function compileCriteria(target: FilterTarget, criteria: Criterion[], ctx: CompileContext): Compiled {
  switch (target.type) {
    case 'device':
      return compileDeviceAttribute(target.attribute, criteria, ctx);
    case 'custom':
      return { pred: compileCustom(target.customType, target.attribute, criteria, ctx), nullable: false };
    case 'event':
      return { pred: compileEvent(target.source, target.event, criteria, ctx), nullable: false };
  }
}

const STRING_COLUMNS: Partial<Record<DeviceAttribute, string>> = {
  locale: 'locale',
  time_zone: 'time_zone',
  os_name: 'os_name',
  os_version: 'os_version',
  app_version: 'app_version',
  sdk_version: 'sdk_version',
  country: 'country',
  marketing_name: 'marketing_name',
  user_id: 'user_id',
  user_email: 'user_email',
  notifications_allowed: 'notifications_allowed',
};

function compileDeviceAttribute(attribute: DeviceAttribute, criteria: Criterion[], ctx: CompileContext): Compiled {
  if (attribute === 'notifications_allowed' && criteria.includes('Unknown')) {
    // a device that never said whether it may show pushes is `Unknown`, the third of the contract's values
    const stated = anyOf(sql.ref('d.notifications_allowed'), criteria as string[], 'text');
    return { pred: sql<SqlBool>`(${stated} or d.notifications_allowed is null)`, nullable: false };
  }
  if (attribute === 'platform') {
    // the record's names (iOS, Android, Web, Huawei) are the stored ones capitalised
    const stored = (criteria as string[]).map((c) => c.toLowerCase());
    return { pred: anyOf(sql.ref('d.platform'), stored, 'text'), nullable: false };
  }
  const stringColumn = STRING_COLUMNS[attribute];
  if (stringColumn) return { pred: anyOf(sql.ref(`d.${stringColumn}`), criteria as string[], 'text'), nullable: true };
  switch (attribute) {
    case 'device_id': {
      const ids = (criteria as string[]).filter(isUuid).map((s) => s.toLowerCase());
      return { pred: ids.length ? deviceIdIn(ids) : FALSE, nullable: false };
    }
    case 'tags': {
      // device_tags mirrors d.tags (migration 002's trigger) and is the index a tag is found by (migration 052)
      const tagged = sql<SqlBool>`g.app_id = d.app_id and g.tag = any(${criteria as string[]}::text[]) and g.device_id = d.id`;
      return { pred: sql<SqlBool>`exists (select 1 from device_tags g where ${tagged})`, nullable: false };
    }
    case 'development':
      return { pred: booleanCriteria(sql.ref('d.development'), criteria as boolean[]), nullable: false };
    case 'badge':
      return { pred: integerCriteria(sql.ref('d.badge'), criteria), nullable: true };
    case 'created_at':
    case 'registered_at':
      return { pred: dateCriteria(sql.ref(`d.${attribute}`), criteria, ctx), nullable: false };
    case 'location':
      return {
        pred: compileGeo(sql`coalesce(d.sdk_latitude, d.ip_latitude)`, sql`coalesce(d.sdk_longitude, d.ip_longitude)`, criteria),
        nullable: true,
      };
    case 'sdk_location':
      return { pred: compileGeo(sql`d.sdk_latitude`, sql`d.sdk_longitude`, criteria), nullable: true };
    default:
      throw new Error(`device attribute ${attribute} has no compiler`);
  }
}

/** Custom attributes: one row per value (arrays: per element), so EXISTS means "any element matches". */
function compileCustom(type: CustomType, name: string, criteria: Criterion[], ctx: CompileContext): Predicate {
  return sql<SqlBool>`exists (
    select 1
    from device_attributes a
    where a.device_id = d.id and a.app_id = d.app_id and ${customRows(type, name, criteria, ctx)}
  )`;
}

/** The attribute rows (alias `a`) a custom filter accepts; the type is a literal so its partial index is used. */
function customRows(type: CustomType, name: string, criteria: Criterion[], ctx: CompileContext): Predicate {
  let value: Predicate;
  if (type === 'string') value = anyOf(sql.ref('a.str_value'), criteria as string[], 'text');
  else if (type === 'boolean') value = booleanCriteria(sql.ref('a.bool_value'), criteria as boolean[]);
  else if (type === 'date') value = dateCriteria(sql.ref('a.date_value'), criteria, ctx);
  else value = numberCriteria(sql.ref('a.num_value'), criteria);
  return sql<SqlBool>`a.name = ${name} and a.type = ${sql.lit(type)} and ${value}`;
}

/**
 * Events: `true` = happened; numbers and number ranges test the count; date ranges test the last time.
 * A device without the event has count 0, so when 0 satisfies a count criterion the filter is written as
 * "no row that fails", which keeps it one anti-join (a device has at most one row per source and name).
 */
function compileEvent(source: string, name: string, criteria: Criterion[], ctx: CompileContext): Predicate {
  const { row, matches, zeroMatches } = eventRows(source, name, criteria, ctx);
  const own = sql`e.device_id = d.id and e.app_id = d.app_id and ${row}`;
  if (!zeroMatches) return sql<SqlBool>`exists (select 1 from device_events e where ${own} and ${matches})`;
  return sql<SqlBool>`not exists (select 1 from device_events e where ${own} and not ${matches})`;
}

/** The event's rows (alias `e`), what a row must satisfy, and whether a device without the row matches. */
function eventRows(source: string, name: string, criteria: Criterion[], ctx: CompileContext) {
  const conds: Predicate[] = [];
  let zeroMatches = false;
  for (const c of criteria) {
    if (c === true) conds.push(TRUE);
    else if (typeof c === 'number') {
      conds.push(integerCriteria(sql.ref('e.count'), [c]));
      zeroMatches ||= c === 0;
    } else if (isRange(c) && rangeValues(c).every((v) => typeof v === 'number')) {
      conds.push(integerCriteria(sql.ref('e.count'), [c]));
      zeroMatches ||= inRange(0, c);
    } else if (isRange(c)) {
      conds.push(dateCriteria(sql.ref('e.last_happened_at'), [c], ctx));
    }
  }
  const matches = conds.includes(TRUE) ? TRUE : or(conds);
  return { row: sql<SqlBool>`e.source = ${source} and e.name = ${name}`, matches, zeroMatches };
}

// ---- device_count ----

/**
 * device_count as one statement (column `n`). A lone custom-attribute, tag or event filter is counted on its
 * own table by an index-only scan, and a negated one as the live total minus that: every row of those tables
 * belongs to a live device of its app (migration 002 deletes them on erase), so joining every device would
 * add nothing but time. Anything else counts the general predicate over devices.
 */
/**
 * Filters that only name devices (by device_id) or users (by user_id), the shape of most notifications: the keys,
 * as `compileFilters` would match them (a device_id that is no UUID matches nothing), so a lookup by key selects
 * the same devices. Null for any other filters.
 */
export function namedKeys(filters: Filter[] | null): { by: 'device_id' | 'user_id'; keys: string[] } | null {
  if (filters?.length !== 1) return null;
  const [f] = filters as [Filter];
  if (f.not_filter || !f.criteria.every((c) => typeof c === 'string')) return null;
  const keys = f.criteria as string[];
  if (f.name === 'device_id') return { by: 'device_id', keys: keys.filter(isUuid).map((s) => s.toLowerCase()) };
  if (f.name === 'user_id') return { by: 'user_id', keys };
  return null;
}

export function compileCount(appId: string, filters: Filter[] | null, ctx: CompileContext): RawBuilder<{ n: number }> {
  const live = sql<number>`(select count(*) from devices d where d.app_id = ${appId} and d.erased_at is null)`;
  const only = filters?.length === 1 ? filters[0]! : null;
  const target = only && parseFilterName(only.name);
  const side = target ? sideCount(appId, target, only.criteria, ctx, live) : null;
  if (side) return sql<{ n: number }>`select ${only!.not_filter ? sql`${live} - ${side}` : side} as n`;
  return sql<{
    n: number;
  }>`select count(*) as n from devices d where d.app_id = ${appId} and d.erased_at is null and ${compileFilters(filters, ctx)}`;
}

/** How many live devices a custom, tag or event filter matches, from its table alone; null for other filters. */
function sideCount(
  appId: string,
  t: FilterTarget,
  criteria: Criterion[],
  ctx: CompileContext,
  live: RawBuilder<number>,
): RawBuilder<number> | null {
  if (t.type === 'custom') {
    // A scalar attribute is one row; only array elements can repeat a device, so only they are de-duplicated
    // (in their own subquery: PostgreSQL 16+ would otherwise sort every matching row for the DISTINCT).
    const rows = customRows(t.customType, t.attribute, criteria, ctx);
    return sql<number>`((select count(*) from device_attributes a where a.app_id = ${appId} and ${rows} and not a.is_array)
      + (select count(distinct a.device_id) from device_attributes a where a.app_id = ${appId} and ${rows} and a.is_array))`;
  }
  if (t.type === 'event') {
    const { row, matches, zeroMatches } = eventRows(t.source, t.event, criteria, ctx);
    const rows = (cond: Predicate) => sql<number>`(select count(*) from device_events e where e.app_id = ${appId} and ${row} and ${cond})`;
    return zeroMatches ? sql<number>`(${live} - ${rows(sql<SqlBool>`not ${matches}`)})` : rows(matches);
  }
  if (t.type === 'device' && t.attribute === 'tags') {
    const tags = [...new Set(criteria as string[])];
    const n = tags.length === 1 ? sql`count(*)` : sql`count(distinct g.device_id)`; // (device, tag) is unique
    return sql<number>`(select ${n} from device_tags g where g.app_id = ${appId} and g.tag = any(${tags}::text[]))`;
  }
  return null;
}

// ---- geo ----

/** Distance and polygon criteria on one location (a pair of columns that are both set or both NULL). */
function compileGeo(lat: Operand, lng: Operand, criteria: Criterion[]): Predicate {
  return or(
    criteria.map((c) => (isPolygon(c) ? polygonPredicate(lat, lng, c.polygon) : distancePredicate(lat, lng, c as DistanceCriterion))),
  );
}

/**
 * Within a great-circle radius: the GiST index finds the points in a cube around the centre, then the exact
 * test compares chord lengths. Both ends go through pushd_geo_cube, so a device at the centre is at 0.
 */
function distancePredicate(lat: Operand, lng: Operand, c: DistanceCriterion): Predicate {
  const chord = chordOfRadius(distanceInMeters(c));
  if (chord === null) return sql<SqlBool>`${lat} is not null`;
  const center = sql`pushd_geo_cube(${f8(snapCoordinate(c.point.latitude))}, ${f8(snapCoordinate(c.point.longitude))})`;
  const here = sql`pushd_geo_cube(${lat}, ${lng})`;
  const half = chord * (1 + 1e-9) + 1e-12; // the search box is a superset of what the exact test accepts
  return sql<SqlBool>`(
    ${lat} is not null
    and ${here} <@ cube_enlarge(${center}, ${f8(half)}, 3)
    and cube_distance(${here}, ${center}) <= ${f8(chord)}
  )`;
}

/**
 * Point in polygon, planar in (lng, lat): on an edge or vertex counts as inside, else the even-odd count of
 * edges crossed by a ray towards +longitude. Decided in whole micro-degrees with int8 arithmetic, which is
 * exact (see domain/geo.ts); the edges are constants, so the test is inlined per polygon. The GiST box
 * (widened past PostgreSQL's 1e-6 geometric fuzz and the rounding) only narrows the candidates.
 */
function polygonPredicate(lat: Operand, lng: Operand, points: LatLng[]): Predicate {
  const b = boundingBox(points);
  const m = 1e-5;
  const box = sql`box(point(${f8(b.minLng - m)}, ${f8(b.minLat - m)}), point(${f8(b.maxLng + m)}, ${f8(b.maxLat + m)}))`;
  const micro = (deg: Operand) => sql`floor(${deg} * ${f8(MICRODEGREES)} + ${f8(0.5)})::int8`;
  const [x, y] = [micro(lng), micro(lat)];
  const cross = (e: Edge) => sql`(${i8(e.x2 - e.x1)} * (${y} - ${i8(e.y1)}) - ${i8(e.y2 - e.y1)} * (${x} - ${i8(e.x1)}))`;
  const edges = polygonEdges(points);
  const onEdge = edges.map(
    (e) =>
      sql<SqlBool>`(
        ${cross(e)} = 0
        and ${x} between ${i8(Math.min(e.x1, e.x2))} and ${i8(Math.max(e.x1, e.x2))}
        and ${y} between ${i8(Math.min(e.y1, e.y2))} and ${i8(Math.max(e.y1, e.y2))}
      )`,
  );
  const crossings = edges
    .filter((e) => e.y1 !== e.y2)
    .map((e) =>
      e.y1 < e.y2
        ? sql`(${y} >= ${i8(e.y1)} and ${y} < ${i8(e.y2)} and ${cross(e)} > 0)::int`
        : sql`(${y} >= ${i8(e.y2)} and ${y} < ${i8(e.y1)} and ${cross(e)} < 0)::int`,
    );
  const inside = crossings.length ? [...onEdge, sql<SqlBool>`(${sql.join(crossings, sql` + `)}) % 2 = 1`] : onEdge;
  return sql<SqlBool>`(${lat} is not null and point(${lng}, ${lat}) <@ ${box} and ${or(inside)})`;
}

const i8 = (n: number) => sql.raw<number>(`${BigInt(n)}::int8`);

/** A float8 literal (constants of geo predicates, inlined rather than bound). String(n) round-trips. */
function f8(n: number): RawBuilder<number> {
  if (!Number.isFinite(n)) throw new Error(`not a finite number: ${n}`);
  return sql.raw<number>(`float8 '${String(n)}'`);
}

/**
 * `d.id` is one of `ids`, for a statement planned with its values (PLAN_EACH_RUN). More than one id go as an
 * InitPlan's array, whose size the planner cannot see: it reads each through the primary key, where 1,000 ids it
 * could count among an app's 100,000 devices made it scan them all (20 ms, not 3).
 */
export function deviceIdIn(ids: string[]): Predicate {
  if (ids.length <= 1) return anyOf(sql.ref('d.id'), ids, 'uuid');
  return sql<SqlBool>`d.id = any(array(select unnest(${[...ids].sort()}::uuid[])))`;
}

// ---- scalar criteria ----

export function anyOf(column: Operand, values: unknown[], pgType: string): Predicate {
  return sql<SqlBool>`${column} = any(${values}::${sql.raw(pgType)}[])`;
}

function booleanCriteria(column: Operand, values: boolean[]): Predicate {
  const t = values.includes(true);
  const f = values.includes(false);
  if (t && f) return sql<SqlBool>`${column} is not null`;
  return t ? sql<SqlBool>`${column}` : sql<SqlBool>`not ${column}`;
}

/** Numbers exact or in ranges, on a float8 column (custom integer and float attributes). */
export function numberCriteria(column: Operand, criteria: Criterion[]): Predicate {
  const exact = criteria.filter((c): c is number => typeof c === 'number');
  const parts: Predicate[] = criteria.filter(isRange).map((r) => range(column, r, (v) => sql`${v}::float8`));
  if (exact.length) parts.push(anyOf(column, exact, 'float8'));
  return or(parts);
}

const SAFE = Number.MAX_SAFE_INTEGER + 1;
const clampInt = (n: number) => Math.max(-SAFE, Math.min(SAFE, n));

/**
 * Numbers on an integer column (badge, event count), with bounds turned into integers (> 2.5 is >= 3) so the
 * comparison stays integer and indexable; a fractional exact value matches nothing.
 */
function integerCriteria(column: Operand, criteria: Criterion[]): Predicate {
  const int = (n: number) => sql`${String(clampInt(n))}::bigint`;
  const exact = criteria.filter((c): c is number => typeof c === 'number' && Number.isInteger(c));
  const parts: Predicate[] = criteria
    .filter(isRange)
    .map((r) =>
      and([
        ...(r.gt !== undefined ? [sql<SqlBool>`${column} > ${int(Math.floor(r.gt as number))}`] : []),
        ...(r.gte !== undefined ? [sql<SqlBool>`${column} >= ${int(Math.ceil(r.gte as number))}`] : []),
        ...(r.lt !== undefined ? [sql<SqlBool>`${column} < ${int(Math.ceil(r.lt as number))}`] : []),
        ...(r.lte !== undefined ? [sql<SqlBool>`${column} <= ${int(Math.floor(r.lte as number))}`] : []),
      ]),
    );
  if (exact.length)
    parts.push(
      anyOf(
        column,
        exact.map((n) => String(clampInt(n))),
        'bigint',
      ),
    );
  return or(parts);
}

/** ISO dates exact, or ranges whose bounds are ISO dates or date math resolved at query time. */
export function dateCriteria(column: Operand, criteria: Criterion[], ctx: CompileContext): Predicate {
  const toTs = (v: number | string) => sql`${timestamptz(resolveDate(String(v), ctx.now))}::timestamptz`;
  const exact = criteria.filter((c): c is string => typeof c === 'string').map((s) => timestamptz(resolveDate(s, ctx.now)));
  const parts: Predicate[] = criteria.filter(isRange).map((r) => range(column, r, toTs));
  if (exact.length) parts.push(anyOf(column, exact, 'timestamptz'));
  return or(parts);
}

/**
 * An instant as timestamptz text. Date math can reach past the dates anything stores (`now+9000y`): there it is
 * PostgreSQL's infinity, which compares as the bound means.
 */
function timestamptz(instant: Date): string {
  if (instant.getTime() > LATEST_INSTANT) return 'infinity';
  if (instant.getTime() < EARLIEST_INSTANT) return '-infinity';
  return instant.toISOString();
}

export function range(column: Operand, r: RangeCriterion, value: (v: number | string) => RawBuilder<unknown>): Predicate {
  const parts: Predicate[] = [];
  if (r.gt !== undefined) parts.push(sql<SqlBool>`${column} > ${value(r.gt)}`);
  if (r.gte !== undefined) parts.push(sql<SqlBool>`${column} >= ${value(r.gte)}`);
  if (r.lt !== undefined) parts.push(sql<SqlBool>`${column} < ${value(r.lt)}`);
  if (r.lte !== undefined) parts.push(sql<SqlBool>`${column} <= ${value(r.lte)}`);
  return and(parts);
}

const rangeValues = (r: RangeCriterion) => [r.gt, r.gte, r.lt, r.lte].filter((v) => v !== undefined);

function inRange(n: number, r: RangeCriterion): boolean {
  return (
    (r.gt === undefined || n > (r.gt as number)) &&
    (r.gte === undefined || n >= (r.gte as number)) &&
    (r.lt === undefined || n < (r.lt as number)) &&
    (r.lte === undefined || n <= (r.lte as number))
  );
}

export function and(parts: Predicate[]): Predicate {
  if (parts.length === 0) return TRUE;
  return parts.length === 1 ? parts[0]! : sql<SqlBool>`(${sql.join(parts, sql` and `)})`;
}

export function or(parts: Predicate[]): Predicate {
  if (parts.length === 0) return FALSE;
  return parts.length === 1 ? parts[0]! : sql<SqlBool>`(${sql.join(parts, sql` or `)})`;
}
