import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { filterListSchema, type Filter } from '../../domain/filters.js';
import { requirePermission } from '../auth.js';
import { authErrors, bodyErrors } from '../schemas.js';

/**
 * The device count of a filter list, computed like a stored audience's `device_count` but without storing
 * an audience; an empty list counts every device of the app.
 */
export function audienceCountRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.post(
      '/v6/audiences/count',
      {
        onRequest: requirePermission(ctx, 'read'),
        schema: {
          tags: ['audiences'],
          summary: 'Count the devices an on-the-fly filter list selects, without storing it',
          body: z.strictObject(
            { filters: filterListSchema },
            { error: (issue) => (issue.code === 'invalid_type' ? 'body must be {"filters": [...]}' : undefined) },
          ),
          response: {
            ...authErrors,
            ...bodyErrors,
            200: z.object({ device_count: z.number().int() }),
          },
        },
      },
      async (request) => {
        return { device_count: await ctx.services.audiences.count(request.principal.appId, request.body.filters as Filter[]) };
      },
    );
  };
}
