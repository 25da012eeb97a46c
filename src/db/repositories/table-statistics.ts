import { sql } from 'kysely';
import type { Db } from '../database.js';

/**
 * The tables whose queries plan on their statistics: without them a lookup of one device by id reads thousands of
 * rows through another index.
 */
export const PLANNED_ON_STATISTICS = ['devices', 'device_attributes', 'device_tags', 'audiences'] as const;
export type PlannedTable = (typeof PLANNED_ON_STATISTICS)[number];

/** What PostgreSQL's autovacuum would do for the planner's statistics, for a server where it is off. */
export class TableStatisticsRepository {
  /**
   * Those of `tables` that autovacuum would analyze now by its default thresholds (50 rows and 10 % of the table
   * changed since the last analyze), when the server's autovacuum is off; none while it is on.
   */
  async staleWithoutAutovacuum(db: Db, tables: readonly PlannedTable[]): Promise<PlannedTable[]> {
    const { rows } = await sql<{ table: PlannedTable }>`
      select relname as table
      from pg_stat_user_tables
      where current_setting('autovacuum') = 'off'
        and schemaname = current_schema()
        and relname = any(${tables as readonly string[]}::text[])
        and n_mod_since_analyze > 50 + 0.1 * n_live_tup`.execute(db);
    return rows.map((r) => r.table);
  }

  async analyze(db: Db, table: PlannedTable): Promise<void> {
    await sql`analyze ${sql.table(table)}`.execute(db);
  }
}
