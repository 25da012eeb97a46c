import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { requirePermission } from '../auth.js';
import { audienceRecord, authErrors, devicePage, errorResponse, pageQuery, pathId } from '../schemas.js';
import { audienceResponse } from '../serialize.js';
import { deviceView } from '../serialize-devices.js';

const idParams = z.object({ id: pathId('audience') });

export function audienceRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    const read = requirePermission(ctx, 'read');

    app.get(
      '/v6/audiences',
      {
        onRequest: read,
        schema: {
          tags: ['audiences'],
          summary: "List the app's audiences, oldest first",
          querystring: pageQuery,
          response: { 200: z.object({ audiences: z.array(audienceRecord) }), 400: errorResponse, ...authErrors },
        },
      },
      async (request) => {
        const rows = await ctx.services.audiences.list(request.principal.appId, request.query);
        return { audiences: rows.map(audienceResponse) };
      },
    );

    app.get(
      '/v6/audiences/:id',
      {
        onRequest: read,
        schema: {
          tags: ['audiences'],
          summary: 'Read an audience with its device count',
          params: idParams,
          response: {
            200: z.object({ audience: audienceRecord.extend({ device_count: z.number().int() }) }),
            404: errorResponse,
            ...authErrors,
          },
        },
      },
      async (request) => {
        const { appId } = request.principal;
        const audience = await ctx.services.audiences.get(appId, request.params.id);
        const deviceCount = await ctx.services.audiences.count(appId, audience.filters);
        return { audience: { ...audienceResponse(audience), device_count: deviceCount } };
      },
    );

    app.get(
      '/v6/audiences/:id/devices',
      {
        onRequest: read,
        schema: {
          tags: ['audiences'],
          summary: "The audience's devices in cursor pages: repeat with the cursor until a page has no devices",
          params: idParams,
          querystring: z.object({ cursor: z.string().max(512).optional(), per: z.coerce.number().int().min(1).max(1000).default(100) }),
          response: {
            200: devicePage,
            400: errorResponse,
            404: errorResponse,
            ...authErrors,
          },
        },
      },
      async (request) => {
        const page = await ctx.services.audiences.devicesPage(request.principal.appId, request.params.id, request.query);
        return { meta: { cursor: page.cursor, total: page.total }, devices: page.devices.map(deviceView) };
      },
    );
  };
}
