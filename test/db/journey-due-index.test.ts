import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { useHarness, type Harness } from '../helpers/harness.js';
import { journeyApi } from '../http/journey-support.js';
import { JourneyEntrantsRepository } from '../../src/db/repositories/journey-entrants.js';

type App = Awaited<ReturnType<Harness['createApp']>>;
const JOURNEYS = 20;
const EACH = 400;

/**
 * A due batch of one journey among many due at the same moment (a morning's delays, many journeys' sends) reads its
 * own entrants' rows: the due index names the journey after the moment, so the others' entries are passed over in the
 * index. With the moment alone in it, each batch fetched every due entrant's row to test its journey: a poll's
 * batches together read them as many times as there are journeys.
 */
describe("a journey's due batch among many journeys' due entrants", () => {
  const h = useHarness();
  let app: App;
  const journeyIds: string[] = [];
  const dueAt = new Date('2026-06-01T09:00:00Z');

  beforeAll(async () => {
    app = await h.createApp();
    const { create } = journeyApi(h, () => app);
    for (let i = 0; i < JOURNEYS; i++) {
      const steps = [{ id: 'push', type: 'send', notification: { payload: { alert: 'hi' } } }];
      journeyIds.push((await create({ name: `due ${i}`, trigger: { api: true }, steps })).id);
    }
    // every journey's entrants due at the one moment, inserted in turn as they would enter: the journeys interleaved
    await sql`
      with d as (
        insert into devices (app_id, platform, token)
        select ${app.app.id}::uuid, 'android', 'due-index-' || i from generate_series(1, ${JOURNEYS * EACH}) as i
        returning id)
      insert into journey_entrants (journey_id, version, app_id, entrant_key, device_id, step_id, phase, due_at, entered_at)
      select (${journeyIds}::uuid[])[1 + n % ${JOURNEYS}], 1, ${app.app.id}::uuid, 'd:' || id, id, 'push', 'arrived', ${dueAt}, now()
      from (select id, row_number() over (order by id) as n from d) x`.execute(h.db.db);
    await sql`analyze journey_entrants`.execute(h.db.db);
  });

  it("locks a batch of one journey's entrants fetching about as many rows as it locks", async () => {
    const journeyId = journeyIds[JOURNEYS / 2]!;
    const group = { journey_id: journeyId, app_id: app.app.id, version: 1, step_id: 'push', phase: 'arrived' as const, due: EACH };
    await h.db.db.transaction().execute(async (trx) => {
      const due = await new JourneyEntrantsRepository().lockDue(
        trx,
        { group, now: new Date(dueAt.getTime() + 1000), limit: EACH },
        { history: false, zone: false },
      );
      expect(due).toHaveLength(EACH);
      expect(new Set(due.map((e) => e.journey_id))).toEqual(new Set([journeyId]));
      // the rows this transaction has read so far, through an index or a scan, over the entrants' partitions
      const { rows } = await sql<{ fetched: number }>`
        select coalesce(sum(idx_tup_fetch + seq_tup_read), 0)::int as fetched
        from pg_stat_xact_user_tables where relname like 'journey_entrants%'`.execute(trx);
      expect(rows[0]!.fetched).toBeGreaterThanOrEqual(EACH);
      expect(rows[0]!.fetched).toBeLessThan(2 * EACH);
    });
  });
});
