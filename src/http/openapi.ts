import type { FastifyInstance, FastifySchema, onSendHookHandler, RouteOptions } from 'fastify';
import type { ZodType } from 'zod';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import type { Permission } from '../domain/keys.js';
import { API_EXAMPLES, KEY_ERROR_EXAMPLES } from './api-examples.js';

/** The keys each permission takes (src/domain/keys.ts GRANTS), as the names of their OpenAPI security schemes. */
const SECURITY: Record<Permission, string[]> = { read: ['readKey', 'writeKey'], write: ['writeKey'], device: ['sdkKey', 'writeKey'] };

const keyScheme = (who: string) => ({
  type: 'http' as const,
  scheme: 'basic',
  description: `${who} HTTP Basic: the key is the password; the username is empty or the app's bundle id.`,
});

/** Every route's answer shapes, errors included, and the key roles it takes, as the server itself declares them. */
export async function registerApiDocument(app: FastifyInstance, opts: { referencePage: boolean }): Promise<void> {
  // before swagger collects the routes: a route's keys come from its requirePermission hook, not a second declaration
  app.addHook('onRoute', (route) => {
    if (route.url === '/docs' || route.url === '/docs/') route.onSend = [route.onSend ?? [], preloadDocument].flat();
    if (route.schema?.hide) return;
    const keys = new Set(permissionsOf(route).flatMap((p) => SECURITY[p]));
    route.schema = withExamples({ ...route.schema, security: [...keys].map((key) => ({ [key]: [] })) }, route);
  });
  await app.register(swagger, {
    openapi: {
      info: {
        title: 'pushd',
        description:
          'Self-hosted push notification API. Guides with examples: docs/api/ in the repository. ' +
          'Every error answers `{"error": "<field>: <message>"}`.',
        version: '0.1.0',
      },
      components: {
        securitySchemes: {
          readKey: keyScheme('A read key (dashboards; a write key may do the same).'),
          writeKey: keyScheme('A write key (your backend).'),
          sdkKey: keyScheme('The sdk key (inside the app: only what a phone does; a write key may do the same).'),
        },
      },
    },
    transform: jsonSchemaTransform,
  });
  app.get('/documentation/json', { schema: { hide: true } }, async () => app.swagger());
  // the document is built once and kept: built when the server starts listening, not while /docs waits for it
  app.addHook('onListen', (done) => {
    setImmediate(() => app.swagger());
    done();
  });
  if (!opts.referencePage) return;
  // swagger-ui-dist's files come from the package: the page loads nothing from elsewhere, so it works offline
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    uiConfig: { validatorUrl: null, deepLinking: true, docExpansion: 'list' },
    staticCSP:
      "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; " +
      "connect-src 'self'; font-src 'self' data:; object-src 'none'; frame-ancestors 'self'",
    transformSpecificationClone: true,
  });
}

/** The reference page fetches the document only once its scripts have run: a preload starts the download with them. */
const preloadDocument: onSendHookHandler = async (_request, reply, payload) => {
  reply.header('link', '</docs/json>; rel=preload; as=fetch; crossorigin');
  return payload;
};

/** The route's schemas with the examples of src/http/api-examples.ts attached (zod metadata, which the document carries). */
function withExamples(schema: FastifySchema, route: RouteOptions): FastifySchema {
  const own = [route.method]
    .flat()
    .map((method) => API_EXAMPLES[`${method} ${route.url}`])
    .find(Boolean);
  const answers: Record<number, unknown[]> = { ...(schema.security!.length ? KEY_ERROR_EXAMPLES : {}), ...own?.answers };
  const response = { ...(schema.response as Record<string, unknown> | undefined) };
  for (const [status, examples] of Object.entries(answers)) if (response[status]) response[status] = example(response[status], examples);
  return { ...schema, response, ...(own?.body && schema.body ? { body: example(schema.body, own.body) } : {}) };
}

/**
 * As the media type's named examples (`x-examples`, which @fastify/swagger moves there): zod drops a plain `examples`
 * from a schema that transforms its input, which would leave such bodies with none.
 */
const example = (schema: unknown, examples: unknown[]) =>
  (schema as ZodType).meta({ 'x-examples': Object.fromEntries(examples.map((value, i) => [`example${i + 1}`, { value }])) });

function permissionsOf(route: RouteOptions): readonly Permission[] {
  const hooks = [route.onRequest ?? []].flat() as (object & { permissions?: readonly Permission[] })[];
  return hooks.find((hook) => hook.permissions !== undefined)?.permissions ?? [];
}
