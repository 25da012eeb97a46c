import { z } from 'zod';
import { filterListSchema, type Filter } from './filters.js';
import { capField, deliveryOptionFields } from './delivery-options.js';
import { payloadSchema } from './payload.js';
import { templateDataFields } from './template-data.js';
import { checkLocalized, localizedSchema } from './localized.js';
import { checkTemplateRef, templateRefFields } from './stored-templates.js';
import type { Payload } from './payload.js';

/** `POST /v6/transactional/notifications`: one device, or one user's devices narrowed by extra filters. */
export const transactionalRequestSchema = z.strictObject(
  {
    to: z.strictObject(
      {
        field: z.enum(['device_id', 'user_id'], { error: 'must be "device_id" or "user_id"' }),
        value: z.string({ error: 'must be a string' }).min(1, 'must not be empty').max(255, 'must be at most 255 characters'),
      },
      { error: (issue) => (issue.code === 'invalid_type' ? 'must be {"field": "device_id"|"user_id", "value": "..."}' : undefined) },
    ),
    group: z
      .string({ error: (issue) => (issue.input === undefined ? 'is required (3 to 64 letters, digits or "-")' : 'must be a string') })
      .regex(/^[A-Za-z0-9-]{3,64}$/, 'must be 3 to 64 letters, digits or "-"'),
    notification: z
      .strictObject(
        {
          payload: payloadSchema.optional(),
          localized: localizedSchema.optional(),
          ...deliveryOptionFields,
          ...capField,
          ...templateDataFields,
          ...templateRefFields,
        },
        { error: (issue) => (issue.code === 'invalid_type' ? 'must be an object with payload' : undefined) },
      )
      .superRefine((n, ctx) => {
        if (checkTemplateRef(n, ctx)) return;
        if (n.payload) checkLocalized(n.payload, n.localized, ctx);
        else ctx.addIssue({ code: 'custom', path: ['payload'], message: 'must be an object (or name a template_id)' });
      }),
    extra_filters: filterListSchema.optional(),
  },
  {
    error: (issue) =>
      issue.code === 'invalid_type' ? 'body must be {"to", "group", "notification": {"payload"}, "extra_filters"?}' : undefined,
  },
);

export type TransactionalInput = z.output<typeof transactionalRequestSchema>;
/** A send with its payload: its own or the stored template's it names. */
export type TransactionalRequest = Omit<TransactionalInput, 'notification'> & {
  notification: Omit<TransactionalInput['notification'], 'payload'> & { payload: Payload };
};

/** The devices a transactional send goes to, as filters: the one named, and the extra filters too. */
export function transactionalFilters(request: TransactionalRequest): Filter[] {
  return [{ name: request.to.field, criteria: [request.to.value] }, ...(request.extra_filters ?? [])];
}

/**
 * What makes a transactional send with a collapse_key the same notification as an earlier one: the key and the
 * recipient (`to`; a device id in either case). Null without a collapse_key.
 */
export function transactionalKey(request: TransactionalRequest): string | null {
  const key = request.notification.payload.collapse_key;
  if (typeof key !== 'string') return null;
  const { field, value } = request.to;
  return JSON.stringify([field, field === 'device_id' ? value.toLowerCase() : value, key]);
}
