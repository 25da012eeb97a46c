import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { requirePermission } from '../auth.js';
import { authErrors, errorResponse } from '../schemas.js';

/** What a web page needs to subscribe: the app's VAPID public key (the applicationServerKey of pushManager.subscribe). */
export function webPushRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v6/web-push/vapid-public-key',
      {
        onRequest: requirePermission(ctx, 'device'),
        schema: {
          tags: ['devices'],
          summary: "The app's VAPID public key, for pushManager.subscribe({applicationServerKey})",
          response: {
            ...authErrors,
            200: z.object({ public_key: z.string().describe('base64url, 65 bytes: an uncompressed P-256 point') }),
            404: errorResponse,
          },
        },
      },
      async (request) => ({ public_key: await ctx.services.apps.vapidPublicKey(request.principal.appId) }),
    );
  };
}
