import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { useHarness } from '../helpers/harness.js';
import { partitionOptions } from '../helpers/partition-options.js';

/**
 * Recording an attempt updates a batch's state, pending devices, counters and updated_at. Those updates stay HOT
 * (rewritten in place on the page, no new index entries) only while no index of the table covers or filters on a
 * column they change: a b-tree, and before PostgreSQL 16 a BRIN one too. An index added on one of them would
 * quietly put index writes on every push.
 */
describe('delivery_batches: updates that need no new index entries', () => {
  const h = useHarness();

  it('has one b-tree, its key, and indexes only the columns a batch keeps for life', async () => {
    const { rows } = await sql<{ name: string; method: string; columns: string[]; expression: string | null; predicate: string | null }>`
      select i.relname as name, am.amname as method,
        array(select a.attname::text from unnest(x.indkey) as k(n) join pg_attribute a on a.attrelid = x.indrelid and a.attnum = k.n) as columns,
        pg_get_expr(x.indexprs, x.indrelid) as expression, pg_get_expr(x.indpred, x.indrelid) as predicate
      from pg_index x
      join pg_class i on i.oid = x.indexrelid
      join pg_am am on am.oid = i.relam
      where x.indrelid = 'delivery_batches'::regclass
      order by 1`.execute(h.db.db);
    // migration 043: the batch's id is made of its key, not stored and indexed a second time
    expect(rows.filter((r) => r.method === 'btree').map((r) => r.columns)).toEqual([['notification_id', 'generation', 'seq']]);
    const lifelong = new Set(['notification_id', 'generation', 'seq', 'created_at', 'not_before']);
    for (const index of rows) {
      expect({ index: index.name, predicate: index.predicate }).toEqual({ index: index.name, predicate: null });
      expect({ index: index.name, columns: index.columns.filter((c) => !lifelong.has(c)) }).toEqual({ index: index.name, columns: [] });
    }
    // the statistics find a day's batches by their start, which no recording changes
    expect(rows.filter((r) => r.expression !== null).map((r) => [r.method, r.expression])).toEqual([
      ['brin', 'COALESCE(not_before, created_at)'],
    ]);
  });

  it('leaves room on each page for a batch updated beside its old version', async () => {
    // a partition's own (migration 037): the default one and each day's, those the maintenance makes included
    const options = await partitionOptions(h.db.db, 'delivery_batches');
    expect(options.length).toBeGreaterThan(1);
    for (const o of options) expect(o).toContain('fillfactor=80');
  });
});
