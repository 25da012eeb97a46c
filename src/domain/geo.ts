import { DISTANCE_UNITS_IN_METERS, type DistanceCriterion } from './filters.js';

/**
 * Geometry of the `location` / `sdk_location` filters. The Earth is a sphere of the mean radius (the value
 * Elasticsearch uses), distances are great-circle distances. Polygons are planar in (longitude, latitude):
 * edges are straight lines on the longitude/latitude grid, no wrap at the antimeridian; a point on an edge
 * or a vertex is inside; self-intersecting polygons follow the even-odd rule. No epsilon anywhere.
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

export interface Edge {
  x1: number;
  y1: number;
  x2: number;
  y2: number;
}

/** The edges of a polygon in (x = longitude, y = latitude), closing it from the last point to the first. */
export function polygonEdges(points: LatLng[]): Edge[] {
  return points.map((p, i) => {
    const q = points[(i + 1) % points.length]!;
    return { x1: snapCoordinate(p.longitude), y1: snapCoordinate(p.latitude), x2: snapCoordinate(q.longitude), y2: snapCoordinate(q.latitude) };
  });
}

export function boundingBox(points: LatLng[]): { minLng: number; maxLng: number; minLat: number; maxLat: number } {
  const lngs = points.map((p) => snapCoordinate(p.longitude));
  const lats = points.map((p) => snapCoordinate(p.latitude));
  return { minLng: Math.min(...lngs), maxLng: Math.max(...lngs), minLat: Math.min(...lats), maxLat: Math.max(...lats) };
}
