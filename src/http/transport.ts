import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import net, { type Socket } from 'node:net';
import type { ConnectionError, FastifyBaseLogger, FastifyInstance } from 'fastify';
import { DomainError } from '../domain/errors.js';
import { NOT_FOUND, parserRefusal } from './errors.js';

/**
 * A connection being closed keeps reading (and dropping) what the client still sends: closing with unread bytes
 * resets the connection, and a reset can destroy the answer before the client reads it (a 413 to a client still
 * sending its body; RFC 9112 section 9.6). It stops when the client has sent nothing for LINGER_IDLE_MS, or at the
 * latest LINGER_MAX_MS after the answer was sent.
 */
export const LINGER_IDLE_MS = 2_000;
export const LINGER_MAX_MS = 10_000;
const LINGER_CHECK_MS = 250;
/** How often a closing server looks for keep-alive connections that have become idle. */
const CLOSING_IDLE_CHECK_MS = 50;

interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
}

interface ConnectionState {
  /** Requests read on the connection whose answers are not sent yet, in order. */
  open: Exchange[];
  /** The connection closes once the open answers are sent (what followed them could not be read). */
  closing: boolean;
  /** Our side is closed; what still comes is dropped. */
  lingering: boolean;
}

const connections = new WeakMap<Socket, ConnectionState>();
/** Requests whose body the parser failed on before anything read it. */
const brokenBodies = new WeakMap<IncomingMessage, DomainError>();

/**
 * The edges of HTTP/1.1 below the routes, which Node and Fastify otherwise answer in shapes of their own (or by
 * closing): every refusal is `{"error": "..."}` with its status, a HEAD answer has no body, a connection gets exactly
 * one answer per request it sent, a closed connection is closed without resetting the answer away, and a closing
 * server does not wait for keep-alive connections.
 */
export function guardTransport(app: FastifyInstance): void {
  const server: Server = app.server;
  server.on('connection', (socket: Socket) => {
    connections.set(socket, { open: [], closing: false, lingering: false });
    // Node ends a connection whose last answer says `Connection: close` through this method, destroying the socket
    // as soon as the answer is written, whatever the client is still sending.
    socket.destroySoon = () => closeGently(socket);
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const state = connections.get(req.socket);
    if (!state) return;
    const exchange = { req, res };
    state.open.push(exchange);
    res.once('close', () => {
      state.open.splice(state.open.indexOf(exchange), 1);
      if (state.closing && state.open.length === 0) closeGently(req.socket);
    });
  });
  // an Expect other than 100-continue (Node's own answer is a bare 417)
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    answerThrough(res, 417, `expect: ${req.headers.expect ?? ''} is not supported (only 100-continue)`);
  });
  // CONNECT opens tunnels on proxies; here it is a method no route answers (Node would close without an answer)
  server.on('connect', (_req: IncomingMessage, socket: Socket) => {
    connections.set(socket, { open: [], closing: true, lingering: false });
    writeAnswer(socket, 404, NOT_FOUND, 'body');
    closeGently(socket);
    socket.resume(); // Node's parser has let go of it: what comes is read (and dropped) here
  });
  // Node's close ends the idle keep-alive connections once; one busy then stays open for its keepAliveTimeout (72 s)
  // after its answer, holding the shutdown that long: while closing, each is ended as soon as it is idle.
  app.addHook('preClose', async () => {
    if (!server.listening) return;
    const idle = setInterval(() => server.closeIdleConnections(), CLOSING_IDLE_CHECK_MS).unref();
    server.once('close', () => clearInterval(idle));
  });
  app.addHook('preParsing', async (request) => {
    const broken = brokenBodies.get(request.raw);
    if (broken) throw broken;
  });
  // RFC 9112 section 3.2; Node's own check answers a bare 400 (it is turned off where the server is built)
  app.addHook('onRequest', async (request) => {
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      throw new DomainError('host: header is required in HTTP/1.1', 400);
    }
  });
}

/**
 * Fastify's clientErrorHandler (Node's `clientError`): what the HTTP parser could not read, or a request head that did
 * not come in time. Bytes that follow requests still being answered are not a request of their own: those answers
 * are sent, and then the connection closes. A request whose body breaks while a route reads it gets the refusal
 * through the route's reply. Otherwise the refusal is this connection's answer.
 */
export function answerClientError(this: { log: FastifyBaseLogger }, err: ConnectionError & { reason?: string }, socket: Socket): void {
  // ECONNRESET: the client is gone, and the socket with it
  if (socket.destroyed || err.code === 'ECONNRESET') return;
  const state = connections.get(socket);
  if (!state) return void socket.destroy(); // not a connection of this server's: Node's default
  if (state.closing || state.lingering) return;
  this.log.debug({ code: err.code, reason: err.reason }, 'client error');
  const refusal = parserRefusal(err);
  state.closing = true;
  const last = state.open.at(-1);
  if (last) {
    for (const { res } of state.open) if (!res.headersSent) res.setHeader('connection', 'close');
    if (!last.req.complete) {
      const error = new DomainError(refusal.error, refusal.status);
      // Fastify's body reader, once reading, listens for a failed body as Node reports one: an 'error' on the
      // request; before it reads, the preParsing hook answers with the refusal.
      if (last.req.listenerCount('error') > 0) last.req.emit('error', error);
      else brokenBodies.set(last.req, error);
    }
    return;
  }
  if (socket.writable) writeAnswer(socket, refusal.status, refusal.error, answerBodyFor(err));
  closeGently(socket);
}

/** What an answer written on the connection carries: its body, only the body's length (HEAD), or neither. */
type AnswerBody = 'body' | 'length' | 'none';

/**
 * What the refusal of a request the parser failed on may carry. A HEAD answer has no body; the method is read from
 * the bytes the parser failed in (Node gives no more). When they do not hold the request line (a head that came over
 * several reads, or not in time) the request may be a HEAD: the answer has no body, which every client reads, where a
 * body after an answer to HEAD breaks the client's parsing.
 */
function answerBodyFor(err: ConnectionError): AnswerBody {
  if (err.code === 'HPE_INVALID_METHOD') return 'body'; // the failing bytes are its method: not HEAD
  const raw = err.rawPacket as unknown;
  if (!Buffer.isBuffer(raw)) return 'none';
  const method = /(?:^|\n)([A-Z]+) (?:[/*]|https?:\/\/)/.exec(raw.toString('latin1', 0, Math.min(raw.length, 64 * 1024)))?.[1];
  return method === undefined ? 'none' : method === 'HEAD' ? 'length' : 'body';
}

/** An answer through the response Node made for the request, outside Fastify. */
function answerThrough(res: ServerResponse, status: number, error: string): void {
  const body = JSON.stringify({ error });
  // Node leaves the body out of an answer to HEAD
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** An answer written on the connection itself, where no request was read to answer through. */
function writeAnswer(socket: Socket, status: number, error: string, carries: AnswerBody): void {
  const body = JSON.stringify({ error });
  socket.write(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
      'content-type: application/json; charset=utf-8\r\n' +
      // an answer to HEAD gives the length the body would have (RFC 9110 section 8.6)
      `content-length: ${carries === 'none' ? 0 : Buffer.byteLength(body)}\r\n` +
      `date: ${new Date().toUTCString()}\r\n` +
      'connection: close\r\n\r\n' +
      (carries === 'body' ? body : ''),
  );
}

/**
 * Closes our side (FIN once the answer is written), then keeps reading what the client still sends, and drops it,
 * until the client closes its side too, nothing has come for LINGER_IDLE_MS, or LINGER_MAX_MS have passed since the
 * answer was written: then the connection is destroyed. Reading goes on as Node reads (its parser drops the rest of
 * a body no route read, and refuses anything after it, which answerClientError leaves unanswered).
 */
function closeGently(socket: Socket): void {
  const state = connections.get(socket);
  if (!state || state.lingering || socket.destroyed) return;
  state.lingering = true;
  state.closing = true;
  // Node's own: destroy once what is written is sent
  const destroyOnceSent = () => net.Socket.prototype.destroySoon.call(socket);
  if (socket.readableEnded) return destroyOnceSent(); // the client has closed its side already
  socket.once('end', destroyOnceSent);
  const linger = () => {
    const began = Date.now();
    let quietSince = began;
    let read = socket.bytesRead;
    const check = setInterval(() => {
      const now = Date.now();
      if (socket.bytesRead !== read) [read, quietSince] = [socket.bytesRead, now];
      if (now - quietSince >= LINGER_IDLE_MS || now - began >= LINGER_MAX_MS) socket.destroy();
    }, LINGER_CHECK_MS);
    check.unref();
    socket.once('close', () => clearInterval(check));
  };
  if (socket.writableFinished) return linger();
  socket.once('finish', linger);
  socket.end();
}
