/**
 * A loopback Web Push service (RFC 8030) on TLS HTTP/2, as a browser vendor's would be.
 *
 * - `subscribe(applicationServerKey)` is what the browser does in pushManager.subscribe: a fresh P-256 key pair and
 *   auth secret held here (as the browser holds them), an endpoint `<origin>/push/<id>`, and the subscription's
 *   toJSON() to register with pushd.
 * - `POST /push/<id>`: checks the VAPID header (`vapid t=<JWT>, k=<key>`, RFC 8292): k is the key the subscription
 *   was made with (else 403), the JWT an ES256 signature by it with aud = this origin, exp in the future and at
 *   most 24 h away, sub mailto: or https: (else 401); TTL present, Urgency and Topic well-formed (else 400);
 *   `Content-Encoding: aes128gcm` and at most 4096 bytes (else 400 / 413). It then **decrypts** the body with the
 *   subscription's private key and auth secret (RFC 8291, written here from the RFC with HMAC steps, not with the
 *   gateway's code) and records the document. Answers 201 with a Location.
 * - `markGone(endpoint)` answers 410; an unknown endpoint 404; `faults` (FaultPlan, keyed by endpoint) any status.
 */
import { createDecipheriv, createECDH, createHmac, createPublicKey, randomBytes, verify, type ECDH } from 'node:crypto';
import type { Http2ServerRequest, Http2ServerResponse, IncomingHttpHeaders } from 'node:http2';
import { MockHttp2Server, type MockServerOptions } from './server.js';

export interface RecordedWebPush {
  endpoint: string;
  /** the decrypted JSON document */
  document: Record<string, unknown>;
  headers: IncomingHttpHeaders;
  /** the VAPID JWT's claims */
  claims: { aud: string; exp: number; sub: string };
  jwt: string;
  receivedAt: number;
}

export interface WebPushAnswerRecord {
  endpoint: string;
  status: number | 'goaway' | 'reset';
  at: number;
}

/** What a browser holds of one subscription: its key pair and auth secret, and the app's key it subscribed with. */
export interface HeldSubscription {
  ecdh: ECDH;
  auth: Buffer;
  applicationServerKey: string;
}

export interface MockSubscription {
  endpoint: string;
  expirationTime: null;
  keys: { p256dh: string; auth: string };
}

const TOPIC = /^[A-Za-z0-9_-]{1,32}$/;

export class WebPushMock extends MockHttp2Server {
  readonly pushes: RecordedWebPush[] = [];
  readonly answers: WebPushAnswerRecord[] = [];
  private readonly subscriptions = new Map<string, HeldSubscription>();
  private readonly gone = new Set<string>();

  static async start(options: MockServerOptions = {}): Promise<WebPushMock> {
    const mock = new WebPushMock();
    await mock.listen({ maxConcurrentStreams: 100, ...options });
    return mock;
  }

  /** pushManager.subscribe({applicationServerKey}): the subscription's toJSON(), its keys held here. */
  subscribe(applicationServerKey: string): MockSubscription {
    const ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
    const auth = randomBytes(16);
    const endpoint = `${this.origin}/push/${randomBytes(12).toString('base64url')}`;
    this.subscriptions.set(endpoint, { ecdh, auth, applicationServerKey });
    return {
      endpoint,
      expirationTime: null,
      keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: auth.toString('base64url') },
    };
  }

  /** The subscription ended (the user revoked permission, the browser expired it): 410 Gone. */
  markGone(endpoint: string): void {
    this.gone.add(endpoint);
  }

  pushesTo(endpoint: string): RecordedWebPush[] {
    return this.pushes.filter((p) => p.endpoint === endpoint);
  }

  reset(): void {
    this.pushes.length = 0;
    this.answers.length = 0;
    this.gone.clear();
    this.faults.clear();
    this.resetStats();
  }

  protected async handle(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    const endpoint = `${this.origin}${req.url}`;
    const answer = (status: number, text = '', headers: Record<string, string> = {}) => {
      this.answers.push({ endpoint, status, at: Date.now() });
      if (res.stream?.destroyed || res.headersSent) return;
      res.writeHead(status, { 'content-type': 'text/plain', ...headers });
      res.end(text);
    };
    const body = await MockHttp2Server.readBody(req);
    const fault = this.faults.take(endpoint);
    if (fault) {
      if (fault.type === 'status')
        return answer(fault.status, fault.reason, fault.retryAfter !== undefined ? { 'retry-after': String(fault.retryAfter) } : {});
      if (await this.applyTransportFault(fault, req, res)) {
        this.answers.push({ endpoint, status: fault.type === 'goaway' ? 'goaway' : 'reset', at: Date.now() });
        return;
      }
    }
    if (req.method !== 'POST' || !req.url.startsWith('/push/')) return answer(404, 'no such endpoint');
    const held = this.subscriptions.get(endpoint);
    if (!held) return answer(404, 'no such subscription');
    if (this.gone.has(endpoint)) return answer(410, 'subscription gone');

    const vapid = /^vapid t=([^,\s]+),\s*k=([A-Za-z0-9_-]+)$/.exec(String(req.headers.authorization ?? ''));
    if (!vapid) return answer(401, 'missing or malformed vapid authorization');
    const [, jwt, key] = vapid as unknown as [string, string, string];
    if (key !== held.applicationServerKey) return answer(403, 'vapid key is not the subscription key');
    const claims = verifyVapidJwt(jwt, key, this.origin);
    if (typeof claims === 'string') return answer(401, claims);

    const ttl = req.headers.ttl;
    if (typeof ttl !== 'string' || !/^\d+$/.test(ttl)) return answer(400, 'TTL header required');
    const urgency = req.headers.urgency;
    if (urgency !== undefined && !['very-low', 'low', 'normal', 'high'].includes(String(urgency))) return answer(400, 'bad urgency');
    const topic = req.headers.topic;
    if (topic !== undefined && !TOPIC.test(String(topic))) return answer(400, 'bad topic');
    if (req.headers['content-encoding'] !== 'aes128gcm') return answer(400, 'content-encoding must be aes128gcm');
    if (body === 'too-large' || body.length > 4096) return answer(413, 'payload too large');

    let document: Record<string, unknown>;
    try {
      document = JSON.parse(decrypt(body, held).toString('utf8')) as Record<string, unknown>;
    } catch (err) {
      return answer(400, `cannot decrypt: ${(err as Error).message}`);
    }
    if (!this.deliverable(res)) return;
    this.accepted += 1;
    if (this.recording) this.pushes.push({ endpoint, document, headers: req.headers, claims, jwt, receivedAt: Date.now() });
    answer(201, '', { location: `${this.origin}/message/${randomBytes(8).toString('hex')}` });
  }
}

/** The JWT's claims when it is an ES256 signature by `key` for this audience, else why not. */
export function verifyVapidJwt(jwt: string, key: string, audience: string): RecordedWebPush['claims'] | string {
  const parts = jwt.split('.');
  if (parts.length !== 3) return 'jwt must have three parts';
  const [head, payload, signature] = parts as [string, string, string];
  const header = JSON.parse(Buffer.from(head, 'base64url').toString()) as { alg?: string };
  if (header.alg !== 'ES256') return 'jwt alg must be ES256';
  const point = Buffer.from(key, 'base64url');
  const publicKey = createPublicKey({
    key: { kty: 'EC', crv: 'P-256', x: point.subarray(1, 33).toString('base64url'), y: point.subarray(33).toString('base64url') },
    format: 'jwk',
  });
  const valid = verify(
    'sha256',
    Buffer.from(`${head}.${payload}`),
    { key: publicKey, dsaEncoding: 'ieee-p1363' },
    Buffer.from(signature, 'base64url'),
  );
  if (!valid) return 'jwt signature invalid';
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as RecordedWebPush['claims'];
  const now = Date.now() / 1000;
  if (claims.aud !== audience) return `jwt aud ${claims.aud} is not ${audience}`;
  if (!(claims.exp > now) || claims.exp > now + 24 * 3600) return 'jwt exp must be in the next 24 hours';
  if (!/^(mailto:|https:)/.test(String(claims.sub))) return 'jwt sub must be mailto: or https:';
  return claims;
}

const hmac = (key: Buffer, data: Buffer) => createHmac('sha256', key).update(data).digest();

/** RFC 8291 §3.4 and RFC 8188 §2, step by step as the RFCs write them (HMAC for HKDF's extract and expand). */
export function decrypt(body: Buffer, held: HeldSubscription): Buffer {
  const salt = body.subarray(0, 16);
  const rs = body.readUInt32BE(16);
  const idlen = body.readUInt8(20);
  const asPublic = body.subarray(21, 21 + idlen);
  const record = body.subarray(21 + idlen);
  if (idlen !== 65) throw new Error('keyid must be the 65-byte sender key');
  if (record.length > rs) throw new Error('more than one record');
  const uaPublic = held.ecdh.getPublicKey();
  const ecdhSecret = held.ecdh.computeSecret(asPublic);
  const prkKey = hmac(held.auth, ecdhSecret);
  const keyInfo = Buffer.concat([Buffer.from('WebPush: info'), Buffer.from([0]), uaPublic, asPublic]);
  const ikm = hmac(prkKey, Buffer.concat([keyInfo, Buffer.from([1])]));
  const prk = hmac(salt, ikm);
  const cek = hmac(prk, Buffer.concat([Buffer.from('Content-Encoding: aes128gcm'), Buffer.from([0, 1])])).subarray(0, 16);
  const nonce = hmac(prk, Buffer.concat([Buffer.from('Content-Encoding: nonce'), Buffer.from([0, 1])])).subarray(0, 12);
  const decipher = createDecipheriv('aes-128-gcm', cek, nonce);
  decipher.setAuthTag(record.subarray(record.length - 16));
  const padded = Buffer.concat([decipher.update(record.subarray(0, record.length - 16)), decipher.final()]);
  let end = padded.length - 1;
  while (end >= 0 && padded[end] === 0) end -= 1;
  if (padded[end] !== 2) throw new Error('the last record must end with the delimiter 0x02');
  return padded.subarray(0, end);
}
