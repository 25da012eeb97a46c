/**
 * A long-lived HTTP/2 connection to one origin, reconnected on demand.
 *
 * Used by the FCM gateway: firebase-admin opens a fresh HTTP/2 session per sendEach() call and
 * hard-codes fcm.googleapis.com, so we keep our own. A session that received GOAWAY, errored or
 * closed is dropped and the next request dials a new one; streams the server refused (GOAWAY with a
 * lower last-stream-id, RST_STREAM) fail with a `TransportError`, which the outcome table turns into
 * `retry`. A PING every `pingIntervalMs` finds half-dead connections before a request hangs on one.
 * TLS trust is Node's default store (NODE_EXTRA_CA_CERTS included).
 */
import http2, { type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import './lean-async-bind.js';

export class TransportError extends Error {
  override name = 'TransportError';
}

export interface Http2Response {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Http2OriginOptions {
  /** PING interval for the idle-connection health check. Default 60000 ms. */
  pingIntervalMs?: number;
  /** How often request deadlines are checked; a timeout fires up to this late. Default 250 ms. */
  sweepIntervalMs?: number;
  /** Keep the body of 2xx answers too (HMS says in it which tokens failed). Default false. */
  keepSuccessBody?: boolean;
}

const { NGHTTP2_CANCEL } = http2.constants;

/** One request in flight, as the deadline sweep sees it. */
interface InFlight {
  stream: http2.ClientHttp2Stream;
  deadline: number;
  timeoutMs: number;
  fail: (message: string) => void;
}

export class Http2Origin {
  private session: ClientHttp2Session | undefined;
  /** The streams the current session's peer allows (SETTINGS_MAX_CONCURRENT_STREAMS); undefined until it says. */
  private announced: number | undefined;
  private readonly pingTimer: NodeJS.Timeout;
  private readonly sweepTimer: NodeJS.Timeout;
  // Deadlines are checked by one sweep instead of a timer per stream: a stream timer is re-armed on
  // every frame, which costs more than the request itself at thousands of requests a second.
  private readonly inFlight = new Set<InFlight>();
  private closed = false;
  private readonly keepSuccessBody: boolean;

  constructor(
    readonly origin: string,
    options: Http2OriginOptions = {},
  ) {
    const url = new URL(origin);
    if (url.protocol !== 'https:') throw new Error(`origin must be https: ${origin}`);
    this.keepSuccessBody = options.keepSuccessBody ?? false;
    this.pingTimer = setInterval(() => this.ping(), options.pingIntervalMs ?? 60_000);
    this.pingTimer.unref();
    this.sweepTimer = setInterval(() => this.sweep(), options.sweepIntervalMs ?? 250);
    this.sweepTimer.unref();
  }

  /**
   * Sends one request; resolves with any HTTP answer, rejects with TransportError when none came.
   * The body of a 2xx answer is not kept (`body` is '') unless `keepSuccessBody`: most gateways read only error bodies.
   */
  request(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: string | Buffer | undefined,
    timeoutMs: number,
  ): Promise<Http2Response> {
    return new Promise((resolve, reject) => {
      let session: ClientHttp2Session;
      try {
        session = this.currentSession();
      } catch (err) {
        reject(new TransportError((err as Error).message));
        return;
      }
      let stream: http2.ClientHttp2Stream;
      try {
        stream = session.request({ ':method': method, ':path': path, ...headers });
      } catch (err) {
        // e.g. ERR_HTTP2_GOAWAY_SESSION / ERR_HTTP2_INVALID_SESSION when the session died just now.
        this.forget(session);
        reject(new TransportError((err as Error).message));
        return;
      }

      let status = 0;
      let responseHeaders: IncomingHttpHeaders = {};
      let text = '';
      const entry: InFlight = {
        stream,
        deadline: performance.now() + timeoutMs,
        timeoutMs,
        fail: (message) => {
          if (!this.inFlight.delete(entry)) return;
          reject(new TransportError(message));
        },
      };
      this.inFlight.add(entry);

      stream.on('response', (h) => {
        status = Number(h[':status']);
        responseHeaders = h;
        if (status >= 200 && status < 300 && !this.keepSuccessBody) stream.resume();
        else {
          stream.setEncoding('utf8');
          stream.on('data', (chunk: string) => (text += chunk));
        }
      });
      stream.on('end', () => {
        if (status === 0) return entry.fail('stream ended without a response');
        if (!this.inFlight.delete(entry)) return;
        resolve({ status, headers: responseHeaders, body: text });
      });
      stream.on('error', (err: Error & { code?: string }) => entry.fail(`${err.code ?? 'stream error'}: ${err.message}`));
      // A reset with NO_ERROR emits no 'error'; 'close' catches every stream that never ended.
      stream.on('close', () => entry.fail(`stream closed (rst code ${stream.rstCode ?? 'none'})`));
      stream.end(body);
    });
  }

  /**
   * Fails and cancels the requests whose deadline has passed. Not in this timer callback: timers run before the
   * event loop reads sockets, so after the process stalled (a busy host, a long GC) an answer already received
   * would lose to its own timeout and the push be sent again. setImmediate runs after that read.
   */
  private sweep(): void {
    if (this.inFlight.size === 0) return;
    const now = performance.now();
    const expired: InFlight[] = [];
    for (const entry of this.inFlight) if (entry.deadline <= now) expired.push(entry);
    if (expired.length === 0) return;
    setImmediate(() => {
      for (const entry of expired) {
        if (!this.inFlight.has(entry)) continue;
        entry.fail(`timeout after ${entry.timeoutMs} ms`);
        entry.stream.close(NGHTTP2_CANCEL);
      }
    });
  }

  private currentSession(): ClientHttp2Session {
    if (this.closed) throw new Error('connection pool closed');
    const s = this.session;
    if (s && !s.closed && !s.destroyed) return s;

    const session = http2.connect(this.origin);
    this.announced = undefined;
    session.on('remoteSettings', (settings) => {
      if (this.session === session) this.announced = settings.maxConcurrentStreams;
    });
    // Each listener drops this session so the next request dials a fresh one.
    session.on('goaway', () => this.forget(session));
    session.on('close', () => this.forget(session));
    session.on('error', () => this.forget(session)); // streams get their own error; avoid an unhandled 'error'
    session.on('frameError', () => this.forget(session));
    this.session = session;
    return session;
  }

  /** How many streams the peer allows on this connection now; undefined until its settings arrive. */
  get window(): number | undefined {
    return this.announced;
  }

  private forget(session: ClientHttp2Session): void {
    if (this.session === session) {
      this.session = undefined;
      this.announced = undefined;
    }
    if (!session.closed) session.close(); // lets in-flight streams finish
  }

  private ping(): void {
    const s = this.session;
    if (!s || s.closed || s.destroyed || s.connecting) return;
    try {
      s.ping((err) => {
        if (err) {
          this.forget(s);
          s.destroy();
        }
      });
    } catch {
      // Too many outstanding pings: the peer stopped answering.
      this.forget(s);
      s.destroy();
    }
  }

  /** Closes the connection after in-flight streams end. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.pingTimer);
    clearInterval(this.sweepTimer);
    const s = this.session;
    this.session = undefined;
    if (s && !s.destroyed) await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}
