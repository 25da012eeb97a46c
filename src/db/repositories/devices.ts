import { sql } from 'kysely';
import type { Db } from '../database.js';
import { compileFilters, type CompileContext } from '../filter-sql.js';
import type { Filter } from '../../domain/filters.js';

export class DevicesRepository {
  constructor(private readonly db: Db) {}

  /** How many live (not erased) devices of the app an audience selects, counted in SQL. */
  async countAudience(appId: string, filters: Filter[] | null, ctx: CompileContext): Promise<number> {
    const row = await this.db
      .selectFrom('devices as d')
      .select(sql<number>`count(*)`.as('n'))
      .where('d.app_id', '=', appId)
      .where('d.erased_at', 'is', null)
      .where(compileFilters(filters, ctx))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }
}
