import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { webhookChangeSchema, webhookCreateSchema } from '../../domain/webhooks.js';
import { actorOf, requirePermission } from '../auth.js';
import { authErrors, bodyErrors, errorResponse, isoDateQuery, pathId, webhookAttemptRecord, webhookRecord } from '../schemas.js';
import { webhookAttemptResponse, webhookResponse } from '../serialize.js';

const idParams = z.object({ id: pathId('webhook') });
const answer = z.object({ webhook: webhookRecord });
const replayBody = z.strictObject({ since: isoDateQuery, until: isoDateQuery });
const testAnswer = z.object({
  /** the receiver's status, null when no answer came */
  status: z.number().int().nullable(),
  latency_ms: z.number().int(),
  error: z.string().nullable(),
  snippet: z.string().nullable(),
});

const tags = ['webhooks'];

type App = Parameters<FastifyPluginAsyncZod>[0];

/** Webhook endpoints: the write key manages them, the read key lists them, the sdk key neither. */
export function webhookRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    endpointRoutes(app, ctx);
    endpointChangeRoutes(app, ctx);
    sendingRoutes(app, ctx);
  };
}

/** An endpoint created, listed, read. */
function endpointRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  const read = requirePermission(ctx, 'read');
  const webhooks = () => ctx.services.webhooks;
  app.post(
    '/v6/webhooks',
    {
      onRequest: write,
      schema: {
        tags,
        summary: 'Create a webhook endpoint; its signing secret is answered this once',
        body: webhookCreateSchema,
        response: { 201: answer, ...bodyErrors, ...authErrors },
      },
    },
    async (request, reply) =>
      reply
        .status(201)
        .send({ webhook: webhookResponse(await webhooks().create(request.principal.appId, request.body, actorOf(request))) }),
  );

  app.get(
    '/v6/webhooks',
    {
      onRequest: read,
      schema: {
        tags,
        summary: "List the app's webhook endpoints",
        response: { 200: z.object({ webhooks: z.array(webhookRecord) }), ...authErrors },
      },
    },
    async (request) => ({ webhooks: (await webhooks().list(request.principal.appId)).map((e) => webhookResponse(e)) }),
  );

  app.get(
    '/v6/webhooks/:id',
    {
      onRequest: read,
      schema: {
        tags,
        summary: 'Read a webhook endpoint',
        params: idParams,
        response: { 200: answer, 404: errorResponse, ...authErrors },
      },
    },
    async (request) => ({ webhook: webhookResponse(await webhooks().get(request.principal.appId, request.params.id)) }),
  );
}

/** An endpoint changed, deleted, its secret replaced. */
function endpointChangeRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  const webhooks = () => ctx.services.webhooks;
  app.patch(
    '/v6/webhooks/:id',
    {
      onRequest: write,
      schema: {
        tags,
        summary: 'Change a webhook endpoint: url, events, description, enabled (enabling clears a disabling by pushd)',
        params: idParams,
        body: webhookChangeSchema,
        response: { 200: answer, ...bodyErrors, 404: errorResponse, ...authErrors },
      },
    },
    async (request) => ({
      webhook: webhookResponse(await webhooks().update(request.principal.appId, request.params.id, request.body, actorOf(request))),
    }),
  );

  app.delete(
    '/v6/webhooks/:id',
    {
      onRequest: write,
      schema: {
        tags,
        summary: 'Delete a webhook endpoint',
        params: idParams,
        response: { 204: z.null(), ...bodyErrors, 404: errorResponse, ...authErrors },
      },
    },
    async (request, reply) => {
      await webhooks().delete(request.principal.appId, request.params.id, actorOf(request));
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/v6/webhooks/:id/rotate-secret',
    {
      onRequest: write,
      schema: {
        tags,
        summary: 'Replace the signing secret (answered this once); the old one also signs for 24 hours',
        params: idParams,
        response: { 200: answer, ...bodyErrors, 404: errorResponse, ...authErrors },
      },
    },
    async (request) => ({
      webhook: webhookResponse(await webhooks().rotateSecret(request.principal.appId, request.params.id, actorOf(request))),
    }),
  );
}

/** What an endpoint is sent: a test ping, events again, the latest requests. */
function sendingRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  const read = requirePermission(ctx, 'read');
  const webhooks = () => ctx.services.webhooks;
  app.post(
    '/v6/webhooks/:id/test',
    {
      onRequest: write,
      config: { answersAfterRemote: true },
      schema: {
        tags,
        summary: 'Send one `ping` event to the endpoint now and answer what its receiver said',
        params: idParams,
        response: { 200: testAnswer, ...bodyErrors, 404: errorResponse, ...authErrors },
      },
    },
    async (request) => {
      const a = await webhooks().test(request.principal.appId, request.params.id);
      return { status: a.status, latency_ms: a.latencyMs, error: a.error, snippet: a.snippet };
    },
  );

  app.post(
    '/v6/webhooks/:id/replay',
    {
      onRequest: write,
      schema: {
        tags,
        summary: "Send the endpoint's events recorded in [since, until) again",
        params: idParams,
        body: replayBody,
        response: { 202: z.object({ events: z.number().int() }), ...bodyErrors, 404: errorResponse, ...authErrors },
      },
    },
    async (request, reply) =>
      reply
        .status(202)
        .send({ events: await webhooks().replay(request.principal.appId, request.params.id, request.body, actorOf(request)) }),
  );

  app.get(
    '/v6/webhooks/:id/attempts',
    {
      onRequest: read,
      schema: {
        tags,
        summary: "The endpoint's latest requests, newest first: status, latency, the start of the answer",
        params: idParams,
        response: { 200: z.object({ attempts: z.array(webhookAttemptRecord) }), 404: errorResponse, ...authErrors },
      },
    },
    async (request) => ({
      attempts: (await webhooks().attempts(request.principal.appId, request.params.id)).map(webhookAttemptResponse),
    }),
  );
}
