/**
 * A PostgreSQL array literal of JSON documents, for a `::jsonb[]` parameter (one element per row of an `unnest`).
 * pg would quote each element with two regular-expression passes and a concatenation; inside an array literal's
 * quotes only `\` and `"` need escaping, and a JSON text has no control characters or lone surrogates left (they
 * are escaped within it), so JSON.stringify quotes a list of them exactly so, in one native pass. A null element
 * is written `null`, which an array literal reads as NULL.
 */
export function jsonbArray(values: readonly unknown[]): string {
  const literal = JSON.stringify(values.map((v) => (v == null ? null : JSON.stringify(v))));
  return `{${literal.slice(1, -1)}}`;
}
