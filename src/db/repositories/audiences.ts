import { sql, type RawBuilder, type SqlBool, type Transaction } from 'kysely';
import { isUuid } from '../../domain/cursor.js';
import type { Db } from '../database.js';
import { jsonbArray } from '../pg-arrays.js';
import type { Audience, Database } from '../schema.js';
import type { Filter } from '../../domain/filters.js';
import { ALL_DEVICES_SPEC_KEY } from '../../domain/audience-spec.js';
import { randomId } from '../../platform/random-id.js';

const generatedName = () => `api_audience_${randomId(9)}`;

/**
 * The name of the last CTE of `specAudiences`: (id, app_id, spec_key), the stored audience of each spec asked for.
 * A statement that runs those CTEs refers to it by this name (`NotificationsRepository.insertCut`).
 */
export const SPEC_AUDIENCES = 'spec_audiences';

/*
 * NO_OP_UPDATE: an upsert that finds its spec inserted meanwhile sets the audience's name to itself. An update of a
 * column outside the unique key locks the row in a mode that a foreign-key check (a message of another transaction
 * naming the audience) does not wait for; one naming a key column, even to the same value, would make
 * that check wait until this transaction ends, and two such transactions could wait for each other.
 */

/** No notification (kept, in any partition) and no message names the audience `a`. */
const unnamed = sql<SqlBool>`not exists (select 1 from notifications n where n.audience_id = a.id)
  and not exists (select 1 from messages m where m.audience_id = a.id)`;

/**
 * Runs a statement testing `unnamed` on many audiences. The notifications have no index by audience, so each is read
 * once into a hash: a nested loop would read them all again for each audience, which is what the planner picks when
 * it expects few (the audiences just retired, before statistics count them: 10 minutes for 100,000 of them).
 */
function scanningNamed<T>(db: Db, statement: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  return db.transaction().execute(async (trx) => {
    await sql`set local enable_nestloop = off`.execute(trx);
    await sql`set local work_mem = '64MB'`.execute(trx);
    return statement(trx);
  });
}

export class AudiencesRepository {
  /**
   * Returns the app's audience for this canonical spec, creating it if needed. One statement against a
   * unique index, so concurrent identical requests converge on one row.
   */
  async upsertFilters(db: Db, appId: string, key: string, canonical: Filter[]): Promise<Audience> {
    return this.upsert(db, appId, key, 'filters', canonical, generatedName());
  }

  /**
   * `upsertFilters` for several specs, as CTEs to run at the head of the statement that uses their ids, so the
   * audiences and what refers to them are written by one statement, atomically. They end with SPEC_AUDIENCES.
   * The stored ones are found and not written again (a user's next notification writes no audience); the others
   * are inserted; one that another statement inserted meanwhile is taken by a no-op update (NO_OP_UPDATE), whose
   * RETURNING yields it. Each spec is asked for once (one statement may not update a row twice), in one order, so
   * that two statements inserting the same specs wait for each other instead of deadlocking.
   */
  specAudiences(specs: { appId: string; key: string; canonical: Filter[] }[]): RawBuilder<unknown> {
    // by app and key: the same key in two apps is two rows
    const unique = [...new Map(specs.map((s) => [`${s.appId} ${s.key}`, s] as const))]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, s]) => s);
    // one array per column: the statement's text is the same however many there are
    return sql`
      spec_wanted as (
        select * from unnest(${unique.map((s) => s.appId)}::uuid[], ${unique.map((s) => s.key)}::uuid[],
          ${jsonbArray(unique.map((s) => s.canonical))}::jsonb[], ${unique.map(() => generatedName())}::text[])
          with ordinality as t(app_id, spec_key, filters, name, ord)),
      spec_found as (select a.id, a.app_id, a.spec_key from audiences a join spec_wanted w using (app_id, spec_key)),
      spec_created as (
        insert into audiences (app_id, spec_key, kind, filters, name)
        select w.app_id, w.spec_key, 'filters', w.filters, w.name from spec_wanted w
        where not exists (select 1 from spec_found f where f.app_id = w.app_id and f.spec_key = w.spec_key)
        order by w.ord
        on conflict (app_id, spec_key) do update set name = audiences.name
        returning id, app_id, spec_key),
      ${sql.table(SPEC_AUDIENCES)} as (select * from spec_found union all select * from spec_created)`;
  }

  /** The app's built-in all-devices audience: one per app, stable id. */
  async upsertAllDevices(db: Db, appId: string): Promise<Audience> {
    return this.upsert(db, appId, ALL_DEVICES_SPEC_KEY, 'all', null, 'All devices');
  }

  /** Finds the stored audience first, so one named again writes nothing (see `specAudiences`). */
  private async upsert(db: Db, appId: string, key: string, kind: 'all' | 'filters', filters: Filter[] | null, name: string) {
    const found = await db.selectFrom('audiences').selectAll().where('app_id', '=', appId).where('spec_key', '=', key).executeTakeFirst();
    if (found) return found;
    return (
      db
        .insertInto('audiences')
        .values({ app_id: appId, spec_key: key, kind, filters: filters === null ? null : JSON.stringify(filters), name })
        // a no-op update (NO_OP_UPDATE) so RETURNING yields the row another statement inserted meanwhile
        .onConflict((oc) => oc.columns(['app_id', 'spec_key']).doUpdateSet((eb) => ({ name: eb.ref('audiences.name') })))
        .returningAll()
        .executeTakeFirstOrThrow()
    );
  }

  /**
   * The audience a notification or message names by id, un-retired if the retention had retired it (migration 052): a
   * sweep deleting it meanwhile finds it changed and checks it again, and one that deleted it first leaves none.
   */
  async claimForTarget(trx: Transaction<Database>, appId: string, id: string): Promise<Audience | undefined> {
    if (!isUuid(id)) return undefined;
    const revived = await trx
      .updateTable('audiences')
      .set({ retired_at: null })
      .where('app_id', '=', appId)
      .where('id', '=', id)
      .where('retired_at', 'is not', null)
      .returningAll()
      .executeTakeFirst();
    return revived ?? this.findForApp(trx, appId, id);
  }

  /**
   * Retires the on-the-fly audiences created before `createdBefore` that nothing names: their spec key is cleared, so
   * no notification finds them by their spec from now on (an equal spec makes a new audience). Answers how many.
   */
  async retireUnused(db: Db, createdBefore: Date, now: Date): Promise<number> {
    return scanningNamed(db, async (trx) => {
      const { numUpdatedRows } = await trx
        .updateTable('audiences as a')
        .set({ retired_at: now, spec_key: null })
        .where('a.kind', '=', 'filters')
        .where('a.retired_at', 'is', null)
        .where('a.created_at', '<', createdBefore)
        .where(unnamed)
        .executeTakeFirst();
      return Number(numUpdatedRows);
    });
  }

  /**
   * Deletes the audiences retired before `retiredBefore` that nothing names now. Whatever found one by its spec before
   * it was retired has committed by then (the grace), so what it inserted naming it is seen here.
   */
  async deleteRetired(db: Db, retiredBefore: Date): Promise<number> {
    return scanningNamed(db, async (trx) => {
      const { numDeletedRows } = await trx
        .deleteFrom('audiences as a')
        .where('a.retired_at', '<', retiredBefore)
        .where(unnamed)
        .executeTakeFirst();
      return Number(numDeletedRows);
    });
  }

  async findForApp(db: Db, appId: string, id: string): Promise<Audience | undefined> {
    if (!isUuid(id)) return undefined;
    return db.selectFrom('audiences').selectAll().where('app_id', '=', appId).where('id', '=', id).executeTakeFirst();
  }

  /** The stored filters of an audience (null: all devices; undefined: no such audience). */
  async filtersOf(db: Db, id: string): Promise<Filter[] | null | undefined> {
    const row = await db.selectFrom('audiences').select('filters').where('id', '=', id).executeTakeFirst();
    return row?.filters;
  }

  async listForApp(db: Db, appId: string, limit: number, offset: number): Promise<Audience[]> {
    return db
      .selectFrom('audiences')
      .selectAll()
      .where('app_id', '=', appId)
      .orderBy('created_at')
      .orderBy('id')
      .limit(limit)
      .offset(offset)
      .execute();
  }
}
