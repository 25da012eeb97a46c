import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { requirePermission } from '../auth.js';
import { authErrors, errorResponse } from '../schemas.js';

const UNINSTALLED_WINDOW_DAYS = 30;

const count = z.number().int();

/** App-wide device and push figures (the console's overview). */
export function statsRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    const read = requirePermission(ctx, 'read');

    app.get(
      '/v6/stats/devices',
      {
        onRequest: read,
        schema: {
          tags: ['stats'],
          summary: 'Devices by platform and environment, push-enabled, and tokens uninstalled in the last 30 days',
          response: {
            ...authErrors,
            200: z.object({
              total: count,
              push_enabled: count,
              with_token: count,
              uninstalled_last_30_days: count,
              groups: z.array(
                z.object({
                  platform: z.enum(['ios', 'android', 'web', 'huawei']),
                  environment: z.enum(['production', 'development']),
                  devices: count,
                  push_enabled: count,
                  with_token: count,
                }),
              ),
            }),
          },
        },
      },
      async (request) => {
        const { appId } = request.principal;
        const { groups, uninstalled } = await ctx.services.stats.devices(appId, UNINSTALLED_WINDOW_DAYS);
        const sum = (key: 'devices' | 'push_enabled' | 'with_token') => groups.reduce((n, g) => n + g[key], 0);
        return {
          total: sum('devices'),
          push_enabled: sum('push_enabled'),
          with_token: sum('with_token'),
          uninstalled_last_30_days: uninstalled,
          groups: groups.map(({ development, ...g }) => ({
            ...g,
            environment: development ? ('development' as const) : ('production' as const),
          })),
        };
      },
    );

    app.get(
      '/v6/stats/pushes',
      {
        onRequest: read,
        schema: {
          tags: ['stats'],
          summary: 'Pushes per UTC day by outcome, the last `days` days (today included), oldest first',
          querystring: z.object({ days: z.coerce.number().int().min(1).max(366).default(30) }),
          response: {
            ...authErrors,
            200: z.object({
              days: z.array(z.object({ date: z.string(), succeeded: count, failed: count, invalidated: count })),
            }),
            400: errorResponse,
          },
        },
      },
      async (request) => ({ days: await ctx.services.stats.pushesPerDay(request.principal.appId, request.query.days) }),
    );
  };
}
