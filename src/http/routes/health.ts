import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { HttpContext } from '../context.js';

export function healthRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/health',
      { schema: { tags: ['ops'], summary: 'The process is up', response: { 200: z.object({ status: z.literal('ok') }) } } },
      async () => ({ status: 'ok' as const }),
    );

    const readiness = z.object({
      status: z.enum(['ok', 'unavailable']),
      checks: z.object({ database: z.enum(['ok', 'unreachable']), queue: z.enum(['ok', 'unreachable']) }),
    });
    app.get(
      '/ready',
      { schema: { tags: ['ops'], summary: 'Database and queue are reachable', response: { 200: readiness, 503: readiness } } },
      async (_request, reply) => {
        const checks = await ctx.readiness();
        const ready = Object.values(checks).every((v) => v === 'ok');
        return reply.status(ready ? 200 : 503).send({ status: ready ? 'ok' : 'unavailable', checks });
      },
    );
  };
}
