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
}

const { NGHTTP2_CANCEL } = http2.constants;

export class Http2Origin {
  private session: ClientHttp2Session | undefined;
  private readonly pingTimer: NodeJS.Timeout;
  private closed = false;

  constructor(
    readonly origin: string,
    options: Http2OriginOptions = {},
  ) {
    const url = new URL(origin);
    if (url.protocol !== 'https:') throw new Error(`origin must be https: ${origin}`);
    this.pingTimer = setInterval(() => this.ping(), options.pingIntervalMs ?? 60_000);
    this.pingTimer.unref();
  }

  /** Sends one request; resolves with any HTTP answer, rejects with TransportError when none came. */
  request(method: string, path: string, headers: Record<string, string>, body: string | undefined, timeoutMs: number): Promise<Http2Response> {
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
      const chunks: Buffer[] = [];
      let settled = false;
      const fail = (message: string) => {
        if (settled) return;
        settled = true;
        reject(new TransportError(message));
      };

      stream.setTimeout(timeoutMs, () => {
        fail(`timeout after ${timeoutMs} ms`);
        stream.close(NGHTTP2_CANCEL);
      });
      stream.on('response', (h) => {
        status = Number(h[':status']);
        responseHeaders = h;
      });
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        if (settled) return;
        if (status === 0) return fail('stream ended without a response');
        settled = true;
        resolve({ status, headers: responseHeaders, body: Buffer.concat(chunks).toString('utf8') });
      });
      stream.on('error', (err: Error & { code?: string }) => fail(`${err.code ?? 'stream error'}: ${err.message}`));
      // A reset with NO_ERROR emits no 'error'; 'close' catches every stream that never ended.
      stream.on('close', () => fail(`stream closed (rst code ${stream.rstCode ?? 'none'})`));
      stream.end(body);
    });
  }

  private currentSession(): ClientHttp2Session {
    if (this.closed) throw new Error('connection pool closed');
    const s = this.session;
    if (s && !s.closed && !s.destroyed) return s;

    const session = http2.connect(this.origin);
    // Each listener drops this session so the next request dials a fresh one.
    session.on('goaway', () => this.forget(session));
    session.on('close', () => this.forget(session));
    session.on('error', () => this.forget(session)); // streams get their own error; avoid an unhandled 'error'
    session.on('frameError', () => this.forget(session));
    this.session = session;
    return session;
  }

  private forget(session: ClientHttp2Session): void {
    if (this.session === session) this.session = undefined;
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
    const s = this.session;
    this.session = undefined;
    if (s && !s.destroyed) await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}
