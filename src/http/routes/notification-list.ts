import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { requirePermission } from '../auth.js';
import { authErrors, errorResponse, notificationRecord, pageQuery } from '../schemas.js';
import { notificationResponse } from '../serialize.js';
import { NOTIFICATION_STATES } from '../../domain/notification-request.js';

/** The app's notifications, newest first (of one `state` when given), with their state and counters; the last page has fewer than `per`. */
export function notificationListRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v6/notifications',
      {
        onRequest: requirePermission(ctx, 'read'),
        schema: {
          tags: ['notifications'],
          summary: "List the app's notifications, newest first",
          querystring: pageQuery.extend({ state: z.enum(NOTIFICATION_STATES).optional() }),
          response: {
            ...authErrors,
            200: z.object({ notifications: z.array(notificationRecord) }),
            400: errorResponse,
          },
        },
      },
      async (request) => {
        const rows = await ctx.services.notifications.list(request.principal.appId, request.query);
        return { notifications: rows.map(notificationResponse) };
      },
    );
  };
}
