import type { FastifyReply, FastifyRequest } from 'fastify';
import { parseIdempotencyKey, requestFingerprint } from '../domain/idempotency.js';
import { Replay, type Answer, type IdempotentRequest } from '../services/idempotency.js';

/**
 * Answers a create that may carry an Idempotency-Key. `create` calls the service with what it needs to claim the
 * key and store `answer(result)` in its own transaction; a replay is sent as the first request's answer was,
 * marked `Idempotent-Replayed: true`. Without the header the create runs as it always did.
 */
export async function answerOnce<T>(
  request: FastifyRequest,
  reply: FastifyReply,
  answer: (result: T) => Answer,
  create: (idempotency: IdempotentRequest<T> | undefined) => Promise<T | Replay>,
): Promise<FastifyReply> {
  const key = parseIdempotencyKey(request.headers['idempotency-key']);
  const idempotency =
    key === undefined ? undefined : { key, fingerprint: requestFingerprint(request.method, request.url, request.body), answer };
  const result = await create(idempotency);
  if (result instanceof Replay) {
    return reply.header('idempotent-replayed', 'true').status(result.answer.status).send(result.answer.body);
  }
  const { status, body } = answer(result);
  return reply.status(status).send(body);
}

/** The answer of a request that records something and answers nothing more (events). */
export const acceptedAnswer = (): Answer => ({ status: 202, body: {} });
