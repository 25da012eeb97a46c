import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import type { CutNotification } from '../../db/repositories/notifications.js';
import { notificationRequestSchema } from '../../domain/notification-request.js';
import { actorOf, requirePermission } from '../auth.js';
import { answerOnce } from '../idempotency.js';
import {
  authErrors,
  bodyErrors,
  createdNotificationRecord,
  errorResponse,
  idempotencyHeaders,
  journeyTag,
  notificationRecord,
  pathId,
} from '../schemas.js';
import { createdNotificationResponse, notificationEventsResponse, notificationResponse } from '../serialize.js';

const idParams = z.object({ id: pathId('notification') });
const count = z.number().int();
const rate = z.number();
const shareStats = {
  sent: count,
  failed: count,
  direct_opens: count,
  opened: count,
  direct_open_rate: rate,
  conversions: z.record(z.string(), z.number()),
  conversion_rates: z.record(z.string(), rate),
};

/** An A/B test's figures per variant (src/http/serialize.ts, abTestStats). */
const abTestStatsRecord = z.object({
  stage: z.enum(['test', 'waiting', 'rest']),
  metric: z.string(),
  winner_due_at: z.string().nullable(),
  winner: z.number().int().nullable(),
  winner_picked_at: z.string().nullable(),
  test_fraction: z.number(),
  holdout_fraction: z.number(),
  window_hours: count,
  variants: z.array(
    z.object({
      variant: count,
      ...shareStats,
      app_opened: count,
      app_open_rate: rate,
      lift: z.object({ app_opens: rate.nullable(), conversions: z.record(z.string(), rate.nullable()) }),
    }),
  ),
  rest: z.object({ variant: count.nullable(), ...shareStats }),
  holdout: z.object({
    devices: count,
    app_opened: count,
    app_open_rate: rate,
    conversions: z.record(z.string(), z.number()),
    conversion_rates: z.record(z.string(), rate),
  }),
});
const createdAnswer = (n: CutNotification) => ({ status: 201, body: createdNotificationResponse(n) });

/** GET /v6/stats/notifications/:id/events as `notificationEventsResponse` answers it. */
const notificationEvents = z.object({
  id: z.string(),
  audience_id: z.string().nullable(),
  message_id: z.string().nullable(),
  push_text: z.string().nullable(),
  published_time: z.string().nullable(),
  direct_opens: count,
  indirect_opens: count,
  influenced_opens: count,
  opens: count,
  pushes_succeeded: count,
  pushes_rejected: count,
  pushes_rejected_by_reason: z.record(z.string(), count),
  pushes_expired: count,
  pushes_capped: count,
  devices_not_allowed: count,
  event_conversions: z.record(z.string(), count),
  ab_test: abTestStatsRecord.optional(),
  journey: journeyTag,
});

type App = Parameters<FastifyPluginAsyncZod>[0];

export function notificationRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    createRoutes(app, ctx);
    recordRoutes(app, ctx);
    engagementRoutes(app, ctx);
  };
}

function createRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  // v3, v5 and v6 behave identically: existing clients of every version keep working.
  for (const version of ['v3', 'v5', 'v6']) {
    app.post(
      `/${version}/notifications`,
      {
        onRequest: write,
        schema: {
          tags: ['notifications'],
          summary: 'Create a notification',
          headers: idempotencyHeaders,
          body: notificationRequestSchema,
          response: { 201: createdNotificationRecord, ...bodyErrors, 404: errorResponse, 422: errorResponse, ...authErrors },
        },
      },
      async (request, reply) =>
        answerOnce(request, reply, createdAnswer, (idempotency) =>
          ctx.services.notifications.create(request.principal.appId, request.body, idempotency, actorOf(request)),
        ),
    );
  }
}

/** One notification by id: read, canceled, its A/B test's winner picked. */
function recordRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  const read = requirePermission(ctx, 'read');
  app.get(
    '/v6/notifications/:id',
    {
      onRequest: read,
      schema: {
        tags: ['notifications'],
        summary: 'Read a notification with its delivery state',
        params: idParams,
        response: { 200: notificationRecord, 404: errorResponse, ...authErrors },
      },
    },
    async (request) => {
      return notificationResponse(await ctx.services.notifications.get(request.principal.appId, request.params.id));
    },
  );

  app.delete(
    '/v6/notifications/:id',
    {
      onRequest: write,
      schema: {
        tags: ['notifications'],
        summary: 'Cancel a notification that is scheduled or sending',
        params: idParams,
        response: { 200: notificationRecord, ...bodyErrors, 404: errorResponse, 409: errorResponse, ...authErrors },
      },
    },
    async (request) => {
      return notificationResponse(await ctx.services.notifications.cancel(request.principal.appId, request.params.id, actorOf(request)));
    },
  );

  app.post(
    '/v6/notifications/:id/winner',
    {
      onRequest: write,
      schema: {
        tags: ['notifications'],
        summary: "Pick an A/B test's winner: the rest of its audience is sent that variant",
        params: idParams,
        body: z.strictObject(
          { variant: z.number({ error: 'must be a number' }).int('must be an integer').min(0, 'must be at least 0') },
          { error: (issue) => (issue.code === 'invalid_type' ? 'body must be {"variant": N}' : undefined) },
        ),
        response: { 200: notificationRecord, ...bodyErrors, 404: errorResponse, 409: errorResponse, ...authErrors },
      },
    },
    async (request) =>
      notificationResponse(
        await ctx.services.notifications.pickWinner(request.principal.appId, request.params.id, request.body.variant, actorOf(request)),
      ),
  );
}

/** A notification's delivery figures, opens and conversions. */
function engagementRoutes(app: App, ctx: HttpContext) {
  const read = requirePermission(ctx, 'read');
  app.get(
    '/v6/stats/notifications/:id/events',
    {
      onRequest: read,
      schema: {
        tags: ['notifications'],
        summary: 'Delivery statistics of a notification, its opens and event conversions',
        params: idParams,
        response: {
          200: notificationEvents,
          404: errorResponse,
          ...authErrors,
        },
      },
    },
    async (request) =>
      notificationEventsResponse(await ctx.services.activity.notificationEngagement(request.principal.appId, request.params.id)),
  );
}
