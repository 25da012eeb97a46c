import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/platform/logger.js';
import { keepStatistics } from '../../src/delivery/retention.js';
import { useHarness } from '../helpers/harness.js';
import { createRepositories } from '../../src/services/deps.js';

/**
 * The statistics the maintenance keeps where autovacuum does not: the suite's PostgreSQL runs with it off, as the
 * machine's does, and a server with it on must be left to it.
 */
describe('table statistics without autovacuum', () => {
  const h = useHarness();
  const deps = () => ({ db: h.db.db, repos: createRepositories(), log: createLogger('silent') });
  const analyzed = async () =>
    (
      await sql<{ at: Date | null }>`
        select last_analyze as at
        from pg_stat_user_tables
        where schemaname = current_schema() and relname = 'devices'`.execute(h.db.db)
    ).rows[0]!.at;

  it('analyzes a devices table filled since its last analyze, and only when autovacuum is off', async () => {
    const { app } = await h.createApp();
    // the migrations analyze devices once (071: its token key's statistics), before the fill
    const before = (await analyzed())?.getTime() ?? 0;
    await sql`
      insert into devices (app_id, platform, token)
      select ${app.id}::uuid, 'ios', encode(sha256(int4send(i)), 'hex')
      from generate_series(1, 2000) as i`.execute(h.db.db);
    // this backend's counts reach the shared statistics at once, not at its next idle second
    await sql`select pg_stat_force_next_flush()`.execute(h.db.db);
    const autovacuum = (await sql<{ on: string }>`select current_setting('autovacuum') as on`.execute(h.db.db)).rows[0]!.on;
    const tables = await keepStatistics(deps());
    if (autovacuum === 'off') {
      expect(tables).toContain('devices');
      expect((await analyzed())!.getTime()).toBeGreaterThan(before);
      // nothing changed since: the next sweep leaves it
      await sql`select pg_stat_force_next_flush()`.execute(h.db.db);
      expect(await keepStatistics(deps())).not.toContain('devices');
    } else {
      expect(tables).toEqual([]);
      expect((await analyzed())?.getTime() ?? 0).toBe(before);
    }
  });
});
