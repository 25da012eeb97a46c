import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { requirePermission } from '../auth.js';
import { authErrors, devicePage, deviceRecord, errorResponse, isoDateQuery } from '../schemas.js';
import { uninstalledView } from '../serialize-devices.js';

/** Devices whose token a gateway rejected, in cursor pages, oldest invalidation first. */
export function uninstalledRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v6/devices/uninstalled',
      {
        onRequest: requirePermission(ctx, 'read'),
        schema: {
          tags: ['devices'],
          summary: 'Devices whose push token the gateways rejected (kept 60 days), in cursor pages',
          querystring: z.object({
            cursor: z.string().optional(),
            from: isoDateQuery.optional(),
            to: isoDateQuery.optional(),
            per: z.coerce.number().int().min(1).max(1000).default(100),
          }),
          response: {
            200: devicePage.extend({
              devices: z.array(deviceRecord.extend({ uninstalled_at: z.string(), reason: z.string().nullable() })),
            }),
            400: errorResponse,
            404: errorResponse,
            ...authErrors,
          },
        },
      },
      async (request) => {
        const page = await ctx.services.devices.uninstalledPage(request.principal.appId, request.query);
        return { meta: { cursor: page.cursor, total: page.total }, devices: page.devices.map(uninstalledView) };
      },
    );
  };
}
