import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { Database, TemplateRow, TemplateVersionRow } from '../schema.js';
import type { TemplateContent } from '../../domain/stored-templates.js';

/** A template with the content of one of its versions. */
export type TemplateWithContent = TemplateRow & Pick<TemplateVersionRow, 'payload' | 'localized'> & { content_version: number };

const withContent = (db: Db) =>
  db
    .selectFrom('templates as t')
    .innerJoin('template_versions as v', 'v.template_id', 't.id')
    .selectAll('t')
    .select(['v.payload', 'v.localized', 'v.version as content_version']);

const contentRow = (id: string, version: number, c: TemplateContent) => ({
  template_id: id,
  version,
  payload: JSON.stringify(c.payload),
  localized: c.localized ? JSON.stringify(c.localized) : null,
});

/** Stored templates and their versions (migration 059). */
export class TemplatesRepository {
  async create(trx: Transaction<Database>, appId: string, name: string, content: TemplateContent): Promise<TemplateWithContent> {
    const t = await trx.insertInto('templates').values({ app_id: appId, name }).returningAll().executeTakeFirstOrThrow();
    await trx
      .insertInto('template_versions')
      .values(contentRow(t.id, t.version, content))
      .execute();
    return { ...t, payload: content.payload, localized: content.localized ?? null, content_version: t.version };
  }

  /** The template with its newest version's content, or the version asked for; undefined when either is not there. */
  async get(db: Db, appId: string, id: string, version?: number): Promise<TemplateWithContent | undefined> {
    return withContent(db)
      .where('t.app_id', '=', appId)
      .where('t.id', '=', id)
      .where('v.version', '=', version ?? sql<number>`t.version`)
      .executeTakeFirst();
  }

  /** The app's templates with their newest content, oldest first. */
  async list(db: Db, appId: string, limit: number, offset: number): Promise<TemplateWithContent[]> {
    return withContent(db)
      .where('t.app_id', '=', appId)
      .whereRef('v.version', '=', 't.version')
      .orderBy('t.created_at')
      .orderBy('t.id')
      .limit(limit)
      .offset(offset)
      .execute();
  }

  /** Every version of a template, newest first. */
  async versions(db: Db, id: string): Promise<TemplateVersionRow[]> {
    return db.selectFrom('template_versions').selectAll().where('template_id', '=', id).orderBy('version', 'desc').execute();
  }

  /** Keeps the template from being deleted until the transaction ends (what names it commits first). */
  async hold(trx: Transaction<Database>, appId: string, id: string): Promise<boolean> {
    const row = await trx
      .selectFrom('templates')
      .select('id')
      .where('app_id', '=', appId)
      .where('id', '=', id)
      .forShare()
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Locks the template for a change or a delete; undefined when the app has none of this id. */
  async lock(trx: Transaction<Database>, appId: string, id: string): Promise<TemplateWithContent | undefined> {
    await trx.selectFrom('templates').select('id').where('app_id', '=', appId).where('id', '=', id).forUpdate().executeTakeFirst();
    return this.get(trx, appId, id);
  }

  /** Renames the template and, with content, makes its next version of it. */
  async change(
    trx: Transaction<Database>,
    current: TemplateRow,
    change: { name?: string | undefined; content: TemplateContent | null },
  ): Promise<TemplateRow> {
    const version = change.content ? current.version + 1 : current.version;
    if (change.content)
      await trx
        .insertInto('template_versions')
        .values(contentRow(current.id, version, change.content))
        .execute();
    return trx
      .updateTable('templates')
      .set({ name: change.name ?? current.name, version, updated_at: sql`now()` })
      .where('id', '=', current.id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async delete(trx: Transaction<Database>, id: string): Promise<void> {
    await trx.deleteFrom('templates').where('id', '=', id).execute();
  }

  /**
   * The journeys, not archived, a version of which has a send step naming the template: an entrant on any of
   * their versions may still reach that step.
   */
  async usedBy(db: Db, appId: string, id: string): Promise<{ id: string; name: string }[]> {
    return db
      .selectFrom('journeys as j')
      .select(['j.id', 'j.name'])
      .where('j.app_id', '=', appId)
      .where('j.state', '<>', 'archived')
      .where(({ exists, selectFrom }) =>
        exists(
          selectFrom('journey_versions as v')
            .select(sql`1`.as('one'))
            .whereRef('v.journey_id', '=', 'j.id').where(sql<boolean>`exists (select 1 from jsonb_array_elements(v.definition -> 'steps') s
              where lower(s -> 'notification' ->> 'template_id') = lower(${id}))`),
        ),
      )
      .orderBy('j.created_at')
      .execute();
  }
}
