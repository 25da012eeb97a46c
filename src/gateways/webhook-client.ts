import dns, { type LookupAddress, type LookupOneOptions, type LookupAllOptions } from 'node:dns';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { forbiddenAddress, webhookTargetProblem } from '../domain/webhooks.js';

/** What a webhook request came to: the receiver's status (null: no answer) and how long it took. */
export interface WebhookAnswer {
  status: number | null;
  latencyMs: number;
  /** the start of the answer's body, or why no answer came */
  snippet: string | null;
  error: string | null;
  /** the receiver's Retry-After header, as sent */
  retryAfter: string | undefined;
}

export interface WebhookClientOptions {
  /** WEBHOOK_ALLOWED_ORIGINS: sent to whatever address they resolve to */
  allowedOrigins: readonly string[];
  /** a request's whole time, connection to the last byte read */
  timeoutMs: number;
  /** requests in flight at once to one origin */
  maxSockets: number;
  /** the resolver the guard asks (dns.lookup unless given: a resolver of its own, a test's that answers a private address) */
  resolve?: typeof dns.lookup;
}

/** Bytes of an answer read at most: the rest is dropped with the connection. */
const ANSWER_BYTES = 1024;

/**
 * POSTs signed webhook requests. A target is checked on the address actually connected to: the guarded agent's
 * lookup refuses loopback, private, link-local and reserved addresses, so a name that resolves (or rebinds) to one
 * never gets a connection; an allowed origin goes through an agent without the guard. Redirects are not followed
 * (a 3xx is a failed request), answers are read up to ANSWER_BYTES, and a request is cut at the timeout.
 */
export class WebhookClient {
  private readonly guarded: https.Agent;
  private readonly allowed: https.Agent;

  constructor(private readonly options: WebhookClientOptions) {
    const agent = { keepAlive: true, maxSockets: options.maxSockets, timeout: options.timeoutMs };
    this.guarded = new https.Agent({ ...agent, lookup: guardedLookup(options.resolve ?? dns.lookup) });
    this.allowed = new https.Agent(agent);
  }

  async post(target: string, headers: Record<string, string>, body: string): Promise<WebhookAnswer> {
    const started = performance.now();
    const refused = webhookTargetProblem(target, this.options.allowedOrigins);
    if (refused) return failure(started, `refused: ${refused}`);
    const url = new URL(target);
    const agent = this.options.allowedOrigins.includes(url.origin) ? this.allowed : this.guarded;
    return new Promise<WebhookAnswer>((resolve) => {
      let settled = false;
      const settle = (answer: WebhookAnswer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(answer);
      };
      const req = https.request(
        url,
        {
          method: 'POST',
          agent,
          headers: {
            ...headers,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            'user-agent': 'pushd-webhooks',
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          let bytes = 0;
          const done = () => {
            const snippet = Buffer.concat(chunks).subarray(0, ANSWER_BYTES).toString('utf8');
            const retryAfter = res.headers['retry-after'];
            settle({ status: res.statusCode ?? null, latencyMs: elapsed(started), snippet, error: null, retryAfter });
          };
          res.on('data', (chunk: Buffer) => {
            chunks.push(chunk);
            bytes += chunk.length;
            if (bytes >= ANSWER_BYTES) {
              done();
              res.destroy();
            }
          });
          res.on('end', done);
          res.on('error', () => done());
        },
      );
      const timer = setTimeout(() => {
        req.destroy(new Error(`no answer within ${this.options.timeoutMs} ms`));
      }, this.options.timeoutMs);
      req.on('error', (err) => settle(failure(started, err.message)));
      req.end(body);
    });
  }

  close(): void {
    this.guarded.destroy();
    this.allowed.destroy();
  }
}

function elapsed(started: number): number {
  return Math.round(performance.now() - started);
}

function failure(started: number, error: string): WebhookAnswer {
  return { status: null, latencyMs: elapsed(started), snippet: null, error, retryAfter: undefined };
}

/** A lookup that answers only the addresses a webhook may reach, and fails when a name has none of them. */
export function guardedLookup(resolve: typeof dns.lookup): LookupFunction {
  return ((hostname: string, options: LookupOneOptions | LookupAllOptions, callback: (...args: unknown[]) => void) => {
    resolve(hostname, { ...options, all: true }, (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => {
      if (err) return callback(err);
      const usable = addresses.filter((a) => !forbiddenAddress(a.address));
      if (!usable.length) {
        const refused = Object.assign(new Error(`${hostname} resolves to a loopback, private, link-local or reserved address`), {
          code: 'EPUSHDFORBIDDEN',
        });
        return callback(refused);
      }
      if (options.all) return callback(null, usable);
      return callback(null, usable[0]!.address, usable[0]!.family);
    });
  }) as unknown as LookupFunction;
}
