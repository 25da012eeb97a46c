import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { notificationRequestSchema } from '../../domain/notification-request.js';
import { APNS_MAX_PAYLOAD_BYTES } from '../../domain/push-mapping.js';
import { WEB_PUSH_MAX_RECORD_BYTES, webPushRecordBytes } from '../../domain/web-push.js';
import { requirePermission } from '../auth.js';
import { authErrors, bodyErrors, errorResponse } from '../schemas.js';
import { ValidationError } from '../../domain/errors.js';
import type { PushPreview } from '../../services/notifications.js';

const json = z.record(z.string(), z.unknown());
const gatewayParts = {
  apns: z.object({ headers: json, body: json, bytes: z.number().int(), max_bytes: z.number().int() }),
  fcm: z.object({ body: json }),
  web: z.object({ headers: json, document: json, bytes: z.number().int(), max_bytes: z.number().int() }),
  hms: z.object({ message: json }),
};
/** Each platform's gateway: the part of a preview a device of it receives. */
const GATEWAY_OF = { ios: 'apns', android: 'fcm', web: 'web', huawei: 'hms' } as const;
const userDevicePreview = z.object({
  device_id: z.string(),
  platform: z.string(),
  localized: z.string().nullable().optional(),
  ...Object.fromEntries(Object.entries(gatewayParts).map(([k, v]) => [k, v.optional()])),
  /** why its send would fail it alone (its render fails), instead of its request */
  error: z.string().optional(),
});

function gatewayRequests(preview: PushPreview) {
  return {
    apns: { headers: { ...preview.apns.headers }, body: preview.apns.body, bytes: preview.apns.bytes, max_bytes: APNS_MAX_PAYLOAD_BYTES },
    fcm: { body: { ...preview.fcm } },
    web: {
      headers: { ...preview.web.headers },
      document: { ...preview.web.document },
      bytes: webPushRecordBytes(preview.web.body.length),
      max_bytes: WEB_PUSH_MAX_RECORD_BYTES,
    },
    hms: { message: { ...preview.hms } },
  };
}

/**
 * The exact APNs, FCM, Web Push (headers, the document before encryption, the record's size once encrypted) and
 * HMS requests a notification body maps to, its templates rendered for `device_id` (else with the body's data
 * alone), validated like a create (same schema, same messages) but neither stored nor sent. `_nid` holds a
 * placeholder id of the real id's length. With `user_id`: for each of the user's devices, what its gateway receives.
 */
export function notificationPreviewRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.post(
      '/v6/notifications/preview',
      {
        onRequest: requirePermission(ctx, 'read'),
        schema: {
          tags: ['notifications'],
          summary: "Preview the APNs, FCM, Web Push and HMS requests of a notification body, or each of a user's devices' request",
          body: notificationRequestSchema,
          querystring: z.object({
            locale: z
              .string()
              .regex(/^[A-Za-z]{2}([_-][A-Za-z]{2})?$/, 'must be a language (fr) or <language>_<COUNTRY> (pt_BR)')
              .transform((l) => (l.length === 2 ? l.toLowerCase() : `${l.slice(0, 2).toLowerCase()}_${l.slice(3).toUpperCase()}`))
              .optional(),
            // the device whose variables the templates render with, and whose locale picks the language unless given
            device_id: z.string().optional(),
            // the user whose devices are previewed, each with its variables
            user_id: z.string().min(1).max(255).optional(),
          }),
          response: {
            ...authErrors,
            ...bodyErrors,
            200: z.union([
              z.object({
                ...gatewayParts,
                // the key of `localized` previewed (null: the payload as it is), for the `locale` asked
                localized: z.string().nullable(),
              }),
              z.object({ user_id: z.string(), devices: z.array(userDevicePreview) }),
            ]),
            404: errorResponse,
          },
        },
      },
      async (request) => {
        const { locale, device_id: deviceId, user_id: userId } = request.query;
        const { appId } = request.principal;
        if (userId !== undefined) {
          if (deviceId !== undefined) throw new ValidationError('user_id: cannot be combined with device_id');
          const each = await ctx.services.notifications.previewForUser(appId, request.body, userId, locale);
          const devices = each.map(({ device, preview }) => {
            const base = { device_id: device.id, platform: device.platform };
            if ('error' in preview) return { ...base, error: preview.error };
            const gateway = GATEWAY_OF[device.platform as keyof typeof GATEWAY_OF];
            return { ...base, localized: preview.variant, ...(gateway && { [gateway]: gatewayRequests(preview)[gateway] }) };
          });
          return { user_id: userId, devices };
        }
        const preview = await ctx.services.notifications.preview(appId, request.body, { locale, deviceId });
        return { ...gatewayRequests(preview), localized: preview.variant };
      },
    );
  };
}
