import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import type { Actor } from '../../domain/audit.js';
import { journeyRequestSchema } from '../../domain/journey.js';
import { actorOf, requirePermission } from '../auth.js';
import { authErrors, bodyErrors, entrantRecord, errorResponse, journeyRecord, pageQuery, pathId } from '../schemas.js';
import { entrantHistoryResponse, journeyResponse } from '../serialize.js';

const idParams = z.object({ id: pathId('journey') });
const answer = z.object({ journey: journeyRecord });
const entryBody = z.union([z.strictObject({ device_id: z.string().min(1) }), z.strictObject({ user_id: z.string().min(1) })], {
  error: 'body must be {"device_id": ID} or {"user_id": ID}',
});
/** An entrant as a path names it: `device:<device_id>` or `user:<user_id>`. */
const entrantParams = z.object({
  id: pathId('journey'),
  key: z
    .string()
    .regex(/^(device|user):.+$/s, 'must be device:<device_id> or user:<user_id>')
    .transform((key) => (key.startsWith('user:') ? { user_id: key.slice(5) } : { device_id: key.slice(7) })),
});
const entryAnswer = z.object({
  entered: z.boolean(),
  /** entered; filtered (entry_filters); not_re_entered (re_entry); paused (counted skipped) */
  outcome: z.enum(['entered', 'filtered', 'not_re_entered', 'paused']),
});

/** What a change of a journey answers. */
const changeAnswers = { 200: answer, ...bodyErrors, 404: errorResponse, 409: errorResponse, ...authErrors };

type App = Parameters<FastifyPluginAsyncZod>[0];

/** Journeys: pushes that follow what each user does. Writes take the write key, reads the read key. */
export function journeyRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    definitionRoutes(app, ctx);
    lifeCycleRoutes(app, ctx);
    entrantRoutes(app, ctx);
  };
}

/** A journey's definition: created, listed, read, changed. */
function definitionRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  const read = requirePermission(ctx, 'read');
  const journeys = () => ctx.services.journeys;
  app.post(
    '/v6/journeys',
    {
      onRequest: write,
      schema: {
        tags: ['journeys'],
        summary: 'Create a journey: a trigger, who may enter, and its steps',
        body: journeyRequestSchema,
        response: { 201: answer, ...bodyErrors, ...authErrors },
      },
    },
    async (request, reply) =>
      reply
        .status(201)
        .send({ journey: journeyResponse(await journeys().create(request.principal.appId, request.body.journey, actorOf(request))) }),
  );

  app.get(
    '/v6/journeys',
    {
      onRequest: read,
      schema: {
        tags: ['journeys'],
        summary: "List the app's journeys with their counters, newest first",
        querystring: pageQuery,
        response: { 200: z.object({ journeys: z.array(journeyRecord) }), 400: errorResponse, ...authErrors },
      },
    },
    async (request) => ({ journeys: (await journeys().list(request.principal.appId, request.query)).map(journeyResponse) }),
  );

  app.get(
    '/v6/journeys/:id',
    {
      onRequest: read,
      schema: {
        tags: ['journeys'],
        summary: 'Read a journey: definition, state, version and per-step counters',
        params: idParams,
        response: { 200: answer, 404: errorResponse, ...authErrors },
      },
    },
    async (request) => ({ journey: journeyResponse(await journeys().get(request.principal.appId, request.params.id)) }),
  );

  app.put(
    '/v6/journeys/:id',
    {
      onRequest: write,
      schema: {
        tags: ['journeys'],
        summary: 'Change a journey: a new version for new entrants (those inside finish theirs); its state stays',
        params: idParams,
        body: journeyRequestSchema,
        response: changeAnswers,
      },
    },
    async (request) => ({
      journey: journeyResponse(await journeys().update(request.principal.appId, request.params.id, request.body.journey, actorOf(request))),
    }),
  );
}

/** A journey paused, resumed or archived. */
function lifeCycleRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  const journeys = () => ctx.services.journeys;
  const lifeCycle = {
    pause: {
      summary: 'Pause a journey: nothing moves, triggers are counted skipped',
      run: (a: string, id: string, actor: Actor) => journeys().setActive(a, id, false, actor),
    },
    resume: {
      summary: 'Resume a paused journey',
      run: (a: string, id: string, actor: Actor) => journeys().setActive(a, id, true, actor),
    },
    archive: {
      summary: 'Archive a journey: it stops for good and its entrants leave',
      run: (a: string, id: string, actor: Actor) => journeys().archive(a, id, actor),
    },
  };
  for (const [action, { summary, run }] of Object.entries(lifeCycle))
    app.post(
      `/v6/journeys/:id/${action}`,
      { onRequest: write, schema: { tags: ['journeys'], summary, params: idParams, response: changeAnswers } },
      async (request) => ({ journey: journeyResponse(await run(request.principal.appId, request.params.id, actorOf(request))) }),
    );
}

/** A journey's entrants: one's history, and an entry through the API. */
function entrantRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  const read = requirePermission(ctx, 'read');
  const journeys = () => ctx.services.journeys;
  app.get(
    '/v6/journeys/:id/entrants/:key',
    {
      onRequest: read,
      schema: {
        tags: ['journeys'],
        summary: "An entrant's entries into a journey, newest first, each with the steps it took, when and why",
        params: entrantParams,
        response: { 200: z.object({ entrants: z.array(entrantRecord) }), 400: errorResponse, 404: errorResponse, ...authErrors },
      },
    },
    async (request) => ({
      entrants: (await journeys().entrantHistory(request.principal.appId, request.params.id, request.params.key)).map(
        entrantHistoryResponse,
      ),
    }),
  );

  app.post(
    '/v6/journeys/:id/entries',
    {
      onRequest: write,
      schema: {
        tags: ['journeys'],
        summary: 'Enter a device or a user into a journey triggered through the API',
        params: idParams,
        body: entryBody,
        response: { 202: entryAnswer, ...bodyErrors, 404: errorResponse, 409: errorResponse, ...authErrors },
      },
    },
    async (request, reply) => {
      const outcome = await journeys().enterByApi(request.principal.appId, request.params.id, request.body, actorOf(request));
      return reply.status(202).send({ entered: outcome === 'entered', outcome });
    },
  );
}
