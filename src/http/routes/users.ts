import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { actorOf, callerOf, requirePermission } from '../auth.js';
import { acceptedAnswer, answerOnce } from '../idempotency.js';
import { USER_ERASE_LIMIT } from '../../services/devices.js';
import { accepted, authErrors, bodyErrors, droppedList, errorResponse, eventsBody, idempotencyHeaders, nothingValid } from '../schemas.js';
import { userErasureResponse } from '../serialize-devices.js';

const userParams = z.object({ user_id: z.string().min(1).max(255) });
const userBody = z.object(
  { user: z.record(z.string(), z.unknown(), { error: 'must be an object' }) },
  { error: 'body must be {"user": {"custom": {...}}}' },
);

/** Per device: 200 erased, 404 no longer the user's, 416 beyond this call's limit. */
const userErasure = z.object({
  devices: z.array(z.object({ device_id: z.string(), status: z.union([z.literal(200), z.literal(404), z.literal(416)]) })),
  metadata: z.object({
    success: z.number().int(),
    failure: z.number().int().describe('devices that answered 404'),
    out_of_range: z.number().int().describe('devices that answered 416'),
    total: z.number().int(),
  }),
});

/** What merging attributes into a user's devices answers. */
const updateAnswers = {
  200: z.object({ user: z.object({ user_id: z.string(), device_count: z.number().int() }), dropped: droppedList }),
  ...bodyErrors,
  404: errorResponse,
  422: nothingValid,
  ...authErrors,
};

/** A user is the devices sharing a user_id: updates and events apply to each of them. Write key only. */
export function userRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    // Server to server only: a user spans devices, and the sdk key, which any copy of the app yields, must not
    // change or feed another user's devices.
    const write = requirePermission(ctx, 'write');

    app.put(
      '/v6/users/:user_id',
      {
        onRequest: write,
        schema: {
          tags: ['users'],
          summary: 'Merge custom attributes into every device of a user',
          params: userParams,
          body: userBody,
          response: updateAnswers,
        },
      },
      async (request, reply) => {
        const r = await ctx.services.devices.updateUser(request.principal.appId, request.params.user_id, request.body.user);
        if (r.kind === 'nothing-valid') return reply.status(422).send({ error: 'nothing valid to store', dropped: r.dropped });
        return { user: { user_id: request.params.user_id, device_count: r.deviceCount }, dropped: r.dropped };
      },
    );

    app.delete(
      '/v6/users/:user_id/devices',
      {
        onRequest: write,
        schema: {
          tags: ['users'],
          summary:
            `Erase a user's devices, at most ${USER_ERASE_LIMIT} a call (the rest answer 416: call again); ` +
            '207 when a device listed failed (404), else 200',
          params: userParams,
          response: {
            200: userErasure,
            207: userErasure,
            ...bodyErrors,
            404: errorResponse,
            ...authErrors,
          },
        },
      },
      async (request, reply) => {
        const erasures = await ctx.services.devices.eraseUser(request.principal.appId, request.params.user_id, actorOf(request));
        const answer = userErasureResponse(erasures);
        // Multi-Status when some devices failed, as the public API answers; devices out of range did not fail (416:
        // they wait for the next call), so a call that erased all it could answers 200 and out_of_range says to go on.
        return reply.status(answer.metadata.failure > 0 ? 207 : 200).send(answer);
      },
    );

    app.post(
      '/v6/users/:user_id/events',
      {
        onRequest: write,
        schema: {
          tags: ['users'],
          summary: 'Record events on every device of a user',
          params: userParams,
          headers: idempotencyHeaders,
          body: eventsBody,
          response: { 202: accepted, ...bodyErrors, 404: errorResponse, 422: errorResponse, ...authErrors },
        },
      },
      async (request, reply) =>
        answerOnce(request, reply, acceptedAnswer, (idempotency) =>
          ctx.services.devices.recordUserEvents(
            request.principal.appId,
            request.params.user_id,
            request.body,
            callerOf(request),
            idempotency,
          ),
        ),
    );
  };
}
