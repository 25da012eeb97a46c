import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { metricsAccess } from '../metrics-access.js';

/**
 * Prometheus scrape endpoint: pushes by platform and outcome, gateway latency, queue depth, process. On the API port
 * only with METRICS_TOKEN, to those who bring it.
 */
export function metricsRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
      const access = metricsAccess(request.headers.authorization, ctx.config.METRICS_TOKEN, false);
      if (!access.ok) {
        if (access.status === 401) void reply.header('www-authenticate', 'Bearer');
        return reply.code(access.status).send({ error: access.error });
      }
      const body = await ctx.metrics.registry.metrics();
      return reply.type(ctx.metrics.registry.contentType).send(body);
    });
  };
}
