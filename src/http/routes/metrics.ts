import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';

/** Prometheus scrape endpoint: pushes by platform and outcome, gateway latency, queue depth, process. */
export function metricsRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
      const body = await ctx.metrics.registry.metrics();
      return reply.type(ctx.metrics.registry.contentType).send(body);
    });
  };
}
