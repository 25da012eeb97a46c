import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { notificationRequestSchema } from '../../domain/notification-request.js';
import { APNS_MAX_PAYLOAD_BYTES } from '../../domain/push-mapping.js';
import { requirePermission } from '../auth.js';
import { authErrors, bodyErrors, errorResponse } from '../schemas.js';

const json = z.record(z.string(), z.unknown());

/**
 * The exact APNs and FCM requests a notification body maps to, validated like a create (same schema, same
 * messages) but neither stored nor sent. `_nid` holds a placeholder id of the real id's length.
 */
export function notificationPreviewRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.post(
      '/v6/notifications/preview',
      {
        onRequest: requirePermission(ctx, 'read'),
        schema: {
          tags: ['notifications'],
          summary: 'Preview the APNs and FCM requests of a notification body',
          security: [{ basic: [] }],
          body: notificationRequestSchema,
          response: {
            ...authErrors,
            ...bodyErrors,
            200: z.object({
              apns: z.object({ headers: json, body: json, bytes: z.number().int(), max_bytes: z.number().int() }),
              fcm: z.object({ body: json }),
            }),
            404: errorResponse,
          },
        },
      },
      async (request) => {
        const preview = await ctx.services.notifications.preview(request.principal.appId, request.body);
        return {
          apns: {
            headers: { ...preview.apns.headers },
            body: preview.apns.body,
            bytes: preview.apns.bytes,
            max_bytes: APNS_MAX_PAYLOAD_BYTES,
          },
          fcm: { body: { ...preview.fcm } },
        };
      },
    );
  };
}
