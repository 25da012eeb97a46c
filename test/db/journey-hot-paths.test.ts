import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { useHarness } from '../helpers/harness.js';

/**
 * The SQL the journeys' hot paths run: the recorded events' key index without a pending list (migration 069), and an
 * entrant's row without its history (migration 070: journey-history-rows.test.ts).
 */
describe('journeys: the hot paths in SQL', () => {
  const h = useHarness();

  it("searches journey_events' keys without a GIN pending list, which every search would read whole", async () => {
    const { rows } = await sql<{ options: string[] | null }>`
      select reloptions as options from pg_class where oid = 'journey_events_keys_idx'::regclass`.execute(h.db.db);
    expect(rows[0]!.options).toContain('fastupdate=off');
  });

  it('moves an entrant without writing its history again: the history is no column of its row', async () => {
    const { rows } = await sql<{ name: string }>`
      select attname as name from pg_attribute
      where attrelid = 'journey_entrants'::regclass and attnum > 0 and not attisdropped`.execute(h.db.db);
    expect(rows.map((r) => r.name)).not.toContain('history');
    expect(rows.map((r) => r.name)).toContain('seq');
  });
});
