import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { openDatabaseRuntime } from '../../src/app/runtime.js';
import { ConfigError, loadConfig } from '../../src/platform/config.js';
import { createLogger } from '../../src/platform/logger.js';
import { useHarness } from '../helpers/harness.js';

/** DATABASE_POOL_SIZE bounds the connections a process opens to PostgreSQL, and is what its statements run on at once. */
describe('DATABASE_POOL_SIZE', () => {
  const h = useHarness();

  it('is 10 by default, and a value that is not a whole number from 2 to 500 is refused by name', () => {
    expect(loadConfig({}).DATABASE_POOL_SIZE).toBe(10);
    for (const bad of ['1', '0', '-1', '2.5', 'many', '501'])
      expect(() => loadConfig({ DATABASE_POOL_SIZE: bad })).toThrow(/DATABASE_POOL_SIZE/);
    expect(() => loadConfig({ DATABASE_POOL_SIZE: '0' })).toThrow(ConfigError);
  });

  it('opens that many connections at most, and runs that many statements at once', async () => {
    const config = loadConfig({ DATABASE_URL: h.databaseUrl, DATABASE_POOL_SIZE: '3', LOG_LEVEL: 'silent' });
    const rt = await openDatabaseRuntime(config, createLogger('silent'), { migrate: false });
    try {
      const tag = `pool-size-${process.pid}-${Date.now()}`;
      // eight statements of 300 ms each: on three connections they take three turns; each connection keeps the tag
      const started = performance.now();
      const sleeps = Array.from({ length: 8 }, () =>
        sql`select set_config('application_name', ${tag}, false), pg_sleep(0.3)`.execute(rt.handle.db),
      );
      await Promise.all(sleeps);
      const elapsed = performance.now() - started;
      const { rows } = await h.db.pool.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where application_name = $1`, [
        tag,
      ]);
      expect(rows[0]!.n).toBe(3);
      expect(rt.handle.pool.totalCount).toBe(3);
      expect(elapsed).toBeGreaterThanOrEqual(850);
    } finally {
      await rt.close();
    }
  });
});
