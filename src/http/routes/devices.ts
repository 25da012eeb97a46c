import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import type { WriteResult } from '../../services/devices.js';
import { actorOf, callerOf, requirePermission } from '../auth.js';
import { acceptedAnswer, answerOnce } from '../idempotency.js';
import {
  accepted,
  authErrors,
  bodyErrors,
  createdDevice,
  deviceBody,
  deviceRecord,
  droppedList,
  errorResponse,
  eventsBody,
  idempotencyHeaders,
  nothingValid,
  pathId,
  writtenDevice,
} from '../schemas.js';
import { deviceLiveActivitiesView } from '../serialize.js';
import { deviceView, writtenView } from '../serialize-devices.js';

const idParams = z.object({ id: pathId('device') });

function registeredAnswer(r: WriteResult) {
  if (r.kind === 'nothing-valid') return { status: 422, body: { error: 'nothing valid to store', dropped: r.dropped } };
  // A token the app already has: the caller proved only that it knows the token, not that the record is its own.
  if (!r.created) return { status: 200, body: { device: writtenView(r.details, r.written), dropped: r.dropped } };
  const credential = r.credential === undefined ? {} : { credential: r.credential };
  return { status: 201, body: { device: { ...deviceView(r.details), ...credential }, dropped: r.dropped } };
}

type App = Parameters<FastifyPluginAsyncZod>[0];

/**
 * The device API. Registering, updating and events take the `device` permission (the SDK key or a write key);
 * erasing takes `write`; reading takes `read` or `device`, since the SDKs read their own device back. An sdk
 * caller reaches a device only by its id (a random UUID, 122 bits), which only registering it answers: the id
 * is the device's capability, and no route an sdk key may call lists devices.
 */
export function deviceRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    registrationRoutes(app, ctx);
    recordRoutes(app, ctx);
    eventRoutes(app, ctx);
  };
}

/** Registering a device and changing it: the `device` permission. */
function registrationRoutes(app: App, ctx: HttpContext) {
  const device = requirePermission(ctx, 'device');
  app.post(
    '/v6/devices',
    {
      onRequest: device,
      schema: {
        tags: ['devices'],
        summary: 'Register a device (upsert on its push token)',
        headers: idempotencyHeaders,
        body: deviceBody,
        response: {
          201: z.object({ device: createdDevice, dropped: droppedList }),
          200: z.object({ device: writtenDevice, dropped: droppedList }),
          ...bodyErrors,
          // nothing valid in the body, or an Idempotency-Key used with another request
          422: z.union([nothingValid, errorResponse]),
          ...authErrors,
        },
      },
    },
    async (request, reply) =>
      answerOnce(request, reply, registeredAnswer, (idempotency) =>
        ctx.services.devices.register(request.principal.appId, request.body.device, callerOf(request), idempotency),
      ),
  );

  app.put(
    '/v6/devices/:id',
    {
      onRequest: device,
      schema: {
        tags: ['devices'],
        summary: 'Update a device (merge)',
        params: idParams,
        body: deviceBody,
        response: {
          200: z.object({ device: deviceRecord, dropped: droppedList }),
          ...bodyErrors,
          404: errorResponse,
          422: nothingValid,
          451: errorResponse,
          ...authErrors,
        },
      },
    },
    async (request, reply) => {
      const r = await ctx.services.devices.update(request.principal.appId, request.params.id, request.body.device, callerOf(request));
      if (r.kind === 'nothing-valid') return reply.status(422).send({ error: 'nothing valid to store', dropped: r.dropped });
      return { device: deviceView(r.details), dropped: r.dropped };
    },
  );
}

/** Reading a device back and erasing it. */
function recordRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  const readOrDevice = requirePermission(ctx, ['device', 'read']);
  app.get(
    '/v6/devices/:id',
    {
      onRequest: readOrDevice,
      schema: {
        tags: ['devices'],
        summary: 'Read a device with its attributes and events',
        params: idParams,
        response: { 200: z.object({ device: deviceRecord }), 404: errorResponse, ...authErrors },
      },
    },
    async (request) => {
      const details = await ctx.services.devices.get(request.principal.appId, request.params.id);
      // a live iPhone's record shows the Live Activity tokens it registered (live-activities.ts); erased, it shows none
      if (details.device.platform !== 'ios' || details.device.erased_at) return { device: deviceView(details) };
      const activities = await ctx.services.liveActivities.ofDevice(details.device.id);
      return { device: { ...deviceView(details), ...deviceLiveActivitiesView(activities) } };
    },
  );

  app.post(
    '/v6/devices/:id/erase',
    {
      onRequest: write,
      schema: {
        tags: ['devices'],
        summary: 'Erase a device (its data is emptied)',
        params: idParams,
        response: { 200: z.object({ device: deviceRecord }), ...bodyErrors, 404: errorResponse, ...authErrors },
      },
    },
    async (request) => ({
      device: deviceView(await ctx.services.devices.erase(request.principal.appId, request.params.id, actorOf(request))),
    }),
  );
}

/** The events a device reports. */
function eventRoutes(app: App, ctx: HttpContext) {
  const device = requirePermission(ctx, 'device');
  app.post(
    '/v6/devices/:id/events',
    {
      onRequest: device,
      schema: {
        tags: ['devices'],
        summary: 'Record events of a device',
        params: idParams,
        headers: idempotencyHeaders,
        body: eventsBody,
        response: { 202: accepted, ...bodyErrors, 404: errorResponse, 422: errorResponse, 451: errorResponse, ...authErrors },
      },
    },
    async (request, reply) =>
      answerOnce(request, reply, acceptedAnswer, (idempotency) =>
        ctx.services.devices.recordEvents(request.principal.appId, request.params.id, request.body, callerOf(request), idempotency),
      ),
  );
}
