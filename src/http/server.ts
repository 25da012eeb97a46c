import type { IncomingMessage, ServerResponse } from 'node:http';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type RawServerDefault } from 'fastify';
import swagger from '@fastify/swagger';
import { jsonSchemaTransform, serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { HttpContext } from './context.js';
import { consoleRoutes } from './console.js';
import { answerRouterError, registerErrorHandling } from './errors.js';
import { registerInputGuard } from './input-guard.js';
import { shedLoad } from './overload.js';
import { rateLimit } from './rate-limit.js';
import { routeModules } from './routes/index.js';

/**
 * The longest path parameter, percent-encoded: a user id may hold 255 characters, each up to 4 bytes of UTF-8 and
 * 3 characters a byte once encoded.
 */
const MAX_PARAM_LENGTH = 255 * 12;

/** Builds the HTTP API on an app context. Listening is the caller's business (main.ts, tests). */
export async function buildServer(
  ctx: HttpContext,
): Promise<FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger, ZodTypeProvider>> {
  // Per-request access logs only at debug: a push API takes many small requests.
  const app = Fastify({
    logController: new LogController({ disableRequestLogging: ctx.config.LOG_LEVEL !== 'debug' && ctx.config.LOG_LEVEL !== 'trace' }),
    loggerInstance: ctx.log.child({ component: 'http' }) as FastifyBaseLogger,
    bodyLimit: ctx.config.BODY_LIMIT_BYTES,
    // Off unless configured: X-Forwarded-For from anyone would let a client choose its own address (GeoIP, rate limits).
    trustProxy: trustProxy(ctx.config.TRUST_PROXY),
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // the router's own refusals, before any route: in the answer shape of every other error
    frameworkErrors: (err, _request, reply) => answerRouterError(err, reply as unknown as FastifyReply, MAX_PARAM_LENGTH),
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandling(app);
  registerInputGuard(app);
  // JSON only: any other content type is a 415, not a body the schema then misreads.
  app.removeContentTypeParser(['text/plain']);
  acceptEmptyJson(app);

  await app.register(swagger, {
    openapi: {
      info: { title: 'pushd', description: 'Self-hosted push notification API', version: '0.1.0' },
      components: { securitySchemes: { basic: { type: 'http', scheme: 'basic' } } },
    },
    transform: jsonSchemaTransform,
  });
  app.get('/documentation/json', { schema: { hide: true } }, async () => app.swagger());

  // before the routes, so that its hook applies to every one of them
  await app.register(shedLoad, { maxInFlight: ctx.config.MAX_REQUESTS_IN_FLIGHT, metrics: ctx.metrics });
  await app.register(rateLimit, { config: ctx.config, log: ctx.log });
  for (const routes of routeModules) await app.register(routes(ctx));
  await app.register(consoleRoutes());
  return app;
}

/**
 * An empty body declared as JSON is no body. Clients that send `Content-Type: application/json` on every request,
 * as the public API asks, send it on the POSTs and DELETEs that take none too (erasing a device, a user's
 * devices). A route that needs a body still refuses it, with the answer a request without one gets (errors.ts).
 */
function acceptEmptyJson(app: FastifyInstance): void {
  // keys that reach prototypes are refused by the input guard, which names them
  const parseJson = app.getDefaultJsonParser('ignore', 'ignore');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body: string, done) => {
    if (body === '') return done(null, undefined);
    parseJson(request, body, done);
  });
}

/** Fastify's trustProxy for TRUST_PROXY: a hop count trusts the nearest N addresses of the chain. */
function trustProxy(setting: number | string[] | undefined): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (setting === undefined) return false;
  if (typeof setting === 'number') return (_address, hop) => hop < setting;
  return setting;
}
