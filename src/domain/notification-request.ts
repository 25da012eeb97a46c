import { z } from 'zod';
import { filterListSchema, type Filter } from './filters.js';
import { capField, deliveryOptionFields } from './delivery-options.js';
import { payloadSchema } from './payload.js';
import { templateDataFields } from './template-data.js';
import { checkLocalized, localizedSchema } from './localized.js';
import { scheduleFields } from './schedule.js';
import { quietHoursField } from './quiet-hours.js';
import { abTestFields, checkAbTest } from './ab-test.js';
import { checkTemplateRef, templateRefFields } from './stored-templates.js';
import type { Payload } from './payload.js';

/** A notification's life: waiting for its send time, going out, then one of the three ends. */
export const NOTIFICATION_STATES = ['scheduled', 'sending', 'sent', 'failed', 'canceled'] as const;
export type NotificationState = (typeof NOTIFICATION_STATES)[number];

/** The three target forms: every device, a stored audience, an on-the-fly audience of filters. */
export type Target = { kind: 'all' } | { kind: 'audience'; audienceId: string } | { kind: 'filters'; filters: Filter[] };

const toForms = {
  all: z.literal('*'),
  audience: z.strictObject({ audience: z.string({ error: 'must be an audience id string' }).min(1, 'audience must not be empty') }),
  filters: filterListSchema.min(1, 'must hold at least one filter'),
};

/**
 * Picks the form by the value's shape and reports that form's own errors, so a bad filter deep in an array
 * is named by its path instead of a generic "no union member matched". Messages take the same target.
 */
export const toSchema = z.unknown().transform((value, ctx) => {
  const form =
    value === '*'
      ? toForms.all
      : Array.isArray(value)
        ? toForms.filters
        : typeof value === 'object' && value !== null
          ? toForms.audience
          : null;
  if (!form) {
    ctx.addIssue({ code: 'custom', message: 'must be "*", {"audience": "<id>"} or an array of filters' });
    return z.NEVER;
  }
  const parsed = form.safeParse(value);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
    return z.NEVER;
  }
  return parsed.data as '*' | { audience: string } | Filter[];
});

/** A pace for one notification: its pushes spread evenly over the minutes it takes. */
export const throttleSchema = z.strictObject(
  {
    per_minute: z
      .number({ error: 'must be a number' })
      .int('must be an integer')
      .min(1, 'must be at least 1')
      .max(10_000_000, 'must be at most 10000000'),
  },
  { error: (issue) => (issue.code === 'invalid_type' ? 'must be {"per_minute": N}' : undefined) },
);

export const notificationRequestSchema = z.strictObject(
  {
    notification: z
      .strictObject(
        {
          to: toSchema,
          payload: payloadSchema.optional(),
          localized: localizedSchema.optional(),
          ...abTestFields,
          throttle: throttleSchema.optional(),
          quiet_hours: quietHoursField.optional(),
          ...scheduleFields,
          ...deliveryOptionFields,
          ...capField,
          ...templateDataFields,
          ...templateRefFields,
        },
        // Only the wrong-type case gets this message; an unknown key keeps its own ("Unrecognized key: ...").
        { error: (issue) => (issue.code === 'invalid_type' ? 'must be an object with to and payload' : undefined) },
      )
      .superRefine((n, ctx) => {
        if (!checkTemplateRef(n, ctx)) checkAbTest(n, ctx);
        if (n.payload) checkLocalized(n.payload, n.localized, ctx);
      })
      // an A/B test's payload is its first variant's: what is measured, previewed and stored as the payload
      .transform(({ payload, ...n }) => ({ ...n, payload: payload ?? n.variants?.[0]?.payload })),
  },
  { error: (issue) => (issue.code === 'invalid_type' ? 'body must be {"notification": {"to", "payload"}}' : undefined) },
);

/** A request as the schema has parsed it: the type follows the schema, never written beside it. */
export type NotificationInput = z.output<typeof notificationRequestSchema>;
/** A request with its payload: its own, its first variant's, or the stored template's it names. */
export type NotificationRequest = { notification: Omit<NotificationInput['notification'], 'payload'> & { payload: Payload } };
/** When and how fast a notification goes out, as submitted. */
export type ScheduleInput = Pick<NotificationRequest['notification'], 'send_at' | 'local_time' | 'throttle' | 'quiet_hours'>;

export function targetOf(to: NotificationRequest['notification']['to']): Target {
  if (to === '*') return { kind: 'all' };
  if (Array.isArray(to)) return { kind: 'filters', filters: to };
  return { kind: 'audience', audienceId: to.audience };
}
