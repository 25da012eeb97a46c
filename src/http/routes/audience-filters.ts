import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { requirePermission } from '../auth.js';
import { authErrors, errorResponse, pathId } from '../schemas.js';

/** An audience's definition: every device (`kind: all`, filters null) or its canonical filter list. */
export function audienceFilterRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v6/audiences/:id/filters',
      {
        onRequest: requirePermission(ctx, 'read'),
        schema: {
          tags: ['audiences'],
          summary: "An audience's filters (null for the all-devices audience)",
          params: z.object({ id: pathId('audience') }),
          response: {
            ...authErrors,
            200: z.object({ id: z.string(), kind: z.enum(['all', 'filters']), filters: z.array(z.unknown()).nullable() }),
            404: errorResponse,
          },
        },
      },
      async (request) => {
        const audience = await ctx.services.audiences.get(request.principal.appId, request.params.id);
        return { id: audience.id, kind: audience.kind, filters: audience.filters };
      },
    );
  };
}
