import { createServer, type IncomingMessage, type Server, type ServerOptions } from 'node:http';
import type { FastifyReply, FastifyRequest, FastifyServerFactory } from 'fastify';
import fp from 'fastify-plugin';
import type { Socket } from 'node:net';
import { OverloadedError, type Admission } from '../platform/admission.js';
import type { Metrics } from '../platform/metrics.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** the answer waits for a gateway or a receiver elsewhere: its time tells nothing of this server's queues */
    answersAfterRemote?: true;
  }
}

/** The public API's routes (/v3, /v5, /v6): what load shedding applies to; health, readiness and metrics answer always. */
const API_ROUTE = /^\/v\d+\//;

/**
 * Load shedding: past `maxInFlight` API requests in progress in this process, another is answered 503 with
 * Retry-After, before any work of its own. Under more traffic than the machine absorbs, requests would otherwise wait
 * in line longer and longer, until clients time out and send again what may already have been accepted; a clear
 * refusal keeps the answered ones fast and tells the rest when to come back.
 *
 * A request counts from when its key is checked, its rate limit taken and its body read (preValidation) until its
 * answer is sent: a client that opens requests and never sends their bodies holds no place (the sdk key, which
 * attackers have, could otherwise fill them all). 0 turns it off.
 */
export const shedLoad = fp<{ maxInFlight: number; metrics: Metrics }>(
  async (app, { maxInFlight, metrics }) => {
    if (maxInFlight === 0) return;
    let inFlight = 0;
    app.addHook('preValidation', async (request, reply) => {
      if (!API_ROUTE.test(request.url)) return;
      if (inFlight >= maxInFlight)
        return refuse(reply, new OverloadedError(`${maxInFlight} requests are in progress on this server`), metrics);
      metrics.requestsInFlight.set(++inFlight);
      whenDone(request, reply, () => metrics.requestsInFlight.set(--inFlight));
    });
  },
  { name: 'shed-load' },
);

/**
 * Admission control bounded in time (src/platform/admission.ts): while work in this process has waited past its
 * bound, or the CPU is saturated past capacity and a request falls outside the share taken in, a new API request is
 * answered 503 with Retry-After at once, on arrival, before its key is checked or its body read: a refusal costs next
 * to nothing, so the requests taken in keep their pace and each of the others knows at once when to come back. What
 * waits past the bound inside (a group's turn) is refused there. Every answer's time is told to the admission, which
 * refuses new requests while even the fastest answers are slow (a standing queue).
 */
export const admitInTime = fp<{ admission: Admission; metrics: Metrics }>(
  async (app, { admission, metrics }) => {
    if (!admission.on) return;
    app.addHook('onRequest', async (request, reply) => {
      if (!API_ROUTE.test(request.url)) return;
      // decided before Fastify when the server is `admittingServer`'s (a browser's refusal comes here for its CORS)
      const refused = verdicts.has(request.raw) ? verdicts.get(request.raw) : admission.verdict();
      if (refused) return refuse(reply, refused, metrics);
      // one that waits on a gateway or a receiver elsewhere holds no CPU meanwhile
      whenDone(request, reply, admission.hold(!request.routeOptions.config.answersAfterRemote));
    });
    // what the requests taken in took, queueing included: a wait no queue of ours reports shows there
    app.addHook('onResponse', async (request, reply) => {
      if (reply.statusCode === 503 || request.routeOptions.config.answersAfterRemote || !API_ROUTE.test(request.url)) return;
      admission.answered(reply.elapsedTime);
    });
  },
  { name: 'admit-in-time' },
);

interface ServerTimeouts {
  keepAliveTimeout: number;
  requestTimeout: number;
  connectionTimeout: number;
  maxRequestsPerSocket: number;
}

/** The admission's verdict on each API request the server read, for the hook (keyed by the request, gone with it). */
const verdicts = new WeakMap<IncomingMessage, OverloadedError | null>();

/**
 * The HTTP server (Fastify's `serverFactory`, with the settings Fastify gives its own) with admission control in
 * front of Fastify: past capacity, refusing must cost next to nothing, as the CPU is what is short. A refused API
 * request is answered from here, from its head alone, without Fastify's request, hooks, schemas and logging; one
 * from a browser (an Origin) goes on to the hook, which answers it with its CORS headers.
 */
export function admittingServer(admission: Admission, metrics: Metrics): FastifyServerFactory {
  return (handler, fastifyOptions) => {
    // what Fastify has filled in with its defaults by now
    const options = fastifyOptions as unknown as ServerTimeouts & { http?: ServerOptions };
    const server = createServer(options.http ?? {}, (req, res) => {
      if (admission.on && API_ROUTE.test(req.url ?? '')) {
        const refused = admission.verdict();
        if (refused && !req.headers.origin) {
          metrics.requestsShed.inc();
          const body = JSON.stringify({ error: refused.message });
          res.writeHead(refused.status, {
            'content-type': 'application/json; charset=utf-8',
            'content-length': Buffer.byteLength(body),
            'retry-after': String(refused.retryAfterSeconds),
          });
          res.end(body);
          return;
        }
        verdicts.set(req, refused);
      }
      handler(req, res);
    });
    server.keepAliveTimeout = options.keepAliveTimeout;
    server.requestTimeout = options.requestTimeout;
    server.setTimeout(options.connectionTimeout);
    if (options.maxRequestsPerSocket > 0) server.maxRequestsPerSocket = options.maxRequestsPerSocket;
    return server;
  };
}

/** Answers a request refused for capacity: 503 with Retry-After, counted as shed. */
function refuse(reply: FastifyReply, refused: OverloadedError, metrics: Metrics): FastifyReply {
  metrics.requestsShed.inc();
  return reply.code(refused.status).header('retry-after', String(refused.retryAfterSeconds)).send({ error: refused.message });
}

/**
 * Calls `done` once, when the request is answered or its connection is gone: a pipelined request still queued when
 * its socket closes gets no 'close' of its own answer.
 */
function whenDone(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
  const socket = request.raw.socket;
  const once = () => {
    reply.raw.off('close', once);
    socket.off('close', once);
    done();
  };
  reply.raw.once('close', once);
  socket.once('close', once);
}

/**
 * How many new connections wait in the kernel for the event loop to accept them (Linux caps it at somaxconn). Node's
 * 511 overflows when a busy loop meets a burst of clients connecting at once, and a dropped connection is retried by
 * its client 1, 3, 7 s later: seconds of delay that no queue of the server sees, so admission control cannot refuse it.
 */
export const LISTEN_BACKLOG = 4096;

/**
 * Past `max` open client connections a new one is closed at once, unanswered: clients that open a connection per
 * request while answers are slow would otherwise take every file descriptor, and the next connection to the database
 * fails (EMFILE). Counted here rather than by Node's `maxConnections`, which sees only the connections its own
 * descriptor accepted (ListeningDescriptors adds others). 0 turns it off.
 */
export function capConnections(server: Server, max: number, metrics: Metrics): void {
  if (max === 0) return;
  let open = 0;
  server.on('connection', (socket: Socket) => {
    if (open >= max) {
      socket.destroy();
      metrics.connectionsDropped.inc();
      return;
    }
    open++;
    socket.once('close', () => open--);
  });
}
