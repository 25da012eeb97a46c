import { z } from 'zod';
import { payloadSchema } from './payload.js';
import { checkLocalized, localizedSchema, type Localized } from './localized.js';
import type { Payload } from './payload.js';

/**
 * A stored template (`/v6/templates`): a payload and its per-language content, validated as a notification's are
 * (templates parsed, their variables checked), kept by version; a send names it instead of giving a payload.
 */

export interface TemplateContent {
  payload: Payload;
  localized?: Localized;
}

export const templateBodySchema = z
  .strictObject(
    {
      name: z.string({ error: 'must be a string' }).min(1, 'must not be empty').max(200, 'must be at most 200 characters'),
      payload: payloadSchema,
      localized: localizedSchema.optional(),
    },
    { error: (issue) => (issue.code === 'invalid_type' ? 'body must be {"name", "payload", "localized"?}' : undefined) },
  )
  .superRefine((t, ctx) => checkLocalized(t.payload, t.localized, ctx));

export type TemplateBody = z.output<typeof templateBodySchema>;

/** How a send names a stored template: its id, and a version (the current one when absent). */
export const templateRefSchema = z.strictObject(
  {
    id: z.string({ error: 'must be a template id string' }).min(1, 'must not be empty'),
    version: z.number({ error: 'must be an integer' }).int('must be an integer').min(1, 'must be at least 1').optional(),
  },
  { error: (issue) => (issue.code === 'invalid_type' ? 'must be {"id": "<template id>", "version"?: N}' : undefined) },
);
export type TemplateRef = z.output<typeof templateRefSchema>;
