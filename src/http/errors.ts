import { maxHeaderSize } from 'node:http';
import { OverloadedError } from '../platform/admission.js';
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { DomainError, isDatabaseUnavailable } from '../domain/errors.js';
import { isUnknownId } from './schemas.js';

/** "/notification/to/0/name" -> "notification.to[0].name": the field path a client can find in its body. */
export function fieldPath(instancePath: string): string {
  return instancePath
    .split('/')
    .filter(Boolean)
    .map((seg) => seg.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, seg) => (/^\d+$/.test(seg) ? `${acc}[${seg}]` : acc ? `${acc}.${seg}` : seg), '');
}

// Fastify's own request errors, as the client should see them.
const FASTIFY_CLIENT_ERRORS: Record<string, { status: number; message: string }> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 415, message: 'content-type must be application/json' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, message: 'content-length does not match the body' },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, message: 'body is too large' },
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, message: 'body is not valid JSON' },
};

/**
 * Seconds a client is told to wait when the database cannot serve (a failover: Patroni replaces a lost primary within
 * its ttl, a switchover within a few seconds): 1 to 3, drawn for each answer, so the clients refused together do not
 * all come back in the same second the primary returns.
 */
export function databaseRetryAfterSeconds(random: () => number = Math.random): number {
  return 1 + Math.floor(random() * 3);
}

/** The answer to a request no route has. */
export const NOT_FOUND = 'not found';

/** What the HTTP parser refused, before any request could be read, as the client should see it. */
export function parserRefusal(err: { code?: string; reason?: string }): { status: number; error: string } {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, error: `request: the request line and headers are larger than ${maxHeaderSize} bytes` };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { status: 413, error: 'body: chunk extensions are too large' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, error: 'request: the request line and headers did not come in time' };
    default:
      return { status: 400, error: err.reason ? `request: is not valid HTTP/1.1 (${err.reason})` : 'request: is not valid HTTP/1.1' };
  }
}

/** The router's own refusals (Fastify's frameworkErrors), before any route: in the shape of every other answer. */
export function answerRouterError(err: FastifyError, reply: FastifyReply, maxParamLength: number): void {
  const error =
    err.code === 'FST_ERR_BAD_URL'
      ? 'path: is not valid percent-encoded UTF-8'
      : err.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? `path: a parameter is longer than ${maxParamLength} characters`
        : 'path: cannot be routed';
  void reply.status(err.statusCode ?? 400).send({ error });
}

/**
 * One place that turns errors into HTTP answers: validation -> 400 naming the field (a malformed path id -> the 404
 * of an unknown one), domain errors -> their status, Fastify client errors -> their 4xx, a database that cannot serve
 * now (isDatabaseUnavailable) -> 503 with Retry-After, anything else -> 500 whose details stay in the log.
 */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    if (hasZodFastifySchemaValidationErrors(err)) {
      // a route that takes a body, called without one (or with an empty one declared as JSON: server.ts)
      if (err.validationContext === 'body' && request.body === undefined)
        return reply.status(400).send({ error: 'body must not be empty' });
      const first = err.validation[0]!;
      if (err.validationContext === 'params' && isUnknownId(first)) return reply.status(404).send({ error: first.message });
      const where = [err.validationContext === 'body' ? '' : err.validationContext, fieldPath(first.instancePath)]
        .filter(Boolean)
        .join('.');
      return reply.status(400).send({ error: where ? `${where}: ${first.message}` : first.message });
    }
    if (err instanceof DomainError) {
      if (err instanceof OverloadedError) reply.header('retry-after', String(err.retryAfterSeconds));
      return reply.status(err.status).send({ error: err.message });
    }
    const known = err.code ? FASTIFY_CLIENT_ERRORS[err.code] : undefined;
    if (known) return reply.status(known.status).send({ error: known.message });
    if (err instanceof SyntaxError || (err.statusCode === 400 && /JSON/i.test(err.message))) {
      return reply.status(400).send({ error: 'body is not valid JSON' });
    }
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.status(err.statusCode).send({ error: err.message });
    }
    if (isDatabaseUnavailable(err)) {
      request.log.warn({ err: { code: err.code, message: err.message } }, 'request answered 503: the database cannot serve now');
      const seconds = databaseRetryAfterSeconds();
      return reply
        .status(503)
        .header('retry-after', String(seconds))
        .send({ error: `database: unavailable for a moment (a failover or a restart); retry after ${seconds} s` });
    }
    request.log.error({ err }, 'request failed');
    return reply.status(500).send({ error: 'internal server error' });
  });

  app.setNotFoundHandler((_request, reply) => reply.status(404).send({ error: NOT_FOUND }));
}
