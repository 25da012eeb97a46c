/**
 * Common plumbing of the mocks: a TLS HTTP/2 server on an ephemeral loopback port with the fixture
 * certificate, request accounting (count, in-flight, peak concurrency, sessions), body reading,
 * and the transport-level faults (GOAWAY, RST_STREAM, delay).
 */
import http2, {
  type Http2SecureServer,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type Http2Session,
  type ServerHttp2Session,
} from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { FaultPlan, type Fault } from './faults.js';
import { serverTls } from './tls.js';

export interface MockServerOptions {
  /** Interface to bind; default 127.0.0.1. */
  host?: string;
  /** Port; default 0 (ephemeral). */
  port?: number;
  /** SETTINGS_MAX_CONCURRENT_STREAMS the server announces; default 1000 (what APNs allows). */
  maxConcurrentStreams?: number;
  /** Accept HTTP/1.1 too (the OAuth endpoint is called with fetch, which speaks HTTP/1.1). */
  allowHTTP1?: boolean;
  /** Keep every push and answer in memory (default true); a benchmark of a million pushes only counts. */
  record?: boolean;
}

const { NGHTTP2_NO_ERROR, NGHTTP2_INTERNAL_ERROR, NGHTTP2_REFUSED_STREAM } = http2.constants;
const MAX_BODY = 1024 * 1024;

export abstract class MockHttp2Server {
  readonly faults = new FaultPlan();
  /** Requests received, all paths and answers included. */
  requestCount = 0;
  /** Pushes accepted (200) since start/reset, counted even when not recording. */
  accepted = 0;
  /**
   * When the first request since start/reset arrived (performance.now()), 0 before any: a benchmark tells the
   * client's time to the gateway from the gateway's own (an injected delay, the mock's turn on a busy CPU).
   */
  firstRequestAt = 0;
  /** Called for every accepted push (a benchmark times the first and the last). */
  onAccept: ((token: string) => void) | undefined;
  protected recording = true;
  /** Most requests in flight at once since start/reset: shows whether a client bounds its streams. */
  peakConcurrency = 0;
  /** TLS/HTTP2 sessions opened since start/reset: shows reconnects after GOAWAY. */
  sessionCount = 0;
  private inFlight = 0;
  private readonly sessions = new Set<ServerHttp2Session>();
  /** HTTP/2 sessions open now: how many connections a client keeps to this gateway. */
  get openSessions(): number {
    return this.sessions.size;
  }
  /** The highest stream id each session has started to process. */
  private readonly highestStreamId = new WeakMap<Http2Session, number>();
  /** The last-stream-id of the GOAWAY each session sent: streams above it were refused, never processed. */
  private readonly goawayLastStreamId = new WeakMap<Http2Session, number>();
  /** Raw TLS sockets, HTTP/1.1 keep-alive ones included (fetch keeps them open), so close() is immediate. */
  private readonly sockets = new Set<TLSSocket>();
  private server: Http2SecureServer | undefined;
  private origin_ = '';

  /** e.g. https://127.0.0.1:43123 */
  get origin(): string {
    return this.origin_;
  }

  get port(): number {
    return Number(new URL(this.origin_).port);
  }

  protected async listen(options: MockServerOptions): Promise<void> {
    const host = options.host ?? '127.0.0.1';
    this.recording = options.record ?? true;
    const server = http2.createSecureServer({
      ...serverTls(),
      allowHTTP1: options.allowHTTP1 ?? false,
      settings: { maxConcurrentStreams: options.maxConcurrentStreams ?? 1000 },
    });
    server.on('secureConnection', (socket: TLSSocket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    server.on('session', (session: ServerHttp2Session) => {
      this.sessionCount += 1;
      this.sessions.add(session);
      session.on('close', () => this.sessions.delete(session));
      session.on('error', () => undefined);
    });
    server.on('request', (req: Http2ServerRequest, res: Http2ServerResponse) => {
      this.requestCount += 1;
      if (this.firstRequestAt === 0) this.firstRequestAt = performance.now();
      this.inFlight += 1;
      this.peakConcurrency = Math.max(this.peakConcurrency, this.inFlight);
      let done = false;
      const finish = () => {
        if (!done) {
          done = true;
          this.inFlight -= 1;
        }
      };
      res.on('finish', finish);
      res.on('close', finish);
      const stream = req.stream as Http2ServerRequest['stream'] | undefined;
      if (stream?.session)
        this.highestStreamId.set(stream.session, Math.max(stream.id ?? 0, this.highestStreamId.get(stream.session) ?? 0));
      req.on('error', () => undefined);
      this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent && !res.stream?.destroyed) {
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ reason: 'InternalServerError', detail: String(err) }));
        }
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => resolve());
    });
    this.server = server;
    const { port } = server.address() as AddressInfo;
    this.origin_ = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
  }

  protected abstract handle(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void>;

  /** Resets counters (not registrations). */
  resetStats(): void {
    this.requestCount = 0;
    this.firstRequestAt = 0;
    this.accepted = 0;
    this.peakConcurrency = 0;
    this.sessionCount = 0;
  }

  /** Stops listening and drops every connection at once. */
  async close(): Promise<void> {
    for (const s of this.sessions) s.destroy();
    for (const s of this.sockets) s.destroy();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /**
   * Applies a transport fault. Returns true when the request was consumed (goaway/reset) and
   * must not be answered; `delay` waits and returns false so the request is handled normally.
   */
  protected async applyTransportFault(fault: Fault, req: Http2ServerRequest, res: Http2ServerResponse): Promise<boolean> {
    if (fault.type === 'delay') {
      await sleep(fault.ms);
      return res.stream?.destroyed ?? false; // the client may have given up meanwhile
    }
    const stream = req.stream as Http2ServerRequest['stream'] | undefined;
    if (!stream) {
      // HTTP/1.1 request (the OAuth endpoint): the closest thing to a reset is dropping the connection.
      req.socket.destroy();
      return true;
    }
    if (fault.type === 'reset') {
      stream.close(fault.code ?? NGHTTP2_INTERNAL_ERROR);
      return true;
    }
    if (fault.type === 'goaway') {
      // Refuse this stream and any new one: last-stream-id is the highest this session has started, so the
      // client retries exactly what was not processed (streams in progress here are still answered; a lower
      // last-stream-id would make the client retry pushes that are delivered). The session then closes, as a
      // server going away gracefully does.
      const session = stream.session;
      if (session && this.goawayLastStreamId.has(session)) {
        // one GOAWAY per session: later streams are already refused by it
        stream.close(NGHTTP2_REFUSED_STREAM);
      } else if (session && !session.closed) {
        const lastStreamId = this.highestStreamId.get(session) ?? 0;
        this.goawayLastStreamId.set(session, lastStreamId);
        session.goaway(fault.errorCode ?? NGHTTP2_NO_ERROR, lastStreamId, Buffer.from('{"reason":"Shutdown"}'));
        stream.close(NGHTTP2_REFUSED_STREAM);
        session.close();
      }
      return true;
    }
    return false;
  }

  /**
   * Called before a push is accepted: false when it cannot be delivered any more, because the client gave up on
   * the stream or because a GOAWAY refused it meanwhile (the client retries those: HTTP/2 promises they were
   * not processed). A refused stream is reset with REFUSED_STREAM.
   */
  protected deliverable(res: Http2ServerResponse): boolean {
    const stream = res.stream as Http2ServerResponse['stream'] | undefined;
    if (!stream || stream.destroyed) return !stream;
    const last = stream.session && this.goawayLastStreamId.get(stream.session);
    if (last !== undefined && (stream.id ?? 0) > last) {
      stream.close(NGHTTP2_REFUSED_STREAM);
      return false;
    }
    return true;
  }

  protected static async readBody(req: Http2ServerRequest): Promise<Buffer | 'too-large'> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY) return 'too-large';
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks);
  }

  protected static json(res: Http2ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    if (res.stream?.destroyed || res.headersSent) return;
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8', ...headers });
    res.end(text);
  }
}
