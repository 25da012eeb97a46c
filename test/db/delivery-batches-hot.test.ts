import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { useHarness } from '../helpers/harness.js';

/**
 * Recording an attempt updates a batch's state, pending devices, counters and updated_at. Those updates stay HOT
 * (rewritten in place on the page, no new index entries) only while no b-tree index of the table covers or
 * filters on a column they change: an index added on one of them would quietly put index writes on every push.
 */
describe('delivery_batches: updates that need no new index entries', () => {
  const h = useHarness();

  it('has b-tree indexes only on the columns a batch keeps for life', async () => {
    const { rows } = await sql<{ name: string; method: string; columns: string[]; predicate: string | null }>`
      select i.relname as name, am.amname as method,
        array(select a.attname::text from unnest(x.indkey) as k(n) join pg_attribute a on a.attrelid = x.indrelid and a.attnum = k.n) as columns,
        pg_get_expr(x.indpred, x.indrelid) as predicate
      from pg_index x
      join pg_class i on i.oid = x.indexrelid
      join pg_am am on am.oid = i.relam
      where x.indrelid = 'delivery_batches'::regclass`.execute(h.db.db);
    const lifelong = new Set(['id', 'notification_id', 'generation', 'seq']);
    const btrees = rows.filter((r) => r.method === 'btree');
    expect(btrees.length).toBeGreaterThan(0);
    for (const index of btrees) {
      expect({ index: index.name, predicate: index.predicate }).toEqual({ index: index.name, predicate: null });
      expect({ index: index.name, columns: index.columns.filter((c) => !lifelong.has(c)) }).toEqual({ index: index.name, columns: [] });
    }
    // the statistics find a day's batches by updated_at through a summarising index, which allows HOT updates
    expect(rows.filter((r) => r.columns.includes('updated_at')).map((r) => r.method)).toEqual(['brin']);
  });

  it('leaves room on each page for a batch updated beside its old version', async () => {
    // a partition's own (migration 037): the default one and each day's, those the maintenance makes included
    const { rows } = await sql<{ options: string[] | null }>`
      select c.reloptions as options from pg_inherits i join pg_class c on c.oid = i.inhrelid
      where i.inhparent = 'delivery_batches'::regclass`.execute(h.db.db);
    expect(rows.length).toBeGreaterThan(1);
    for (const row of rows) expect(row.options).toContain('fillfactor=80');
  });
});
