/**
 * The Web Push benchmark's push service: test/mocks/web-push-mock.ts's checks, lighter. Every push is counted per
 * endpoint (`/push/<i>`) and has its headers checked (a `vapid t=…, k=<the app's key>` authorization, TTL,
 * aes128gcm); one push in `verifyEvery` also has its VAPID JWT verified and its body decrypted with the
 * subscription's keys (the test mock's code), as verifying all of them would make the mock the bottleneck.
 * It speaks HTTP/1.1 too, for the web-push package's https.request.
 */
import { createECDH, createHash } from 'node:crypto';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import { MockHttp2Server } from '../../test/mocks/server.js';
import { decrypt, verifyVapidJwt, type HeldSubscription } from '../../test/mocks/web-push-mock.js';

/** One of the benchmark's browser key pairs: device i holds pair i % size of the pool. */
export interface PoolKey {
  held: Omit<HeldSubscription, 'applicationServerKey'>;
  p256dh: string;
  auth: string;
}

/**
 * `size` browser key pairs and auth secrets, the same in every process that asks (derived from the index), so the
 * senders in their own processes encrypt to the keys the mock decrypts with without passing them around.
 */
export function browserKeyPool(size: number): PoolKey[] {
  return Array.from({ length: size }, (_, i) => {
    const ecdh = createECDH('prime256v1');
    ecdh.setPrivateKey(createHash('sha256').update(`bench-browser-${i}`).digest());
    const auth = createHash('sha256').update(`bench-auth-${i}`).digest().subarray(0, 16);
    return { held: { ecdh, auth }, p256dh: ecdh.getPublicKey().toString('base64url'), auth: auth.toString('base64url') };
  });
}

export class BenchWebPushMock extends MockHttp2Server {
  /** pushes accepted per endpoint since the last reset */
  readonly counts = new Map<string, number>();
  verified = 0;
  /** pushes refused (a bad header, JWT or body): any is a failure of the benchmark; the first 20 said why */
  refused = 0;
  refusedWhy: string[] = [];
  private seen = 0;

  private constructor(
    private readonly pool: PoolKey[],
    private readonly applicationServerKey: string,
    private readonly verifyEvery: number,
  ) {
    super();
  }

  static async start(opts: { pool: PoolKey[]; applicationServerKey: string; verifyEvery: number }): Promise<BenchWebPushMock> {
    const mock = new BenchWebPushMock(opts.pool, opts.applicationServerKey, opts.verifyEvery);
    await mock.listen({ record: false, allowHTTP1: true, maxConcurrentStreams: 1000 });
    return mock;
  }

  /** device i's endpoint */
  endpoint(i: number): string {
    return `${this.origin}/push/${i}`;
  }

  reset(): void {
    this.counts.clear();
    this.verified = 0;
    this.refused = 0;
    this.refusedWhy = [];
    this.resetStats();
  }

  /** Of devices 1..n, how many got no push and how many more than one since the last reset. */
  tally(n: number): { missed: number; twice: number } {
    let missed = 0;
    let twice = 0;
    for (let i = 1; i <= n; i++) {
      const count = this.counts.get(this.endpoint(i)) ?? 0;
      if (count === 0) missed++;
      if (count > 1) twice++;
    }
    return { missed, twice };
  }

  protected async handle(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    const endpoint = `${this.origin}${req.url}`;
    const refuse = (status: number, why: string) => {
      if (this.refused++ < 20) this.refusedWhy.push(`${endpoint}: ${status} ${why}`);
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(why);
    };
    const body = await MockHttp2Server.readBody(req);
    const index = /^\/push\/(\d+)$/.exec(req.url)?.[1];
    if (req.method !== 'POST' || index === undefined) return refuse(404, 'no such endpoint');
    const vapid = /^vapid t=([^,\s]+),\s*k=([A-Za-z0-9_-]+)$/.exec(String(req.headers.authorization ?? ''));
    if (!vapid || vapid[2] !== this.applicationServerKey) return refuse(401, 'missing vapid authorization by the app key');
    if (!/^\d+$/.test(String(req.headers.ttl))) return refuse(400, 'TTL header required');
    if (req.headers['content-encoding'] !== 'aes128gcm') return refuse(400, 'content-encoding must be aes128gcm');
    if (body === 'too-large' || body.length > 4096) return refuse(413, 'payload too large');
    if (this.seen++ % this.verifyEvery === 0) {
      const claims = verifyVapidJwt(vapid[1]!, this.applicationServerKey, this.origin);
      if (typeof claims === 'string') return refuse(401, claims);
      const held = { ...this.pool[Number(index) % this.pool.length]!.held, applicationServerKey: this.applicationServerKey };
      try {
        JSON.parse(decrypt(body, held).toString('utf8'));
      } catch (err) {
        return refuse(400, `cannot decrypt: ${(err as Error).message}`);
      }
      this.verified++;
    }
    if (!this.deliverable(res)) return;
    this.accepted += 1;
    this.counts.set(endpoint, (this.counts.get(endpoint) ?? 0) + 1);
    this.onAccept?.(endpoint);
    res.writeHead(201, { location: `${this.origin}/message/${this.accepted}` });
    res.end();
  }
}
