import { sql } from 'kysely';
import { isUuid } from '../../domain/cursor.js';
import type { Db } from '../database.js';
import { jsonbArray } from '../pg-arrays.js';
import type { Audience } from '../schema.js';
import type { Filter } from '../../domain/filters.js';
import { ALL_DEVICES_SPEC_KEY } from '../../domain/audience-spec.js';
import { randomId } from '../../platform/random-id.js';

const generatedName = () => `api_audience_${randomId(9)}`;

/** How `upsertFiltersMany` names a spec of an app. */
export const specRef = (appId: string, key: string) => `${appId} ${key}`;

export class AudiencesRepository {
  /**
   * Returns the app's audience for this canonical spec, creating it if needed. One statement against a
   * unique index, so concurrent identical requests converge on one row.
   */
  async upsertFilters(db: Db, appId: string, key: string, canonical: Filter[]): Promise<Audience> {
    return this.upsert(db, appId, key, 'filters', canonical, generatedName());
  }

  /**
   * `upsertFilters` for several specs: their audiences' ids by `specRef`. One statement finds the stored ones and
   * inserts the others, so a spec named again (a user's next notification) writes nothing; a spec that another
   * statement inserted meanwhile is taken by a second, the upsert (one statement may not update a row twice, so
   * each spec is asked for once).
   */
  async upsertFiltersMany(db: Db, specs: { appId: string; key: string; canonical: Filter[] }[]): Promise<Map<string, string>> {
    // in one order, so that two groups inserting the same specs wait for each other instead of deadlocking
    // (by app and key: the same key in two apps is two rows)
    const unique = new Map([...specs].map((s) => [specRef(s.appId, s.key), s] as const).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    const wanted = (list: { appId: string; key: string; canonical: Filter[] }[]) =>
      // one array per column: the statement's text is the same however many there are
      sql`select * from unnest(${list.map((s) => s.appId)}::uuid[], ${list.map((s) => s.key)}::text[],
        ${jsonbArray(list.map((s) => s.canonical))}::jsonb[], ${list.map(() => generatedName())}::text[])
        as t(app_id, spec_key, filters, name)`;
    const ids = new Map<string, string>();
    const { rows } = await sql<Pick<Audience, 'id' | 'app_id' | 'spec_key'>>`
      with wanted as (${wanted([...unique.values()])}),
      found as (select a.id, a.app_id, a.spec_key from audiences a join wanted w using (app_id, spec_key)),
      created as (
        insert into audiences (app_id, spec_key, kind, filters, name)
        select w.app_id, w.spec_key, 'filters', w.filters, w.name from wanted w
        where not exists (select 1 from found f where f.app_id = w.app_id and f.spec_key = w.spec_key)
        on conflict (app_id, spec_key) do nothing
        returning id, app_id, spec_key)
      select * from found union all select * from created`.execute(db);
    for (const a of rows) ids.set(specRef(a.app_id, a.spec_key), a.id);
    const raced = [...unique].filter(([ref]) => !ids.has(ref)).map(([, s]) => s);
    if (raced.length) {
      // a no-op update so RETURNING yields the rows another statement inserted
      const upserted = await sql<Pick<Audience, 'id' | 'app_id' | 'spec_key'>>`
        insert into audiences (app_id, spec_key, kind, filters, name)
        select t.app_id, t.spec_key, 'filters', t.filters, t.name from (${wanted(raced)}) t
        on conflict (app_id, spec_key) do update set spec_key = excluded.spec_key
        returning id, app_id, spec_key`.execute(db);
      for (const a of upserted.rows) ids.set(specRef(a.app_id, a.spec_key), a.id);
    }
    return ids;
  }

  /** The app's built-in all-devices audience: one per app, stable id. */
  async upsertAllDevices(db: Db, appId: string): Promise<Audience> {
    return this.upsert(db, appId, ALL_DEVICES_SPEC_KEY, 'all', null, 'All devices');
  }

  /** Finds the stored audience first, so one named again writes nothing (see `upsertFiltersMany`). */
  private async upsert(db: Db, appId: string, key: string, kind: 'all' | 'filters', filters: Filter[] | null, name: string) {
    const found = await db.selectFrom('audiences').selectAll().where('app_id', '=', appId).where('spec_key', '=', key).executeTakeFirst();
    if (found) return found;
    return (
      db
        .insertInto('audiences')
        .values({ app_id: appId, spec_key: key, kind, filters: filters === null ? null : JSON.stringify(filters), name })
        // a no-op update so RETURNING yields the row another statement inserted meanwhile
        .onConflict((oc) => oc.columns(['app_id', 'spec_key']).doUpdateSet((eb) => ({ spec_key: eb.ref('excluded.spec_key') })))
        .returningAll()
        .executeTakeFirstOrThrow()
    );
  }

  async findForApp(db: Db, appId: string, id: string): Promise<Audience | undefined> {
    if (!isUuid(id)) return undefined;
    return db.selectFrom('audiences').selectAll().where('app_id', '=', appId).where('id', '=', id).executeTakeFirst();
  }

  /** The stored filters of an audience (null: all devices). */
  async filtersOf(db: Db, id: string): Promise<Filter[] | null> {
    const row = await db.selectFrom('audiences').select('filters').where('id', '=', id).executeTakeFirstOrThrow();
    return row.filters;
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
