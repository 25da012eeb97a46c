import type { DistanceCriterion } from './filters.js';
import { DISTANCE_UNITS_IN_METERS } from './vocabulary.js';

/**
 * Geometry of the `location` / `sdk_location` filters. The Earth is a sphere of the mean radius (the value
 * Elasticsearch uses), distances are great-circle distances. Polygons are planar in (longitude, latitude):
 * edges are straight lines on the longitude/latitude grid, no wrap at the antimeridian; a point on an edge
 * or a vertex is inside; self-intersecting polygons follow the even-odd rule. Containment is decided on
 * coordinates rounded to a micro-degree (about 11 cm) with exact integer arithmetic: float arithmetic can
 * put a point a hair off an edge on either side depending on which vertex it is measured from.
 */
export const EARTH_RADIUS_M = 6_371_008.7714;

export interface LatLng {
  latitude: number;
  longitude: number;
}

/**
 * Coordinates closer to 0 than 1e-100 degrees (far below a nanometre) are 0. PostgreSQL raises an error when
 * a float8 product underflows, and with every non-zero coordinate at least 1e-100 no product the geo
 * predicates compute can; the migration refuses such values in the table too.
 */
export const MIN_COORDINATE = 1e-100;
export const snapCoordinate = (v: number): number => (Math.abs(v) < MIN_COORDINATE ? 0 : v);

export function distanceInMeters(c: DistanceCriterion): number {
  return c.distance * DISTANCE_UNITS_IN_METERS[c.unit]!;
}

/**
 * A great-circle radius as the straight-line (chord) distance between two points of the unit sphere, which
 * grows with it monotonically; null when the radius reaches the antipode, i.e. covers the whole globe.
 */
export function chordOfRadius(meters: number): number | null {
  if (meters >= Math.PI * EARTH_RADIUS_M) return null;
  return 2 * Math.sin(meters / (2 * EARTH_RADIUS_M));
}

/**
 * Degrees to whole micro-degrees, rounding half up; SQL does the same float8 operations
 * (floor(deg * 1e6 + 0.5)). Every cross product of such values stays below 2^63, so int8 is exact.
 */
export const MICRODEGREES = 1_000_000;
export const toMicrodegrees = (deg: number): number => Math.floor(deg * MICRODEGREES + 0.5);

/** An edge in whole micro-degrees (x = longitude, y = latitude). */
export interface Edge {
  x1: number;
  y1: number;
  x2: number;
  y2: number;
}

/** The edges of a polygon, closing it from the last point to the first. */
export function polygonEdges(points: LatLng[]): Edge[] {
  return points.map((p, i) => {
    const q = points[(i + 1) % points.length]!;
    return {
      x1: toMicrodegrees(p.longitude),
      y1: toMicrodegrees(p.latitude),
      x2: toMicrodegrees(q.longitude),
      y2: toMicrodegrees(q.latitude),
    };
  });
}

export function boundingBox(points: LatLng[]): { minLng: number; maxLng: number; minLat: number; maxLat: number } {
  const lngs = points.map((p) => snapCoordinate(p.longitude));
  const lats = points.map((p) => snapCoordinate(p.latitude));
  return { minLng: Math.min(...lngs), maxLng: Math.max(...lngs), minLat: Math.min(...lats), maxLat: Math.max(...lats) };
}
