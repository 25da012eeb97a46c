import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { useHarness } from '../helpers/harness.js';

/**
 * The SQL the journeys' hot paths run (migration 069): an entrant's history as migration 058 keeps it (appended, and
 * cut to its first entry and its last 99), inlined; and the recorded events' key index without a pending list.
 */
describe('journeys: the hot paths in SQL', () => {
  const h = useHarness();
  const entries = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ t: from + i }));
  const append = async (history: unknown[], added: unknown[]) =>
    (
      await sql<{ h: { t: number }[] }>`
        select pushd_journey_history(${JSON.stringify(history)}::jsonb, ${JSON.stringify(added)}::jsonb) as h`.execute(h.db.db)
    ).rows[0]!.h;

  it('appends while the history holds 100 entries or fewer', async () => {
    expect(await append([], entries(0, 2))).toEqual(entries(0, 2));
    expect(await append(entries(0, 98), entries(98, 2))).toEqual(entries(0, 100));
  });

  it('past 100 keeps the first entry (the entry) and the last 99, in order', async () => {
    const kept = await append(entries(0, 100), entries(100, 2));
    expect(kept).toEqual([{ t: 0 }, ...entries(3, 99)]);
    expect(await append(kept, entries(200, 1))).toEqual([{ t: 0 }, ...entries(4, 98), { t: 200 }]);
  });

  it('is inlined into the statement that moves an entrant, not called once a row (migration 069)', async () => {
    const { rows } = await sql<{ 'QUERY PLAN': string }>`
      explain verbose select pushd_journey_history(history, '[{"t": 1}]'::jsonb) from journey_entrants_default`.execute(h.db.db);
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).toContain('CASE WHEN');
    expect(plan).not.toContain('pushd_journey_history(');
  });

  it("searches journey_events' keys without a GIN pending list, which every search would read whole", async () => {
    const { rows } = await sql<{ options: string[] | null }>`
      select reloptions as options from pg_class where oid = 'journey_events_keys_idx'::regclass`.execute(h.db.db);
    expect(rows[0]!.options).toContain('fastupdate=off');
  });
});
