import { resolveDate } from '../../src/domain/date-math.js';
import { isPlainObject, parseFilterName, type Criterion, type Filter, type RangeCriterion } from '../../src/domain/filters.js';
import { DISTANCE_UNITS_IN_METERS } from '../../src/domain/vocabulary.js';

/**
 * An in-memory evaluator of the filter language, written from the language's rules and not from the SQL
 * compiler: the property test holds the compiler to it. Deliberately naive: a device is a plain object and
 * every criterion is tested one by one.
 */
export type CustomType = 'string' | 'integer' | 'float' | 'date' | 'boolean';
export type Scalar = string | number | boolean | Date;

export interface RefDevice {
  id: string;
  platform: 'ios' | 'android' | 'web' | 'huawei';
  erased: boolean;
  development: boolean;
  strings: Record<string, string | null>; // locale, time_zone, os_name, ..., notifications_allowed
  badge: number | null;
  tags: string[];
  created_at: Date;
  registered_at: Date;
  sdk: { lat: number; lng: number } | null;
  ip: { lat: number; lng: number } | null;
  custom: Record<string, { type: CustomType; values: Scalar[] }>;
  events: { source: string; name: string; count: number; first: Date; last: Date }[];
}

export const EARTH_RADIUS_M = 6_371_008.7714; // the language's sphere (as Elasticsearch), restated here on purpose

export function refMatches(d: RefDevice, filters: Filter[], now: Date): boolean {
  if (d.erased) return false;
  return filters.every((f) => (f.not_filter ? !filterHolds(d, f, now) : filterHolds(d, f, now)));
}

function filterHolds(d: RefDevice, f: Filter, now: Date): boolean {
  const target = parseFilterName(f.name);
  if (!target) throw new Error(`bad filter name ${f.name}`);
  return f.criteria.some((c) => {
    if (target.type === 'event') return eventHolds(d, target.source, target.event, c, now);
    if (target.type === 'custom') {
      const attr = d.custom[target.attribute];
      if (!attr || attr.type !== target.customType) return false;
      return attr.values.some((v) => scalarHolds(v, c, now));
    }
    return deviceHolds(d, target.attribute, c, now);
  });
}

function deviceHolds(d: RefDevice, attribute: string, c: Criterion, now: Date): boolean {
  switch (attribute) {
    case 'device_id':
      return typeof c === 'string' && c.toLowerCase() === d.id;
    case 'development':
      return c === d.development;
    case 'tags':
      return d.tags.includes(c as string);
    case 'badge':
      return d.badge !== null && scalarHolds(d.badge, c, now);
    case 'created_at':
      return scalarHolds(d.created_at, c, now);
    case 'registered_at':
      return scalarHolds(d.registered_at, c, now);
    case 'location':
    case 'sdk_location': {
      const p = attribute === 'sdk_location' ? d.sdk : (d.sdk ?? d.ip);
      return p !== null && geoHolds(p, c);
    }
    case 'notifications_allowed':
      return (d.strings.notifications_allowed ?? 'Unknown') === c;
    case 'platform':
      return d.platform === String(c).toLowerCase();
    default: {
      const v = d.strings[attribute];
      return v !== null && v !== undefined && v === c;
    }
  }
}

/** A device without the event has count 0 and no last time. */
function eventHolds(d: RefDevice, source: string, name: string, c: Criterion, now: Date): boolean {
  const e = d.events.find((x) => x.source === source && x.name === name);
  const count = e?.count ?? 0;
  if (c === true) return e !== undefined;
  if (typeof c === 'number') return count === c;
  const r = c as RangeCriterion;
  const bounds = [r.gt, r.gte, r.lt, r.lte].filter((v) => v !== undefined);
  if (bounds.every((v) => typeof v === 'number')) return inRange(count, r, (v) => v as number);
  return e !== undefined && inRange(e.last.getTime(), r, (v) => resolveDate(String(v), now).getTime());
}

function scalarHolds(v: Scalar, c: Criterion, now: Date): boolean {
  if (v instanceof Date) {
    if (typeof c === 'string') return v.getTime() === resolveDate(c, now).getTime();
    return isPlainObject(c) && inRange(v.getTime(), c as RangeCriterion, (b) => resolveDate(String(b), now).getTime());
  }
  if (typeof v === 'number') {
    if (typeof c === 'number') return v === c;
    return isPlainObject(c) && inRange(v, c as RangeCriterion, (b) => b as number);
  }
  return v === c;
}

function inRange(v: number, r: RangeCriterion, value: (b: number | string) => number): boolean {
  if (r.gt !== undefined && !(v > value(r.gt))) return false;
  if (r.gte !== undefined && !(v >= value(r.gte))) return false;
  if (r.lt !== undefined && !(v < value(r.lt))) return false;
  if (r.lte !== undefined && !(v <= value(r.lte))) return false;
  return true;
}

// ---- geo, computed differently from the SQL on purpose (haversine; upward ray) ----

/** The language's rule: a coordinate closer to 0 than 1e-100 degrees is 0. */
const snap = (v: number) => (Math.abs(v) < 1e-100 ? 0 : v);

function geoHolds(p: { lat: number; lng: number }, c: Criterion): boolean {
  const o = c as Record<string, unknown>;
  if (Array.isArray(o.polygon)) {
    const ring = (o.polygon as { latitude: number; longitude: number }[]).map(
      (q) => [micro(q.longitude), micro(q.latitude)] as [bigint, bigint],
    );
    return inPolygon(micro(p.lng), micro(p.lat), ring);
  }
  const point = o.point as { latitude: number; longitude: number };
  const meters = (o.distance as number) * DISTANCE_UNITS_IN_METERS[o.unit as string]!;
  return haversine(snap(point.latitude), snap(point.longitude), p.lat, p.lng) <= meters;
}

export function haversine(lat1: number, lng1: number, lat2: number, lng2: number): number {
  const rad = Math.PI / 180;
  const dLat = (lat2 - lat1) * rad;
  const dLng = (lng2 - lng1) * rad;
  const a = Math.sin(dLat / 2) ** 2 + Math.cos(lat1 * rad) * Math.cos(lat2 * rad) * Math.sin(dLng / 2) ** 2;
  return 2 * EARTH_RADIUS_M * Math.asin(Math.min(1, Math.sqrt(a)));
}

/** The language's rule: polygons are decided on whole micro-degrees, rounding half up. */
export const micro = (deg: number): bigint => BigInt(Math.floor(deg * 1e6 + 0.5));

/** Boundary (edges and vertices) is inside; otherwise even-odd, counting crossings of a ray towards +y. Exact (BigInt). */
export function inPolygon(x: bigint, y: bigint, pts: [bigint, bigint][]): boolean {
  const edges = pts.map((a, i) => [a, pts[(i + 1) % pts.length]!] as const);
  const min = (a: bigint, b: bigint) => (a < b ? a : b);
  const max = (a: bigint, b: bigint) => (a > b ? a : b);
  for (const [[ax, ay], [bx, by]] of edges) {
    const collinear = (bx - ax) * (y - ay) - (by - ay) * (x - ax) === 0n;
    if (collinear && min(ax, bx) <= x && x <= max(ax, bx) && min(ay, by) <= y && y <= max(ay, by)) return true;
  }
  let inside = false;
  for (const [[ax, ay], [bx, by]] of edges) {
    if (ax <= x === bx <= x) continue; // the vertical line x does not pass between the ends (half-open)
    // sign of (edge's y at x) - y, without dividing
    const t = (x - ax) * (by - ay) - (y - ay) * (bx - ax);
    if (bx > ax ? t > 0n : t < 0n) inside = !inside;
  }
  return inside;
}
