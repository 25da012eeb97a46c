import { sql } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { jsonbArray, plainArrayLiteral, withArrayLiterals } from '../../src/db/pg-arrays.js';
import { useHarness } from '../helpers/harness.js';

/** documents whose text needs every kind of quoting an array literal has */
const documents: unknown[] = [
  { alert: 'say "hi" \\ bye', path: 'C:\\temp\\"x"', braces: '{a,b}', comma: 'a, b', empty: '' },
  { multiline: 'line 1\nline 2\ttab\r\u0001', unicode: 'héllo wörld — 日本語 🎉' },
  null,
  [1, 2.5, -3e-7, true, false, null, 'NULL', 'null'],
  'a bare string',
  42,
  {},
  [],
];

describe('jsonbArray: JSON documents as one array parameter', () => {
  const h = useHarness();

  it('reads back in PostgreSQL as the same documents, nulls as NULL', async () => {
    const { rows } = await sql<{ doc: unknown }>`
      select t.doc from unnest(${jsonbArray(documents)}::jsonb[]) with ordinality as t(doc, ord) order by t.ord`.execute(h.db.db);
    expect(rows.map((r) => r.doc)).toEqual(documents.map((d) => (d == null ? null : JSON.parse(JSON.stringify(d)))));
  });

  it('writes the literal pg itself would write, but for null spelled in lower case', () => {
    const texts = documents.map((d) => (d == null ? null : JSON.stringify(d)));
    expect(jsonbArray(documents)).toBe(prepared(texts).replace(/(?<=[{,])NULL(?=[,}])/g, 'null'));
  });

  it('is an empty array for no documents', async () => {
    const { rows } = await sql<{ n: number }>`select cardinality(${jsonbArray([])}::jsonb[]) as n`.execute(h.db.db);
    expect(rows[0]!.n).toBe(0);
  });
});

describe('plainArrayLiteral: the literal pg writes, made in one join', () => {
  const h = useHarness();
  const plain: unknown[][] = [
    [],
    [null, undefined],
    ['0190a1b2-0000-7000-8000-000000000001', null, '0190a1b2-0000-7000-8000-000000000002'],
    ['say "hi"', 'back\\slash', 'C:\\temp\\"x"', '{a,b}', 'a, b', '', 'NULL', 'null', ' padded ', 'line\nbreak\t\u0001', 'héllo 日本語 🎉'],
    [0, -1, 2.5, 1e21, -3e-7, Number.MAX_SAFE_INTEGER, NaN],
    [true, false, null],
    ['mixed', 7, false, null],
  ];

  it('writes what pg would, character for character', () => {
    for (const values of plain) expect(plainArrayLiteral(values)).toBe(prepared(values));
  });

  it('leaves to pg what it does not write (dates, nested arrays, documents, bytes)', () => {
    for (const values of [[new Date(0)], [['a']], [{ a: 1 }], [Buffer.from('x')], [1n]])
      expect(plainArrayLiteral(values as unknown[])).toBeUndefined();
    const date = [new Date(0)];
    const [texts, dates, scalar] = withArrayLiterals([['a'], date, 'x']);
    expect([texts, dates, scalar]).toEqual(['{"a"}', date, 'x']);
  });

  it('reads back in PostgreSQL as the same values, through the pool every statement takes', async () => {
    const texts = plain[3] as string[];
    const { rows } = await sql<{ t: string | null }>`
      select t from unnest(${[...texts, null]}::text[]) with ordinality as u(t, ord) order by ord`.execute(h.db.db);
    expect(rows.map((r) => r.t)).toEqual([...texts, null]);
  });
});

/** pg's own serialisation of a JS array parameter */
function prepared(values: unknown[]): string {
  return (pg as unknown as { utils: { prepareValue(v: unknown): string } }).utils.prepareValue(values);
}
