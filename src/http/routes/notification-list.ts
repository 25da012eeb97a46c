import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AppContext } from '../../app/context.js';
import { requirePermission } from '../auth.js';
import { notificationRecord, pageQuery } from '../schemas.js';
import { notificationResponse } from '../serialize.js';

/** The app's notifications, newest first, with their state and counters; the last page has fewer than `per`. */
export function notificationListRoutes(ctx: AppContext): FastifyPluginAsyncZod {
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
          response: { 200: z.object({ notifications: z.array(notificationRecord) }) },
        },
      },
      async (request) => {
        const { per, page } = request.query;
        const rows = await ctx.repos.notifications.listForApp(ctx.db, request.principal.appId, per, (page - 1) * per);
        return { notifications: rows.map(notificationResponse) };
      },
    );
  };
}
