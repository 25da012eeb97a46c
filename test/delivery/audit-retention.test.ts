import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { listDays, PartitionsRepository } from '../../src/db/repositories/partitions.js';
import { loadConfig } from '../../src/platform/config.js';
import { createLogger } from '../../src/platform/logger.js';
import { maintainPartitions, retentionOf } from '../../src/delivery/retention.js';
import { basic, useHarness } from '../helpers/harness.js';
import { createRepositories } from '../../src/services/deps.js';

const DAY_MS = 86_400_000;
const dayOf = (at: number) => new Date(at).toISOString().slice(0, 10);

/**
 * The audit log is kept by UTC day for RETENTION_AUDIT_DAYS (365 by default): the maintenance makes its days ahead,
 * moves a row of the default partition into its day within retention, deletes those past it, and drops a day whole
 * once it is past.
 */
describe('audit log retention', () => {
  const h = useHarness();
  const partitions = new PartitionsRepository();
  const log = createLogger('silent');

  it('reads RETENTION_AUDIT_DAYS, 365 unless set', () => {
    expect(retentionOf(loadConfig({})).audit_log).toBe(365);
    expect(retentionOf(loadConfig({ RETENTION_AUDIT_DAYS: '30' })).audit_log).toBe(30);
    expect(() => loadConfig({ RETENTION_AUDIT_DAYS: '0' })).toThrow('RETENTION_AUDIT_DAYS');
  });

  it('drops the days past retention whole and keeps the others', async () => {
    const app = await h.createApp('com.example.audit-retention');
    const now = Date.now();
    const write = (daysAgo: number) =>
      sql`insert into audit_log (app_id, action, actor_role, at, details)
          values (${app.app.id}::uuid, 'key.created', 'cli', ${new Date(now - daysAgo * DAY_MS)}, '{}')`.execute(h.db.db);
    await write(400); // past retention: into the default partition, deleted by the maintenance
    await write(100); // within it: into the default partition, moved into its day
    const retention = retentionOf(h.config);
    const days = async () => (await listDays(h.db.db, 'audit_log')).map((p) => p.day);

    const first = await maintainPartitions({ db: h.db.db, repos: { ...createRepositories(), partitions }, log }, retention, new Date(now));
    expect(first.audit_log.created).toContain(dayOf(now - 100 * DAY_MS));
    expect(await days()).toContain(dayOf(now - 100 * DAY_MS));
    expect(await days()).not.toContain(dayOf(now - 400 * DAY_MS));
    const rows = async () =>
      (await h.server.inject({ method: 'GET', url: '/v6/audit?per=1000', headers: { authorization: basic(app.keys.write) } })).json()
        .entries as { at: string }[];
    expect((await rows()).map((r) => r.at.slice(0, 10))).toEqual([dayOf(now), dayOf(now), dayOf(now - 100 * DAY_MS)]);
    const defaults = await sql<{ n: number }>`select count(*)::int as n from audit_log_default`.execute(h.db.db);
    expect(defaults.rows[0]!.n).toBe(0);

    // 300 days on, the day written 100 days ago is 400 days old: dropped whole; today's (now 300 days old) kept
    const later = now + 300 * DAY_MS;
    const second = await maintainPartitions(
      { db: h.db.db, repos: { ...createRepositories(), partitions }, log },
      retention,
      new Date(later),
    );
    expect(second.audit_log.dropped).toContain(dayOf(now - 100 * DAY_MS));
    expect(second.audit_log.dropped).not.toContain(dayOf(now));
    expect(await days()).toContain(dayOf(later));
    expect((await rows()).map((r) => r.at.slice(0, 10))).toEqual([dayOf(now), dayOf(now)]);
  });
});
