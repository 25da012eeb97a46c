import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { deliverablePageQuery } from '../../src/db/repositories/device-queries.js';
import { useHarness } from '../helpers/harness.js';

/**
 * A notification to a list of device ids (a journey's batch, `include_subscription_ids`) reads its devices through
 * the primary key: with the list's size in view, the planner scanned all of an app's devices for 1,000 ids of 100,000.
 */
describe('a list of device ids, as PostgreSQL plans it', () => {
  const h = useHarness();
  let app: string;
  let ids: string[];

  beforeAll(async () => {
    app = (await h.createApp()).app.id;
    await sql`
      insert into devices (app_id, platform, token)
      select ${app}::uuid, 'android', 'list-plan-' || i from generate_series(1, 30000) as i`.execute(h.db.db);
    await sql`analyze devices`.execute(h.db.db);
    const { rows } = await sql<{ id: string }>`
      select id from devices where app_id = ${app}::uuid order by md5(id::text) limit 500`.execute(h.db.db);
    ids = rows.map((r) => r.id);
  });

  it('finds 500 ids of 30,000 devices through an index, and all of them', async () => {
    const query = () =>
      deliverablePageQuery(h.db.db, app, [{ name: 'device_id', criteria: ids }], { limit: 501, now: new Date(), visible: true });
    const { sql: text, parameters } = query().compile();
    const { rows } = await h.db.pool.query<{ 'QUERY PLAN': string }>(`explain ${text}`, [...parameters]);
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).toMatch(/Index Scan using \w+ on devices/);
    expect(plan).not.toMatch(/Seq Scan on devices/);
    const found = await query().execute();
    expect(found.map((d) => d.id).sort()).toEqual([...ids].sort());
  });
});
