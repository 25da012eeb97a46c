import type { FastifyInstance } from 'fastify';

/**
 * The routes a web page calls with the sdk key (registering its push subscription, its events, reading the VAPID
 * key) answer cross-origin requests: the page is on the app's own origin, not pushd's. Any origin is allowed: the
 * key travels in the Authorization header (no cookies), and the sdk key is public anyway, so CORS guards nothing
 * here that the key holder could not do without a browser.
 */
const BROWSER_PATHS = /^\/v6\/(devices(\/[^/?]+(\/events)?)?|web-push\/vapid-public-key)(\?|$)/;

const ALLOW = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, POST, PUT',
  'access-control-allow-headers': 'authorization, content-type, idempotency-key',
  'access-control-max-age': '86400',
};

export function registerBrowserCors(app: FastifyInstance): void {
  app.addHook('onRequest', async (request, reply) => {
    if (!BROWSER_PATHS.test(request.url)) return;
    if (request.method === 'OPTIONS') return reply.code(204).headers(ALLOW).send();
    reply.header('access-control-allow-origin', '*');
  });
}
