import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { useHarness } from '../helpers/harness.js';

const LOOKUP = 'select id from devices where app_id = $1 and pushd_token_key(token) = pushd_token_key($2) and token = $2';

describe('a push token looked up by its key (migration 071)', () => {
  const h = useHarness();

  it('keeps its prepared generic plan once the devices table has grown, instead of planning each run', async () => {
    const { app } = await h.createApp();
    const client = new pg.Client({ connectionString: h.databaseUrl });
    await client.connect();
    try {
      const lookup = (token: string) => client.query({ name: 'lookup', text: LOOKUP, values: [app.id, token] });
      const plans = async () =>
        (await client.query<{ generic: number }>(`select generic_plans::int as generic from pg_prepared_statements where name = 'lookup'`))
          .rows[0]!.generic;
      // prepared while the app has no devices, as a new install's first registrations are
      for (let i = 0; i < 10; i++) await lookup(`t${i}`);
      await client.query(
        `insert into devices (app_id, platform, token) select $1, 'android', 'tok' || g from generate_series(1, 20000) g`,
        [app.id],
      );
      await client.query('analyze devices');
      const before = await plans();
      for (let i = 0; i < 10; i++) await lookup(`tok${i + 1}`);
      expect(await plans()).toBeGreaterThan(before);
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(
        `explain select id from devices where app_id = '${app.id}' and pushd_token_key(token) = pushd_token_key('tok7')`,
      );
      expect(rows[0]!['QUERY PLAN']).toMatch(/rows=1 /);
    } finally {
      await client.end();
    }
  });
});
