import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { messageRequestSchema } from '../../domain/message-request.js';
import type { MessageRecord } from '../../services/messages.js';
import { actorOf, requirePermission } from '../auth.js';
import { answerOnce } from '../idempotency.js';
import { authErrors, bodyErrors, errorResponse, idempotencyHeaders, messageRecord, pageQuery, pathId } from '../schemas.js';
import { messageResponse } from '../serialize.js';

const idParams = z.object({ id: pathId('message') });
const count = z.number().int();
const createdAnswer = (r: MessageRecord) => ({ status: 201, body: messageResponse(r) });

type App = Parameters<FastifyPluginAsyncZod>[0];

/** In-app messages, the app's side: create (with a push), read, list, cancel, and their impressions. */
export function messageRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    messageRecordRoutes(app, ctx);
    messageAfterRoutes(app, ctx);
  };
}

/** Creating messages, listing and reading them. */
function messageRecordRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  const read = requirePermission(ctx, 'read');
  app.post(
    '/v6/messages',
    {
      onRequest: write,
      schema: {
        tags: ['messages'],
        summary: 'Create an in-app message (and the push sent with it)',
        headers: idempotencyHeaders,
        body: messageRequestSchema,
        response: { 201: messageRecord, ...bodyErrors, 404: errorResponse, 422: errorResponse, ...authErrors },
      },
    },
    async (request, reply) =>
      answerOnce(request, reply, createdAnswer, (idempotency) =>
        ctx.services.messages.create(request.principal.appId, request.body, actorOf(request), idempotency),
      ),
  );

  app.get(
    '/v6/messages',
    {
      onRequest: read,
      schema: {
        tags: ['messages'],
        summary: "List the app's messages, newest first",
        querystring: pageQuery,
        response: { 200: z.object({ messages: z.array(messageRecord) }), 400: errorResponse, ...authErrors },
      },
    },
    async (request) => ({ messages: (await ctx.services.messages.list(request.principal.appId, request.query)).map(messageResponse) }),
  );

  app.get(
    '/v6/messages/:id',
    {
      onRequest: read,
      schema: {
        tags: ['messages'],
        summary: 'Read a message',
        params: idParams,
        response: { 200: messageRecord, 404: errorResponse, ...authErrors },
      },
    },
    async (request) => messageResponse(await ctx.services.messages.get(request.principal.appId, request.params.id)),
  );
}

/** Canceling a message, and its impressions. */
function messageAfterRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  const read = requirePermission(ctx, 'read');
  app.delete(
    '/v6/messages/:id',
    {
      onRequest: write,
      schema: {
        tags: ['messages'],
        summary: 'Cancel a message that waits for its send time (and its push)',
        params: idParams,
        response: { 200: messageRecord, ...bodyErrors, 404: errorResponse, 409: errorResponse, ...authErrors },
      },
    },
    async (request) => messageResponse(await ctx.services.messages.cancel(request.principal.appId, request.params.id)),
  );

  app.get(
    '/v6/stats/messages/:id/events',
    {
      onRequest: read,
      schema: {
        tags: ['messages'],
        summary: 'Impressions of a message, by where the app showed it',
        params: idParams,
        response: {
          200: z.object({
            id: z.string(),
            full_screen_impressions: count,
            message_stream_impressions: count,
            in_app_notification_impressions: count,
          }),
          404: errorResponse,
          ...authErrors,
        },
      },
    },
    async (request) => {
      const { id } = request.params;
      const totals = await ctx.services.messages.impressions(request.principal.appId, id);
      return {
        id,
        full_screen_impressions: totals.full_screen,
        message_stream_impressions: totals.stream,
        in_app_notification_impressions: totals.in_app,
      };
    },
  );
}
