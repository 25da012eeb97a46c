import fp from 'fastify-plugin';

/** The public API's routes (/v3, /v5, /v6): what load shedding applies to; health, readiness and metrics answer always. */
const API_ROUTE = /^\/v\d+\//;

/**
 * Load shedding: past `maxInFlight` API requests in progress in this process, another is answered 503 at once,
 * before authentication or its body is read, with Retry-After. Under more traffic than the machine absorbs the
 * requests would otherwise wait in line, longer and longer, until clients time out and send again what may already
 * have been accepted; a clear refusal keeps the answered ones fast and tells the rest when to come back.
 * 0 turns it off.
 */
export const shedLoad = fp<{ maxInFlight: number }>(
  async (app, { maxInFlight }) => {
    if (maxInFlight === 0) return;
    let inFlight = 0;
    app.addHook('onRequest', async (request, reply) => {
      if (!API_ROUTE.test(request.url)) return;
      if (inFlight >= maxInFlight) {
        reply
          .code(503)
          .header('retry-after', '1')
          .send({ error: `overloaded: ${maxInFlight} requests are in progress on this server; retry after 1 s` });
        return reply;
      }
      inFlight += 1;
      // 'close' comes once the answer is sent or the connection is gone, whichever comes first
      reply.raw.once('close', () => (inFlight -= 1));
    });
  },
  { name: 'shed-load' },
);
