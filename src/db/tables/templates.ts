import type { Localized } from '../../domain/localized.js';
import type { Generated } from 'kysely';
import type { Json } from './columns.js';

/** A stored template (migration 059): its name and newest version. */
export interface TemplatesTable {
  id: Generated<string>;
  app_id: string;
  name: string;
  version: Generated<number>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

/** One version of a template's content, kept once made. */
export interface TemplateVersionsTable {
  template_id: string;
  version: number;
  payload: Json<Record<string, unknown>>;
  localized: Json<Localized> | null;
  created_at: Generated<Date>;
}
