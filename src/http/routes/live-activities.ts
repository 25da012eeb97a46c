import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import type { Notification } from '../../db/schema.js';
import {
  activityId,
  activityTokenBody,
  activityType,
  channelBody,
  identityProofs,
  liveActivityRequestSchema,
  startTokenBody,
} from '../../domain/live-activity.js';
import { NotFoundError, ValidationError } from '../../domain/errors.js';
import { APNS_MAX_PAYLOAD_BYTES } from '../../domain/push-mapping.js';
import { actorOf, callerOf, requirePermission } from '../auth.js';
import { answerOnce } from '../idempotency.js';
import {
  authErrors,
  bodyErrors,
  errorResponse,
  idempotencyHeaders,
  liveActivityChannelRecord,
  liveActivityRecord,
  pathId,
} from '../schemas.js';
import { liveActivityChannelView, liveActivityResponse } from '../serialize.js';

const idParams = z.object({ id: pathId('live activity') });
const channelParams = z.object({ id: z.string() });
const activityParams = z.object({ id: pathId('device'), activity_id: z.string() });
const typeParams = z.object({ id: pathId('device'), activity_type: z.string() });
// a delete has no body: the proofs of the device's user come in the query
const proofsQuery = z.object(identityProofs);
const json = z.record(z.string(), z.unknown());
const createdAnswer = (n: Notification) => ({ status: 201, body: { live_activity: liveActivityResponse(n) } });
const deviceErrors = { ...bodyErrors, 404: errorResponse, 422: errorResponse, 451: errorResponse, ...authErrors };

/** A path segment that must parse: a bad one is a 400 naming it (an unknown device stays a 404). */
function pathValue<T>(schema: z.ZodType<T>, value: string, field: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new ValidationError(`${field}: ${parsed.error.issues[0]!.message}`);
  return parsed.data;
}

type App = Parameters<FastifyPluginAsyncZod>[0];

/**
 * iOS Live Activities. The registry takes the `device` permission, as the device routes do: an sdk caller reaches
 * a device only by its id, and an activity only by ActivityKit's id, which nobody else can guess. Sending takes
 * `write`, reading `read`.
 */
export function liveActivityRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    activityTokenRoutes(app, ctx);
    startTokenRoutes(app, ctx);
    sendRoutes(app, ctx);
    channelRoutes(app, ctx);
    stateRoutes(app, ctx);
  };
}

/** An activity's update token on a device: the `device` permission. */
function activityTokenRoutes(app: App, ctx: HttpContext) {
  const device = requirePermission(ctx, 'device');
  const service = ctx.services.liveActivities;
  app.put(
    '/v6/devices/:id/live-activities/:activity_id',
    {
      onRequest: device,
      schema: {
        tags: ['live activities'],
        summary: "Register or replace a Live Activity's update token on an iOS device",
        params: activityParams,
        body: activityTokenBody,
        response: { 204: z.null(), ...deviceErrors },
      },
    },
    async (request, reply) => {
      const id = pathValue(activityId, request.params.activity_id, 'activity_id');
      await service.putToken(request.principal.appId, request.params.id, id, request.body, callerOf(request));
      return reply.status(204).send(null);
    },
  );

  app.delete(
    '/v6/devices/:id/live-activities/:activity_id',
    {
      onRequest: device,
      schema: {
        tags: ['live activities'],
        summary: "Forget a Live Activity's update token",
        params: activityParams,
        querystring: proofsQuery,
        response: { 204: z.null(), ...deviceErrors },
      },
    },
    async (request, reply) => {
      const id = activityId.safeParse(request.params.activity_id);
      if (!id.success) throw new NotFoundError('live activity');
      await service.deleteToken(request.principal.appId, request.params.id, id.data, {
        caller: callerOf(request),
        proofs: request.query,
      });
      return reply.status(204).send(null);
    },
  );
}

/** A device's push-to-start tokens, by activity type: the `device` permission. */
function startTokenRoutes(app: App, ctx: HttpContext) {
  const device = requirePermission(ctx, 'device');
  const service = ctx.services.liveActivities;
  app.put(
    '/v6/devices/:id/live-activity-start-tokens/:activity_type',
    {
      onRequest: device,
      schema: {
        tags: ['live activities'],
        summary: 'Register or replace the push-to-start token of an activity type (iOS 17.2+)',
        params: typeParams,
        body: startTokenBody,
        response: { 204: z.null(), ...deviceErrors },
      },
    },
    async (request, reply) => {
      const type = pathValue(activityType, request.params.activity_type, 'activity_type');
      await service.putStartToken(request.principal.appId, request.params.id, type, request.body, callerOf(request));
      return reply.status(204).send(null);
    },
  );

  app.delete(
    '/v6/devices/:id/live-activity-start-tokens/:activity_type',
    {
      onRequest: device,
      schema: {
        tags: ['live activities'],
        summary: 'Forget the push-to-start token of an activity type',
        params: typeParams,
        querystring: proofsQuery,
        response: { 204: z.null(), ...deviceErrors },
      },
    },
    async (request, reply) => {
      await service.deleteStartToken(request.principal.appId, request.params.id, request.params.activity_type, {
        caller: callerOf(request),
        proofs: request.query,
      });
      return reply.status(204).send(null);
    },
  );
}

/** Sending (`write`) and its preview (`read`). */
function sendRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  const read = requirePermission(ctx, 'read');
  const service = ctx.services.liveActivities;
  app.post(
    '/v6/live-activities',
    {
      onRequest: write,
      schema: {
        tags: ['live activities'],
        summary: 'Start, update or end a Live Activity (by tokens, or on a broadcast channel)',
        headers: idempotencyHeaders,
        body: liveActivityRequestSchema,
        response: {
          201: z.object({ live_activity: liveActivityRecord }),
          ...bodyErrors,
          404: errorResponse,
          422: errorResponse,
          502: errorResponse,
          ...authErrors,
        },
      },
    },
    async (request, reply) =>
      answerOnce(request, reply, createdAnswer, (idempotency) =>
        service.create(request.principal.appId, request.body.live_activity, idempotency),
      ),
  );

  app.post(
    '/v6/live-activities/preview',
    {
      onRequest: read,
      schema: {
        tags: ['live activities'],
        summary: 'Preview the APNs request of a Live Activity push, checked as a create is, neither stored nor sent',
        body: liveActivityRequestSchema,
        response: {
          200: z.object({
            apns: z.object({ headers: json, body: json, bytes: z.number().int(), max_bytes: z.number().int() }),
          }),
          ...bodyErrors,
          ...authErrors,
        },
      },
    },
    async (request) => {
      const apns = service.preview(request.body.live_activity);
      return { apns: { headers: { ...apns.headers }, body: apns.body, bytes: apns.bytes, max_bytes: APNS_MAX_PAYLOAD_BYTES } };
    },
  );
}

/** The app's broadcast channels at APNs. */
function channelRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  const read = requirePermission(ctx, 'read');
  const service = ctx.services.liveActivities;
  app.get(
    '/v6/live-activities/channels',
    {
      onRequest: read,
      schema: {
        tags: ['live activities'],
        summary: "The app's broadcast channels",
        response: { 200: z.object({ channels: z.array(liveActivityChannelRecord) }), ...authErrors },
      },
    },
    async (request) => ({ channels: (await service.listChannels(request.principal.appId)).map(liveActivityChannelView) }),
  );

  app.post(
    '/v6/live-activities/channels',
    {
      onRequest: write,
      schema: {
        tags: ['live activities'],
        summary: 'Create a broadcast channel at APNs (iOS 18)',
        body: channelBody,
        response: {
          201: z.object({ channel: liveActivityChannelRecord }),
          ...bodyErrors,
          404: errorResponse,
          422: errorResponse,
          502: errorResponse,
          ...authErrors,
        },
      },
    },
    async (request, reply) =>
      reply
        .status(201)
        .send({ channel: liveActivityChannelView(await service.createChannel(request.principal.appId, request.body, actorOf(request))) }),
  );

  app.delete(
    '/v6/live-activities/channels/:id',
    {
      onRequest: write,
      schema: {
        tags: ['live activities'],
        summary: 'Delete a broadcast channel at APNs and forget it',
        params: channelParams,
        response: { 204: z.null(), ...bodyErrors, 404: errorResponse, 422: errorResponse, 502: errorResponse, ...authErrors },
      },
    },
    async (request, reply) => {
      await service.deleteChannel(request.principal.appId, request.params.id, actorOf(request));
      return reply.status(204).send(null);
    },
  );
}

/** A Live Activity push's state, and its cancel. */
function stateRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  const read = requirePermission(ctx, 'read');
  const service = ctx.services.liveActivities;
  app.get(
    '/v6/live-activities/:id',
    {
      onRequest: read,
      schema: {
        tags: ['live activities'],
        summary: 'Read a Live Activity push with its delivery state',
        params: idParams,
        response: { 200: z.object({ live_activity: liveActivityRecord }), 404: errorResponse, ...authErrors },
      },
    },
    async (request) => ({ live_activity: liveActivityResponse(await service.get(request.principal.appId, request.params.id)) }),
  );

  app.delete(
    '/v6/live-activities/:id',
    {
      onRequest: write,
      schema: {
        tags: ['live activities'],
        summary: 'Cancel a Live Activity push that is scheduled or sending',
        params: idParams,
        response: {
          200: z.object({ live_activity: liveActivityRecord }),
          ...bodyErrors,
          404: errorResponse,
          409: errorResponse,
          ...authErrors,
        },
      },
    },
    async (request) => ({ live_activity: liveActivityResponse(await service.cancel(request.principal.appId, request.params.id)) }),
  );
}
