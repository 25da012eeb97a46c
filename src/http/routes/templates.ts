import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { templateChangeSchema, templateCreateSchema } from '../../domain/stored-templates.js';
import { actorOf, requirePermission } from '../auth.js';
import { authErrors, bodyErrors, errorResponse, pageQuery, pathId, templateRecord, templateVersionRecord } from '../schemas.js';
import { templateResponse, templateVersionResponse } from '../serialize.js';

const idParams = z.object({ id: pathId('template') });
const versionParams = z.object({ id: pathId('template'), version: z.coerce.number().int().min(1).max(2_147_483_647) });
const answer = z.object({ template: templateRecord });

type App = Parameters<FastifyPluginAsyncZod>[0];

/** Stored templates: the write key manages them, the read key reads them, the sdk key neither. */
export function templateRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    readRoutes(app, ctx);
    writeRoutes(app, ctx);
  };
}

function readRoutes(app: App, ctx: HttpContext) {
  const read = requirePermission(ctx, 'read');
  const templates = () => ctx.services.templates;
  const tags = ['templates'];
  app.get(
    '/v6/templates',
    {
      onRequest: read,
      schema: {
        tags,
        summary: "List the app's templates with their newest content, oldest first",
        querystring: pageQuery,
        response: { 200: z.object({ templates: z.array(templateRecord) }), 400: errorResponse, ...authErrors },
      },
    },
    async (request) => ({ templates: (await templates().list(request.principal.appId, request.query)).map(templateResponse) }),
  );

  app.get(
    '/v6/templates/:id',
    {
      onRequest: read,
      schema: {
        tags,
        summary: 'Read a template with its newest content',
        params: idParams,
        response: { 200: answer, 404: errorResponse, ...authErrors },
      },
    },
    async (request) => ({ template: templateResponse(await templates().get(request.principal.appId, request.params.id)) }),
  );

  app.get(
    '/v6/templates/:id/versions',
    {
      onRequest: read,
      schema: {
        tags,
        summary: "A template's versions, newest first",
        params: idParams,
        response: { 200: z.object({ versions: z.array(templateVersionRecord) }), 404: errorResponse, ...authErrors },
      },
    },
    async (request) => ({
      versions: (await templates().versions(request.principal.appId, request.params.id)).map(templateVersionResponse),
    }),
  );

  app.get(
    '/v6/templates/:id/versions/:version',
    {
      onRequest: read,
      schema: {
        tags,
        summary: 'Read a template with the content of one of its versions',
        params: versionParams,
        response: { 200: answer, 400: errorResponse, 404: errorResponse, ...authErrors },
      },
    },
    async (request) => {
      const { id, version } = request.params;
      return { template: templateResponse(await templates().get(request.principal.appId, id, version)) };
    },
  );
}

function writeRoutes(app: App, ctx: HttpContext) {
  const write = requirePermission(ctx, 'write');
  const templates = () => ctx.services.templates;
  const tags = ['templates'];
  app.post(
    '/v6/templates',
    {
      onRequest: write,
      schema: {
        tags,
        summary: 'Store a template: a payload and its texts per language, its Liquid checked now (version 1)',
        body: templateCreateSchema,
        response: { 201: answer, ...bodyErrors, ...authErrors },
      },
    },
    async (request, reply) =>
      reply
        .status(201)
        .send({ template: templateResponse(await templates().create(request.principal.appId, request.body.template, actorOf(request))) }),
  );

  const change = (summary: string, body: typeof templateCreateSchema | typeof templateChangeSchema) => ({
    onRequest: write,
    schema: { tags, summary, params: idParams, body, response: { 200: answer, ...bodyErrors, 404: errorResponse, ...authErrors } },
  });
  app.put('/v6/templates/:id', change('Replace a template (its content a new version)', templateCreateSchema), async (request) => ({
    template: templateResponse(
      // a replacement without languages has none
      await templates().change(request.principal.appId, request.params.id, { localized: null, ...request.body.template }, actorOf(request)),
    ),
  }));
  app.patch(
    '/v6/templates/:id',
    change('Change a template: name, payload, localized (null removes it); new content is a new version', templateChangeSchema),
    async (request) => ({
      template: templateResponse(
        await templates().change(request.principal.appId, request.params.id, request.body.template, actorOf(request)),
      ),
    }),
  );

  app.delete(
    '/v6/templates/:id',
    {
      onRequest: write,
      schema: {
        tags,
        summary: 'Delete a template and its versions; 409 while a journey (not archived) sends it',
        params: idParams,
        response: { 204: z.null(), ...bodyErrors, 404: errorResponse, 409: errorResponse, ...authErrors },
      },
    },
    async (request, reply) => {
      await templates().delete(request.principal.appId, request.params.id, actorOf(request));
      return reply.status(204).send(null);
    },
  );
}
