/**
 * Web Push gateway (RFC 8030): one POST per subscription to its endpoint, the JSON document encrypted to the
 * browser's keys (aes128gcm, RFC 8291) and the app identified by a VAPID JWT (RFC 8292).
 *
 * Why node:crypto and not the web-push package: its request builder sends through https.request, one HTTP/1.1
 * request per push with no connection kept, and it holds the whole request options per call. Here each push-service
 * origin gets long-lived HTTP/2 connections (./http2-client.ts, ./stream-pool.ts) like FCM; the crypto is a few
 * lines of ECDH, HKDF and AES-128-GCM that node:crypto has. The JWT of each audience (a push service's origin) is
 * signed once and reused until an hour before it expires. No redirect is followed: a 3xx is a failure.
 */
import { createCipheriv, createECDH, createPrivateKey, hkdfSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { toWebPushMessage, type WebPushMessage } from '../domain/push-mapping.js';
import { endpointProblem, WEB_PUSH_MAX_RECORD_BYTES, webPushRecordBytes, type VapidCredentials } from '../domain/web-push.js';
import type { Logger } from '../platform/logger.js';
import { Drain } from './drain.js';
import { Http2Origin, type Http2Response } from './http2-client.js';
import { classify, type GatewayAnswer } from './outcomes.js';
import { StreamPool } from './stream-pool.js';
import {
  answerAll,
  GATEWAY_CLOSED,
  GATEWAY_REQUEST_TIMEOUT_MS,
  type NotificationPush,
  type PushGateway,
  type PushOutcome,
  type PushResult,
  type PushTarget,
  type WebPushKeys,
} from './types.js';

export interface WebPushGatewayOptions {
  credentials: VapidCredentials;
  /** WEB_PUSH_ALLOWED_ORIGINS: checked again at send, so a row stored before a change of the list (or by hand) is not sent to */
  allowedOrigins?: readonly string[];
  /** HTTP/2 connections per push-service origin at most. Default 4. */
  maxConnections?: number;
  /** Streams open at once per origin (a memory bound). Default 2000. */
  maxInFlight?: number;
  /** Per-request timeout in ms. Default 10000. */
  requestTimeoutMs?: number;
  log?: Logger;
}

/** How long a VAPID JWT is valid (RFC 8292 allows at most 24 hours), and how long before its end another is signed. */
const JWT_LIFETIME_S = 12 * 3600;
const JWT_RENEW_BEFORE_S = 3600;
/** The record size announced in the header: one record holds the whole document. */
const RECORD_SIZE = 4096;

export class WebPushGateway implements PushGateway {
  private readonly origins = new Map<string, StreamPool<Http2Origin>>();
  private readonly jwts = new Map<string, { token: string; renewAt: number }>();
  private readonly signingKey: KeyObject;
  private readonly drain = new Drain();
  private readonly timeoutMs: number;
  private closing: Promise<void> | undefined;

  constructor(private readonly options: WebPushGatewayOptions) {
    const point = Buffer.from(options.credentials.public_key, 'base64url');
    this.signingKey = createPrivateKey({
      key: {
        kty: 'EC',
        crv: 'P-256',
        x: point.subarray(1, 33).toString('base64url'),
        y: point.subarray(33, 65).toString('base64url'),
        d: options.credentials.private_key,
      },
      format: 'jwk',
    });
    this.timeoutMs = options.requestTimeoutMs ?? GATEWAY_REQUEST_TIMEOUT_MS;
  }

  async send(push: NotificationPush, targets: PushTarget[]): Promise<PushResult[]> {
    const run = this.drain.track(() => this.sendAll(push, targets));
    return run ?? answerAll(targets, GATEWAY_CLOSED);
  }

  private async sendAll(push: NotificationPush, targets: PushTarget[]): Promise<PushResult[]> {
    const message = toWebPushMessage(push.payload, push.notificationId, { ...push, now: new Date() });
    const outcomes = new Array<PushOutcome>(targets.length);
    if (webPushRecordBytes(message.body.length) > WEB_PUSH_MAX_RECORD_BYTES) {
      // every push service would answer 413: don't send what can't succeed
      const outcome = classify({ gateway: 'webpush', status: 413, reason: 'PayloadTooLarge' }).outcome;
      return targets.map((t) => ({ deviceId: t.deviceId, outcome }));
    }
    const byOrigin = new Map<string, number[]>();
    targets.forEach((t, i) => {
      const refused = endpointProblem(t.token, this.options.allowedOrigins ?? []);
      if (refused !== null || !t.keys) {
        const reason = refused === null ? 'not a web push subscription' : `endpoint_not_allowed: ${refused}`;
        outcomes[i] = classify({ gateway: 'webpush', status: 400, reason }).outcome;
        return;
      }
      const url = new URL(t.token);
      const list = byOrigin.get(url.origin) ?? [];
      if (list.length === 0) byOrigin.set(url.origin, list);
      list.push(i);
    });
    await Promise.all(
      [...byOrigin].map(([origin, indexes]) =>
        this.poolOf(origin).run(indexes, (http, chunk) =>
          Promise.all(
            chunk.map((i) =>
              // a stored key the crypto refuses throws: that push fails (sending it again would throw again)
              Promise.resolve(targets[i] as PushTarget)
                .then((target) => this.sendOne(http, message, target))
                .then(
                  (outcome) => (outcomes[i] = outcome),
                  (err: Error) => (outcomes[i] = { kind: 'failed', reason: `cannot encrypt: ${err.message}` }),
                ),
            ),
          ).then(() => undefined),
        ),
      ),
    );
    return targets.map((t, i) => ({ deviceId: t.deviceId, outcome: outcomes[i] as PushOutcome }));
  }

  private sendOne(http: Http2Origin, message: WebPushMessage, target: PushTarget): Promise<PushOutcome> {
    const url = new URL(target.token);
    const body = encryptRecord(message.body, target.keys as WebPushKeys);
    const headers: Record<string, string> = {
      authorization: `vapid t=${this.jwtFor(url.origin)}, k=${this.options.credentials.public_key}`,
      'content-encoding': 'aes128gcm',
      'content-type': 'application/octet-stream',
      ttl: message.headers.TTL,
      urgency: message.headers.Urgency,
      ...(message.headers.Topic !== undefined && { topic: message.headers.Topic }),
    };
    return http.request('POST', `${url.pathname}${url.search}`, headers, body, this.timeoutMs).then(
      (res) => classify(answerOf(res)).outcome,
      (err: Error) => classify({ gateway: 'webpush', transportError: err.message }).outcome,
    );
  }

  /** The VAPID JWT for one push service (its origin is the audience), signed again an hour before it expires. */
  private jwtFor(audience: string): string {
    const now = Math.floor(Date.now() / 1000);
    const cached = this.jwts.get(audience);
    if (cached && cached.renewAt > now) return cached.token;
    const exp = now + JWT_LIFETIME_S;
    const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const unsigned = `${encode({ typ: 'JWT', alg: 'ES256' })}.${encode({ aud: audience, exp, sub: this.options.credentials.subject })}`;
    const signature = sign('sha256', Buffer.from(unsigned), { key: this.signingKey, dsaEncoding: 'ieee-p1363' });
    const token = `${unsigned}.${signature.toString('base64url')}`;
    this.jwts.set(audience, { token, renewAt: exp - JWT_RENEW_BEFORE_S });
    return token;
  }

  private poolOf(origin: string): StreamPool<Http2Origin> {
    let pool = this.origins.get(origin);
    if (!pool) {
      pool = new StreamPool(
        () => new Http2Origin(origin),
        (c) => c.window,
        { maxConnections: this.options.maxConnections ?? 4, maxInFlight: this.options.maxInFlight ?? 2000, origin },
      );
      this.origins.set(origin, pool);
    }
    return pool;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.drain.close();
      await Promise.all([...this.origins.values()].flatMap((pool) => pool.connections.map((c) => c.close())));
    })();
    return this.closing;
  }
}

/**
 * The document encrypted to one subscription (RFC 8291 §3, in RFC 8188's aes128gcm coding): a fresh ECDH key pair
 * and salt per push; the header carries the salt, the record size and our public key, then one record: the document,
 * the last-record delimiter 0x02, and the GCM tag.
 */
export function encryptRecord(document: Buffer, keys: WebPushKeys): Buffer {
  const uaPublic = Buffer.from(keys.p256dh, 'base64url');
  const authSecret = Buffer.from(keys.auth, 'base64url');
  const ecdh = createECDH('prime256v1');
  const asPublic = ecdh.generateKeys();
  const sharedSecret = ecdh.computeSecret(uaPublic);
  const keyInfo = Buffer.concat([Buffer.from('WebPush: info\0'), uaPublic, asPublic]);
  const ikm = Buffer.from(hkdfSync('sha256', sharedSecret, authSecret, keyInfo, 32));
  const salt = randomBytes(16);
  const cek = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: aes128gcm\0'), 16));
  const nonce = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: nonce\0'), 12));
  const cipher = createCipheriv('aes-128-gcm', cek, nonce);
  const record = Buffer.concat([cipher.update(document), cipher.update(Buffer.from([2])), cipher.final(), cipher.getAuthTag()]);
  const header = Buffer.alloc(21);
  salt.copy(header, 0);
  header.writeUInt32BE(RECORD_SIZE, 16);
  header.writeUInt8(asPublic.length, 20);
  return Buffer.concat([header, asPublic, record]);
}

function answerOf(res: Http2Response): GatewayAnswer {
  const retryAfter = res.headers['retry-after'];
  const text = res.body.replace(/\s+/g, ' ').trim().slice(0, 120);
  return {
    gateway: 'webpush',
    status: res.status,
    ...(res.status >= 300 && { reason: text === '' ? `HTTP ${res.status}` : `HTTP ${res.status}: ${text}` }),
    ...(retryAfter !== undefined && { retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter }),
  };
}
