import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AppContext } from '../../context.js';
import { NotFoundError } from '../../domain/errors.js';
import type { Filter } from '../../domain/filters.js';
import { requirePermission } from '../auth.js';
import { audienceResponse } from '../serialize.js';

export function audienceRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  return async (app) => {
    const read = requirePermission(ctx.repos.keys, 'read');

    app.get(
      '/v6/audiences/:id',
      {
        onRequest: read,
        schema: { tags: ['audiences'], summary: 'Read an audience with its device count', params: z.object({ id: z.string() }) },
      },
      async (request) => {
        const { appId } = request.principal;
        const audience = await ctx.repos.audiences.findForApp(appId, request.params.id);
        if (!audience) throw new NotFoundError('audience');
        const deviceCount = await ctx.repos.devices.countAudience(appId, audience.filters as Filter[] | null, { now: new Date() });
        return { audience: { ...audienceResponse(audience), device_count: deviceCount } };
      },
    );
  };
}
