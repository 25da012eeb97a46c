import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { notificationRequestSchema } from '../../domain/notification-request.js';
import { APNS_MAX_PAYLOAD_BYTES } from '../../domain/push-mapping.js';
import { WEB_PUSH_MAX_RECORD_BYTES, webPushRecordBytes } from '../../domain/web-push.js';
import { requirePermission } from '../auth.js';
import { authErrors, bodyErrors, errorResponse } from '../schemas.js';

const json = z.record(z.string(), z.unknown());

/**
 * The exact APNs, FCM, Web Push (headers, the document before encryption, the record's size once encrypted) and
 * HMS requests a notification body maps to, its templates rendered for `device_id` (else with the body's data
 * alone), validated like a create (same schema, same messages) but neither stored nor sent. `_nid` holds a
 * placeholder id of the real id's length.
 */
export function notificationPreviewRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.post(
      '/v6/notifications/preview',
      {
        onRequest: requirePermission(ctx, 'read'),
        schema: {
          tags: ['notifications'],
          summary: 'Preview the APNs, FCM, Web Push and HMS requests of a notification body',
          body: notificationRequestSchema,
          querystring: z.object({
            locale: z
              .string()
              .regex(/^[A-Za-z]{2}([_-][A-Za-z]{2})?$/, 'must be a language (fr) or <language>_<COUNTRY> (pt_BR)')
              .transform((l) => (l.length === 2 ? l.toLowerCase() : `${l.slice(0, 2).toLowerCase()}_${l.slice(3).toUpperCase()}`))
              .optional(),
            // the device whose variables the templates render with, and whose locale picks the language unless given
            device_id: z.string().optional(),
          }),
          response: {
            ...authErrors,
            ...bodyErrors,
            200: z.object({
              apns: z.object({ headers: json, body: json, bytes: z.number().int(), max_bytes: z.number().int() }),
              fcm: z.object({ body: json }),
              web: z.object({ headers: json, document: json, bytes: z.number().int(), max_bytes: z.number().int() }),
              hms: z.object({ message: json }),
              // the key of `localized` previewed (null: the payload as it is), for the `locale` asked
              localized: z.string().nullable(),
            }),
            404: errorResponse,
          },
        },
      },
      async (request) => {
        const { locale, device_id: deviceId } = request.query;
        const preview = await ctx.services.notifications.preview(request.principal.appId, request.body, { locale, deviceId });
        return {
          apns: {
            headers: { ...preview.apns.headers },
            body: preview.apns.body,
            bytes: preview.apns.bytes,
            max_bytes: APNS_MAX_PAYLOAD_BYTES,
          },
          fcm: { body: { ...preview.fcm } },
          web: {
            headers: { ...preview.web.headers },
            document: { ...preview.web.document },
            bytes: webPushRecordBytes(preview.web.body.length),
            max_bytes: WEB_PUSH_MAX_RECORD_BYTES,
          },
          hms: { message: { ...preview.hms } },
          localized: preview.variant,
        };
      },
    );
  };
}
