import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { DAILY_METRICS, openReportSchema, sessionReportSchema, type DailyMetric } from '../../domain/activity.js';
import { requirePermission } from '../auth.js';
import { accepted, authErrors, bodyErrors, errorResponse, pathId } from '../schemas.js';

const idParams = z.object({ id: pathId('device') });
const day = z.string().describe('a UTC day, YYYY-MM-DD');
const windowQuery = z.object({ from: day.optional(), to: day.optional() });

const SUMMARIES: Record<DailyMetric, string> = {
  installs: 'Devices registered, per UTC day',
  opens: 'Push opens (tapped or not) per UTC day',
  sessions: 'App sessions started per UTC day',
  active_users: 'Devices with a session or a push open, per UTC day',
};

/**
 * What the SDK reports about app use, and the statistics counted from it. The reports take the `device`
 * permission and reach a device by its id, as the other device routes do; the statistics take `read`.
 */
export function activityRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    const device = requirePermission(ctx, 'device');
    const read = requirePermission(ctx, 'read');
    const reportAnswers = { 202: accepted, ...bodyErrors, 404: errorResponse, 451: errorResponse, ...authErrors };

    app.post(
      '/v6/devices/:id/sessions',
      {
        onRequest: device,
        schema: {
          tags: ['devices'],
          summary: 'Report an app session: its start, or with `duration` its end (the same session id)',
          params: idParams,
          body: sessionReportSchema,
          response: reportAnswers,
        },
      },
      async (request, reply) => {
        await ctx.services.activity.recordSession(request.principal.appId, request.params.id, request.body.session);
        return reply.status(202).send({});
      },
    );

    app.post(
      '/v6/devices/:id/opens',
      {
        onRequest: device,
        schema: {
          tags: ['devices'],
          summary: 'Report a push open: tapped (direct) or the app opened while it was there (indirect)',
          params: idParams,
          body: openReportSchema,
          response: reportAnswers,
        },
      },
      async (request, reply) => {
        await ctx.services.activity.recordOpen(request.principal.appId, request.params.id, request.body.open, request.principal.role);
        return reply.status(202).send({});
      },
    );

    app.get(
      '/v6/stats/total_installs',
      {
        onRequest: read,
        schema: {
          tags: ['stats'],
          summary: 'Devices registered up to `to` (default today), since `from` when given',
          querystring: windowQuery,
          response: { 200: z.object({ total_installs: z.number().int() }), 400: errorResponse, ...authErrors },
        },
      },
      async (request) => ({ total_installs: await ctx.services.activity.totalInstalls(request.principal.appId, request.query) }),
    );

    for (const metric of DAILY_METRICS) {
      app.get(
        `/v6/stats/${metric}`,
        {
          onRequest: read,
          schema: {
            tags: ['stats'],
            summary: `${SUMMARIES[metric]}, from \`from\` to \`to\` (default: the 30 days up to today), oldest first`,
            querystring: windowQuery,
            response: {
              200: z.array(z.object({ date: z.string(), count: z.number().int() })),
              400: errorResponse,
              ...authErrors,
            },
          },
        },
        async (request) => ctx.services.activity.daily(request.principal.appId, metric, request.query),
      );
    }
  };
}
