/**
 * Notification bodies for the tests of POST /v<N>/notifications validation: built from a `to` or a `payload`, and
 * the pieces of location criteria (points, distances, polygons).
 */

export const alert = { alert: 'hi' };
export const withTo = (to: unknown) => ({ notification: { to, payload: alert } });
export const withPayload = (payload: unknown) => ({ notification: { to: '*', payload } });
export const pt = (latitude: unknown, longitude: unknown) => ({ latitude, longitude });
export const near = (point: unknown, distance: unknown = 10, unit: unknown = 'km') => ({ point, distance, unit });
export const triangle = [pt(0, 0), pt(0, 1), pt(1, 1)];
export const circle = (n: number) =>
  Array.from({ length: n }, (_, i) => pt(45 + Math.sin((2 * Math.PI * i) / n), 5 + Math.cos((2 * Math.PI * i) / n)));
export const manyFilters = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `custom.string.a${i}`, criteria: ['x'] }));

export const UNITS = 'in, inch, yd, yards, ft, feet, km, kilometers, nauticalmiles, mi, miles, m, meters';
