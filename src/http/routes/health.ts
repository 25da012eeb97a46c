import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';

export function healthRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get('/health', { schema: { tags: ['ops'], summary: 'The process is up' } }, async () => ({ status: 'ok' }));

    app.get('/ready', { schema: { tags: ['ops'], summary: 'Database and queue are reachable' } }, async (_request, reply) => {
      const checks = await ctx.readiness();
      const ready = Object.values(checks).every((v) => v === 'ok');
      return reply.status(ready ? 200 : 503).send({ status: ready ? 'ok' : 'unavailable', checks });
    });
  };
}
