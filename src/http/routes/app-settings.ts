import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { actorOf, requirePermission } from '../auth.js';
import { authErrors, bodyErrors, errorResponse } from '../schemas.js';
import { quietHoursSchema } from '../../domain/quiet-hours.js';
import { frequencyCapsSchema } from '../../domain/frequency-caps.js';
import { isTimeZone } from '../../domain/schedule.js';

const settings = z.object({
  app_id: z.string(),
  /** the operator's ceiling on the app's pushes a minute: shown, set only by `pushd app set-limits` */
  max_per_minute: z.number().int().nullable(),
  default_time_zone: z.string().nullable(),
  quiet_hours: z.object({ start: z.string(), end: z.string(), then: z.enum(['hold', 'drop']) }).nullable(),
  frequency_caps: z.array(z.object({ limit: z.number().int(), window: z.enum(['minute', 'hour', 'day']) })).nullable(),
});

/**
 * What a write key may change: the marketer's settings. `max_per_minute` is the operator's (it shares the
 * workers and gateway connections among apps), so it is refused by name rather than ignored.
 */
const change = z
  .strictObject(
    {
      default_time_zone: z
        .string({ error: 'must be an IANA time zone such as Europe/Paris, or null' })
        .refine(isTimeZone, 'must be an IANA time zone such as Europe/Paris, or null')
        .nullable()
        .optional(),
      quiet_hours: quietHoursSchema.nullable().optional(),
      frequency_caps: frequencyCapsSchema.nullable().optional(),
      max_per_minute: z
        .unknown()
        .refine(() => false, 'is set by the operator (pushd app set-limits --max-per-minute), not by an API key')
        .optional(),
    },
    { error: (issue) => (issue.code === 'unrecognized_keys' ? `unknown field ${issue.keys.join(', ')}` : 'must be an object') },
  )
  .refine((c) => Object.keys(c).length > 0, 'give default_time_zone, quiet_hours and/or frequency_caps');

/** The app's settings that shape its sends (frequency caps, quiet hours, default time zone): read them, change them. */
export function appSettingsRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v6/app',
      {
        onRequest: requirePermission(ctx, 'read'),
        schema: {
          tags: ['apps'],
          summary: "The app's frequency caps, quiet hours, default time zone and pushes a minute",
          response: { 200: settings, 404: errorResponse, ...authErrors },
        },
      },
      async (request) => ctx.services.apps.limitsOf(request.principal.appId),
    );

    app.patch(
      '/v6/app',
      {
        onRequest: requirePermission(ctx, 'write'),
        schema: {
          tags: ['apps'],
          summary: "Change the app's frequency caps, quiet hours or default time zone (null removes one)",
          body: change,
          response: { 200: settings, ...bodyErrors, 404: errorResponse, ...authErrors },
        },
      },
      async (request) =>
        ctx.services.apps.setLimits(
          request.principal.appId,
          {
            defaultTimeZone: request.body.default_time_zone,
            quietHours: request.body.quiet_hours,
            frequencyCaps: request.body.frequency_caps,
          },
          actorOf(request),
        ),
    );
  };
}
