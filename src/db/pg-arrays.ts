/**
 * A PostgreSQL array literal of JSON documents, for a `::jsonb[]` parameter (one element per row of an `unnest`).
 * pg would quote each element with two regular-expression passes and a concatenation; inside an array literal's
 * quotes only `\` and `"` need escaping, and a JSON text has no control characters or lone surrogates left (they
 * are escaped within it), so JSON.stringify quotes a list of them exactly so, in one native pass. A null element
 * is written `null`, which an array literal reads as NULL.
 */
export function jsonbArray(values: readonly unknown[]): string {
  return jsonTextArray(values.map((v) => (v == null ? null : JSON.stringify(v))));
}

/** The same of JSON texts already written (null: NULL). */
export function jsonTextArray(texts: readonly (string | null)[]): string {
  return `{${JSON.stringify(texts).slice(1, -1)}}`;
}

/**
 * The literal pg writes for an array parameter of strings, numbers, booleans and nulls, character for character,
 * made with a join: pg appends element by element (a rope V8 flattens again before the write) and runs two
 * regular expressions over every element, a few hundred a grouped insert. Undefined for any other array (dates,
 * nested arrays, documents, bytes), which pg encodes itself.
 */
export function plainArrayLiteral(values: readonly unknown[]): string | undefined {
  const parts = new Array<string>(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v == null) parts[i] = 'NULL';
    else if (typeof v === 'string')
      parts[i] = v.includes('\\') || v.includes('"') ? `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"` : `"${v}"`;
    else if (typeof v === 'number' || typeof v === 'boolean') parts[i] = `"${v}"`;
    else return undefined;
  }
  return `{${parts.join(',')}}`;
}

/** A statement's parameters with their plain arrays already written as literals (`plainArrayLiteral`). */
export function withArrayLiterals(values: readonly unknown[]): unknown[] {
  return values.map((v) => (Array.isArray(v) ? (plainArrayLiteral(v) ?? v) : v));
}
