import { sql } from 'kysely';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AppContext } from '../../app/context.js';

export function healthRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get('/health', { schema: { tags: ['ops'], summary: 'The process is up' } }, async () => ({ status: 'ok' }));

    app.get('/ready', { schema: { tags: ['ops'], summary: 'Database and queue are reachable' } }, async (_request, reply) => {
      const checks: Record<string, string> = {};
      await Promise.all([
        sql`select 1`.execute(ctx.db).then(
          () => (checks.database = 'ok'),
          () => (checks.database = 'unreachable'),
        ),
        ctx.queues.ping().then(
          () => (checks.queue = 'ok'),
          () => (checks.queue = 'unreachable'),
        ),
      ]);
      const ready = Object.values(checks).every((v) => v === 'ok');
      return reply.status(ready ? 200 : 503).send({ status: ready ? 'ok' : 'unavailable', checks });
    });
  };
}
