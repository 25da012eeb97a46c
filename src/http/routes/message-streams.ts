import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { impressionsSchema, markReadSchema } from '../../domain/message-stream.js';
import { requirePermission } from '../auth.js';
import { acceptedAnswer, answerOnce } from '../idempotency.js';
import { accepted, authErrors, bodyErrors, errorResponse, idempotencyHeaders, pathId, streamMessage } from '../schemas.js';
import { streamMessageView } from '../serialize.js';

const deviceParams = z.object({ id: pathId('device') });
const messageParams = z.object({ id: pathId('device'), messageId: pathId('message') });
const unread = z.object({ unread_count: z.number().int() });

type App = Parameters<FastifyPluginAsyncZod>[0];

/**
 * A device's message stream, for the SDK (the `device` permission: the sdk key, or a write key). As with the other
 * device routes, the device id in the path is the capability; a message of another app, or one the device is not
 * in the audience of, answers 404.
 */
export function messageStreamRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    streamReadRoutes(app, ctx);
    streamReportRoutes(app, ctx);
  };
}

/** The stream of a device and one message of it. */
function streamReadRoutes(app: App, ctx: HttpContext) {
  const device = requirePermission(ctx, 'device');
  app.get(
    '/v6/devices/:id/messages',
    {
      onRequest: device,
      schema: {
        tags: ['messages'],
        summary: "The device's message stream, newest first, with its unread count",
        params: deviceParams,
        querystring: z.object({ cursor: z.string().max(512).optional(), per: z.coerce.number().int().min(1).max(100).default(50) }),
        response: {
          200: z.object({
            messages: z.array(streamMessage),
            unread_count: z.number().int(),
            meta: z.object({ cursor: z.string().nullable(), total: z.number().int() }),
          }),
          400: errorResponse,
          404: errorResponse,
          ...authErrors,
        },
      },
    },
    async (request) => {
      const page = await ctx.services.messageStreams.page(request.principal.appId, request.params.id, request.query);
      return {
        messages: page.items.map(streamMessageView),
        unread_count: page.unread,
        meta: { cursor: page.cursor, total: page.total },
      };
    },
  );

  app.get(
    '/v6/devices/:id/messages/:messageId',
    {
      onRequest: device,
      schema: {
        tags: ['messages'],
        summary: "One message of the device's stream (the one a push names in _st.mid)",
        params: messageParams,
        response: { 200: z.object({ message: streamMessage }), 404: errorResponse, ...authErrors },
      },
    },
    async (request) => {
      const { id, messageId } = request.params;
      return { message: streamMessageView(await ctx.services.messageStreams.one(request.principal.appId, id, messageId)) };
    },
  );
}

/** What a device reports of its stream: read, deleted, shown. */
function streamReportRoutes(app: App, ctx: HttpContext) {
  const device = requirePermission(ctx, 'device');
  app.post(
    '/v6/devices/:id/messages/read',
    {
      onRequest: device,
      schema: {
        tags: ['messages'],
        summary: 'Mark messages of the stream read',
        params: deviceParams,
        body: markReadSchema,
        response: { 200: unread, ...bodyErrors, 404: errorResponse, 451: errorResponse, ...authErrors },
      },
    },
    async (request) => ({
      unread_count: await ctx.services.messageStreams.markRead(request.principal.appId, request.params.id, request.body.message_ids),
    }),
  );

  app.delete(
    '/v6/devices/:id/messages/:messageId',
    {
      onRequest: device,
      schema: {
        tags: ['messages'],
        summary: 'Delete a message from the stream',
        params: messageParams,
        response: { 200: unread, ...bodyErrors, 404: errorResponse, 451: errorResponse, ...authErrors },
      },
    },
    async (request) => {
      const { id, messageId } = request.params;
      return { unread_count: await ctx.services.messageStreams.delete(request.principal.appId, id, messageId) };
    },
  );

  app.post(
    '/v6/devices/:id/messages/impressions',
    {
      onRequest: device,
      schema: {
        tags: ['messages'],
        summary: 'Report where messages were shown (stream, full screen, in-app banner)',
        params: deviceParams,
        headers: idempotencyHeaders,
        body: impressionsSchema,
        response: { 202: accepted, ...bodyErrors, 404: errorResponse, 422: errorResponse, 451: errorResponse, ...authErrors },
      },
    },
    async (request, reply) =>
      answerOnce(request, reply, acceptedAnswer, (idempotency) =>
        ctx.services.messageStreams.recordImpressions(request.principal.appId, request.params.id, request.body.impressions, idempotency),
      ),
  );
}
