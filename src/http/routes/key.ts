import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { requirePermission } from '../auth.js';
import { authErrors, errorResponse } from '../schemas.js';

/** Who the presented key is: its role and its app. A client (the console) offers only what the role may do. */
export function keyRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v6/key',
      {
        onRequest: requirePermission(ctx, 'read'),
        schema: {
          tags: ['keys'],
          summary: "The presented key's role and app",
          response: {
            ...authErrors,
            200: z.object({
              role: z.enum(['read', 'write', 'sdk']),
              app: z.object({ id: z.string(), bundle_id: z.string(), name: z.string() }),
            }),
            404: errorResponse,
          },
        },
      },
      async (request) => {
        return { role: request.principal.role, app: await ctx.services.apps.getApp(request.principal.appId) };
      },
    );
  };
}
