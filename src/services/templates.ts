import type { AuditRepository } from '../db/repositories/audit.js';
import type { Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import type { TemplatesRepository, TemplateWithContent } from '../db/repositories/templates.js';
import type { Database, TemplateVersionRow } from '../db/schema.js';
import type { Actor } from '../domain/audit.js';
import { isUuid } from '../domain/cursor.js';
import { ConflictError, NotFoundError, ValidationError } from '../domain/errors.js';
import type { Payload } from '../domain/payload.js';
import { changedContent, withContent, type TemplateChange, type TemplateCreate } from '../domain/stored-templates.js';
import type { ServiceDeps } from './deps.js';

export type TemplateServiceDeps = Pick<ServiceDeps, 'db' | 'readDb' | 'repos'>;

type Ref = { template_id?: string | undefined; template_version?: number | undefined; payload?: Payload | undefined };

/**
 * A send's fields with the content of the stored template they name (its version, else the newest), or as they are
 * when they name none. A request's schema has required a payload or a template id, one of the two.
 */
export async function resolveTemplate<F extends Ref>(
  db: Db,
  templates: TemplatesRepository,
  appId: string,
  fields: F,
): Promise<Omit<F, 'payload'> & { payload: Payload }> {
  if (fields.template_id === undefined) {
    if (!fields.payload) throw new ValidationError('payload: must be an object');
    return fields as F & { payload: Payload };
  }
  const found = isUuid(fields.template_id) ? await templates.get(db, appId, fields.template_id, fields.template_version) : undefined;
  if (!found) throw new NotFoundError(fields.template_version === undefined ? 'template' : `template version ${fields.template_version}`);
  return withContent(fields, { payload: found.payload, localized: found.localized ?? undefined, version: found.content_version });
}

/**
 * Checks the templates a journey's send steps name, and holds them until its transaction commits, so a delete
 * that comes meanwhile sees the journey naming them.
 */
export async function holdJourneyTemplates(
  trx: Transaction<Database>,
  templates: TemplatesRepository,
  appId: string,
  steps: readonly { type: string; notification?: unknown }[],
): Promise<void> {
  for (const [i, step] of steps.entries()) {
    if (step.type !== 'send') continue;
    const { template_id: id, template_version: version } = step.notification as { template_id?: string; template_version?: number };
    if (id === undefined) continue;
    const found = isUuid(id) && (await templates.hold(trx, appId, id)) && (await templates.get(trx, appId, id, version));
    if (!found)
      throw new ValidationError(`journey.steps[${i}].notification.template_id: no such template${version ? ` version ${version}` : ''}`);
  }
}

/**
 * The app's stored templates (`/v6/templates`): each change a new version, each audited in its transaction. Ids come
 * checked as UUIDs by the routes' params (`pathId`, src/http/schemas.ts).
 */
export class TemplateService {
  private readonly db: Db;
  private readonly readDb: Db;
  private readonly templates: TemplatesRepository;
  private readonly audit: AuditRepository;

  constructor(deps: TemplateServiceDeps) {
    this.db = deps.db;
    this.readDb = deps.readDb;
    this.templates = deps.repos.templates;
    this.audit = deps.repos.audit;
  }

  create(appId: string, input: TemplateCreate, actor: Actor): Promise<TemplateWithContent> {
    return this.db.transaction().execute(async (trx) => {
      const t = await this.templates.create(trx, appId, input.name, input);
      await this.audit.recordChange(trx, actor, appId, 'template.created', { template_id: t.id, name: t.name });
      return t;
    });
  }

  list(appId: string, page: { per: number; page: number }): Promise<TemplateWithContent[]> {
    return this.templates.list(this.readDb, appId, page.per, (page.page - 1) * page.per);
  }

  /** The template with its newest content, or that of `version`. */
  async get(appId: string, id: string, version?: number): Promise<TemplateWithContent> {
    const t = await this.templates.get(this.db, appId, id, version);
    if (!t) throw new NotFoundError(version === undefined ? 'template' : `template version ${version}`);
    return t;
  }

  async versions(appId: string, id: string): Promise<TemplateVersionRow[]> {
    await this.get(appId, id);
    return this.templates.versions(this.db, id);
  }

  /** PUT (the whole template) and PATCH (what is given): new content is a new version, a name alone is not. */
  async change(appId: string, id: string, change: TemplateChange, actor: Actor): Promise<TemplateWithContent> {
    return this.db.transaction().execute(async (trx) => {
      const current = await this.templates.lock(trx, appId, id);
      if (!current) throw new NotFoundError('template');
      const made = changedContent({ payload: current.payload as Payload, localized: current.localized ?? undefined }, change);
      if (made && 'problem' in made) throw new ValidationError(made.problem);
      const t = await this.templates.change(trx, current, { name: change.name, content: made?.content ?? null });
      await this.audit.recordChange(trx, actor, appId, 'template.updated', {
        template_id: id,
        version: t.version,
        changed: Object.keys(change).sort(),
      });
      return {
        ...t,
        payload: made?.content.payload ?? current.payload,
        localized: made ? (made.content.localized ?? null) : current.localized,
        content_version: t.version,
      };
    });
  }

  /** Deletes the template with its versions, unless a journey's send step names it (409 naming the journeys). */
  async delete(appId: string, id: string, actor: Actor): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      const current = await this.templates.lock(trx, appId, id);
      if (!current) throw new NotFoundError('template');
      const users = await this.templates.usedBy(trx, appId, id);
      if (users.length)
        throw new ConflictError(
          `template: used by ${users.map((j) => `journey "${j.name}" (${j.id})`).join(', ')}; change or archive it first`,
        );
      await this.templates.delete(trx, id);
      await this.audit.recordChange(trx, actor, appId, 'template.deleted', { template_id: id, name: current.name });
    });
  }
}
