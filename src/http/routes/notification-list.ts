import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { requirePermission } from '../auth.js';
import { authErrors, notificationRecord, pageQuery } from '../schemas.js';
import { notificationResponse } from '../serialize.js';

/** The app's notifications, newest first, with their state and counters; the last page has fewer than `per`. */
export function notificationListRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v6/notifications',
      {
        onRequest: requirePermission(ctx, 'read'),
        schema: {
          tags: ['notifications'],
          summary: "List the app's notifications, newest first",
          security: [{ basic: [] }],
          querystring: pageQuery,
          response: {
            ...authErrors,
            200: z.object({ notifications: z.array(notificationRecord) }),
          },
        },
      },
      async (request) => {
        const { per, page } = request.query;
        const rows = await ctx.services.notifications.list(request.principal.appId, { per, page });
        return { notifications: rows.map(notificationResponse) };
      },
    );
  };
}
