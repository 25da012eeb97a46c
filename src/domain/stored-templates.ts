import { z } from 'zod';
import { checkLocalized, localizedSchema, type Localized } from './localized.js';
import { payloadSchema, type Payload } from './payload.js';

/**
 * Stored templates (`/v6/templates`, docs/templates.md): a payload and its texts per language, checked as a
 * notification's are (its Liquid parsed, its variables known, its size per gateway) when made, and named by id from
 * a send instead of its payload.
 */

const name = z.string({ error: 'must be a string' }).trim().min(1, 'must not be empty').max(200, 'must be at most 200 characters');

/** What a version holds: the payload and, per language, the texts that replace its own. */
const contentFields = { payload: payloadSchema, localized: localizedSchema.optional() };

const checkContent = (t: TemplateContent, ctx: z.RefinementCtx) => checkLocalized(t.payload, t.localized, ctx);
const contentSchema = z.strictObject(contentFields).superRefine(checkContent);

/** `POST /v6/templates` and `PUT /v6/templates/:id`: the whole template. */
export const templateCreateSchema = z.strictObject(
  {
    template: z
      .strictObject(
        { name, ...contentFields },
        { error: (issue) => (issue.code === 'invalid_type' ? 'must be an object with name and payload' : undefined) },
      )
      .superRefine(checkContent),
  },
  { error: (issue) => (issue.code === 'invalid_type' ? 'body must be {"template": {"name", "payload", "localized"?}}' : undefined) },
);

/** `PATCH /v6/templates/:id`: what changes (`localized: null` removes the texts per language). */
export const templateChangeSchema = z.strictObject(
  {
    template: z
      .strictObject(
        { name: name.optional(), payload: payloadSchema.optional(), localized: localizedSchema.nullable().optional() },
        { error: (issue) => (issue.code === 'invalid_type' ? 'must be an object of name, payload, localized' : undefined) },
      )
      .refine((t) => Object.keys(t).length > 0, 'must change name, payload or localized'),
  },
  { error: (issue) => (issue.code === 'invalid_type' ? 'body must be {"template": {...}}' : undefined) },
);

export type TemplateCreate = z.output<typeof templateCreateSchema>['template'];
export type TemplateChange = z.output<typeof templateChangeSchema>['template'];

/** One version's content. */
export interface TemplateContent {
  payload: Payload;
  localized?: Localized | undefined;
}

/**
 * The content a change makes from the current one, checked as a whole (an entry of `localized` is measured with
 * the new payload): null when the change leaves the content as it is (a new name alone), else the content or the
 * first problem as `template.<field>: <message>`.
 */
export function changedContent(
  current: TemplateContent,
  change: TemplateChange,
): { content: TemplateContent } | { problem: string } | null {
  if (change.payload === undefined && change.localized === undefined) return null;
  const localized = change.localized === null ? undefined : (change.localized ?? current.localized);
  const parsed = contentSchema.safeParse({ payload: change.payload ?? current.payload, ...(localized && { localized }) });
  if (parsed.success) return { content: parsed.data };
  const issue = parsed.error.issues[0]!;
  const field = ['template', ...issue.path].map((p, i) => (typeof p === 'number' ? `[${p}]` : i ? `.${String(p)}` : p)).join('');
  return { problem: `${field}: ${issue.message}` };
}

/** The fields a send names a stored template with, in place of its payload. */
export const templateRefFields = {
  template_id: z.string({ error: 'must be a template id string' }).min(1, 'must not be empty').max(64).optional(),
  template_version: z.number({ error: 'must be an integer' }).int('must be an integer').min(1, 'must be at least 1').optional(),
};

type RefFields = { template_id?: string | undefined; template_version?: number | undefined } & Partial<
  Record<'payload' | 'localized' | 'variants', unknown>
>;

/**
 * The cross-checks of a send that names a template: nothing it would replace beside it, a version only with an id.
 * Answers whether it names one (then the payload is the template's).
 */
export function checkTemplateRef(n: RefFields, ctx: z.RefinementCtx): boolean {
  if (n.template_id === undefined) {
    if (n.template_version !== undefined) ctx.addIssue({ code: 'custom', path: ['template_version'], message: 'needs template_id' });
    return false;
  }
  for (const key of ['payload', 'localized', 'variants'] as const)
    if (n[key] !== undefined)
      ctx.addIssue({ code: 'custom', path: [key], message: 'cannot be combined with template_id (the template has it)' });
  return true;
}

/** A send's fields with the template's content in place of its reference's, and the version it took. */
export function withContent<F extends RefFields>(
  fields: F,
  content: TemplateContent & { version: number },
): Omit<F, 'payload'> & { payload: Payload } {
  const { payload, localized, version } = content;
  return { ...fields, payload, ...(localized && { localized }), template_version: version };
}
