import type { IncomingMessage, ServerResponse } from 'node:http';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type RawServerDefault } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { HttpContext } from './context.js';
import { pollListeningSocketWhenBusy } from './accept-handles.js';
import { consoleRoutes } from './console.js';
import { DomainError, ValidationError } from '../domain/errors.js';
import { answerRouterError, registerErrorHandling } from './errors.js';
import { registerInputGuard } from './input-guard.js';
import { registerApiDocument } from './openapi.js';
import { registerBrowserCors } from './browser-cors.js';
import { admitInTime, admittingServer, capConnections, shedLoad } from './overload.js';
import { rateLimit } from './rate-limit.js';
import { lazyRequestLogger, logAuditedRequests } from './request-logger.js';
import { routeModules } from './routes/index.js';
import { answerClientError, guardTransport } from './transport.js';

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
  const requestLogging = ctx.config.LOG_LEVEL === 'debug' || ctx.config.LOG_LEVEL === 'trace';
  const app = Fastify({
    logController: new LogController({ disableRequestLogging: !requestLogging }),
    loggerInstance: ctx.log.child({ component: 'http' }) as FastifyBaseLogger,
    childLoggerFactory: lazyRequestLogger,
    bodyLimit: ctx.config.BODY_LIMIT_BYTES,
    // Off unless configured: X-Forwarded-For from anyone would let a client choose its own address (GeoIP, rate limits).
    trustProxy: trustProxy(ctx.config.TRUST_PROXY),
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // the router's own refusals, before any route: in the answer shape of every other error
    frameworkErrors: (err, _request, reply) => answerRouterError(err, reply as unknown as FastifyReply, MAX_PARAM_LENGTH),
    // what the HTTP parser refuses, and a request without Host, in the answer shape of every other error (transport.ts)
    clientErrorHandler: answerClientError,
    http: { requireHostHeader: false },
    serverFactory: admittingServer(ctx.admission, ctx.metrics),
  }).withTypeProvider<ZodTypeProvider>();
  guardTransport(app);
  capConnections(app.server, ctx.config.MAX_CONNECTIONS, ctx.metrics);
  pollListeningSocketWhenBusy(app, ctx.config.LISTEN_DESCRIPTORS);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandling(app);
  if (!requestLogging) logAuditedRequests(app);
  registerInputGuard(app);
  registerBrowserCors(app);
  // JSON only: any other content type is a 415, not a body the schema then misreads.
  app.removeContentTypeParser(['text/plain']);
  parseJsonBodies(app);

  await registerApiDocument(app, { referencePage: ctx.config.API_REFERENCE_PAGE });

  // before the routes, so that its hook applies to every one of them
  await app.register(admitInTime, { admission: ctx.admission, metrics: ctx.metrics });
  await app.register(shedLoad, { maxInFlight: ctx.config.MAX_REQUESTS_IN_FLIGHT, metrics: ctx.metrics });
  await app.register(rateLimit, { config: ctx.config, log: ctx.log });
  for (const routes of routeModules) await app.register(routes(ctx));
  await app.register(consoleRoutes());
  return app;
}

/**
 * How JSON bodies are read. JSON is UTF-8 (RFC 8259): a body declared in another charset, or holding bytes that are
 * not UTF-8, is refused rather than stored with its characters replaced. An empty body declared as JSON is no body:
 * clients that send `Content-Type: application/json` on every request, as the public API asks, send it on the POSTs
 * and DELETEs that take none too (erasing a device, a user's devices); a route that needs a body still refuses it,
 * with the answer a request without one gets (errors.ts). Keys that reach prototypes are left to the input guard,
 * which names them.
 */
function parseJsonBodies(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('ignore', 'ignore');
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    const charset = /;\s*charset\s*=\s*["']?([^"';\s]+)/i.exec(request.headers['content-type'] ?? '')?.[1];
    if (charset && !/^utf-?8$/i.test(charset))
      return done(new DomainError('content-type: JSON must be UTF-8 (charset=utf-8, or none)', 415));
    if (body.length === 0) return done(null, undefined);
    let text: string;
    try {
      text = utf8.decode(body);
    } catch {
      return done(new ValidationError('body: is not valid UTF-8'));
    }
    parseJson(request, text, done);
  });
}

/** Fastify's trustProxy for TRUST_PROXY: a hop count trusts the nearest N addresses of the chain. */
function trustProxy(setting: number | string[] | undefined): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (setting === undefined) return false;
  if (typeof setting === 'number') return (_address, hop) => hop < setting;
  return setting;
}
