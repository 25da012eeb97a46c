import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AppContext } from '../../app/context.js';
import { NotFoundError } from '../../domain/errors.js';
import { requirePermission } from '../auth.js';
import { pageQuery } from '../schemas.js';
import { audienceResponse } from '../serialize.js';
import { deviceView } from './devices.js';

const idParams = z.object({ id: z.string() });

export function audienceRoutes(ctx: AppContext): FastifyPluginAsyncZod {
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
        },
      },
      async (request) => {
        const { per, page } = request.query;
        const rows = await ctx.repos.audiences.listForApp(ctx.db, request.principal.appId, per, (page - 1) * per);
        return { audiences: rows.map((a) => ({ ...audienceResponse(a), test: a.test })) };
      },
    );

    app.get(
      '/v6/audiences/:id',
      {
        onRequest: read,
        schema: { tags: ['audiences'], summary: 'Read an audience with its device count', params: idParams },
      },
      async (request) => {
        const { appId } = request.principal;
        const audience = await ctx.repos.audiences.findForApp(ctx.db, appId, request.params.id);
        if (!audience) throw new NotFoundError('audience');
        const deviceCount = await ctx.repos.devices.countAudience(ctx.db, appId, audience.filters, { now: new Date() });
        return { audience: { ...audienceResponse(audience), device_count: deviceCount } };
      },
    );

    app.get(
      '/v6/audiences/:id/devices',
      {
        onRequest: read,
        schema: {
          tags: ['audiences'],
          summary: "The audience's devices in cursor pages (the last page has cursor null)",
          params: idParams,
          querystring: z.object({ cursor: z.string().max(512).optional(), per: z.coerce.number().int().min(1).max(1000).default(100) }),
        },
      },
      async (request) => {
        const { appId } = request.principal;
        const audience = await ctx.repos.audiences.findForApp(ctx.db, appId, request.params.id);
        if (!audience) throw new NotFoundError('audience');
        const page = await ctx.services.devices.audiencePage(appId, audience.id, audience.filters, {
          cursor: request.query.cursor,
          per: request.query.per,
          now: new Date(),
        });
        return { meta: { cursor: page.cursor, total: page.total }, devices: page.devices.map(deviceView) };
      },
    );
  };
}
