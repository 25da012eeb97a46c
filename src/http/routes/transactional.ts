import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { transactionalRequestSchema } from '../../domain/transactional-request.js';
import { actorOf, requirePermission } from '../auth.js';
import type { TransactionalResult } from '../../services/transactional.js';
import { answerOnce } from '../idempotency.js';
import { authErrors, bodyErrors, errorResponse, idempotencyHeaders } from '../schemas.js';

const transactionalAnswer = z.object({
  id: z.string(),
  results: z.object({
    success: z.number().int(),
    uninstalled: z.number().int(),
    /** device ids the push did not reach */
    failures: z.array(z.string()),
    /** why each of `failures` was not reached, in the same order (absent from answers stored before it) */
    failure_reasons: z.array(z.object({ device_id: z.string(), reason: z.string() })).optional(),
    /** devices not sent a visible push because their notifications are Disabled (absent from answers stored before it) */
    not_allowed: z.number().int().optional(),
  }),
});

const sentAnswer = (sent: TransactionalResult) => ({
  status: 200,
  body: {
    id: sent.id,
    results: {
      success: sent.success,
      uninstalled: sent.uninstalled,
      failures: sent.failures.map((f) => f.deviceId),
      failure_reasons: sent.failures.map((f) => ({ device_id: f.deviceId, reason: f.reason })),
      not_allowed: sent.notAllowed,
    },
  },
});

export function transactionalRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.post(
      '/v6/transactional/notifications',
      {
        onRequest: requirePermission(ctx, 'write'),
        config: { answersAfterRemote: true },
        schema: {
          tags: ['notifications'],
          summary: 'Send to one device or one user now, and answer with the outcome',
          headers: idempotencyHeaders,
          body: transactionalRequestSchema,
          response: { 200: transactionalAnswer, ...bodyErrors, 409: errorResponse, 422: errorResponse, ...authErrors },
        },
      },
      async (request, reply) =>
        answerOnce(request, reply, sentAnswer, (idempotency) =>
          ctx.services.transactional.send(request.principal.appId, request.body, idempotency, actorOf(request)),
        ),
    );
  };
}
