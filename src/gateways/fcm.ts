/**
 * FCM HTTP v1 gateway: our own long-lived node:http2 session + firebase-admin's Credential contract.
 *
 * Why not firebase-admin's transport:
 * - Sending: firebase-admin's messaging cannot be pointed at FCM_ORIGIN — `FCM_SEND_HOST` is the
 *   constant 'fcm.googleapis.com' in lib/messaging/messaging.js — and its sendEach() opens a new HTTP/2
 *   session per call. So we POST `${FCM_ORIGIN}/v1/projects/<project_id>/messages:send` ourselves over
 *   long-lived HTTP/2 sessions per service account (./http2-client.ts), reconnecting after GOAWAY/close,
 *   each carrying the streams FCM allows, another opened when they are full (./stream-pool.ts). One request per token: FCM v1 has no
 *   multicast (the batch endpoint is gone).
 * - Auth: firebase-admin's `cert()` credential ignores GOOGLE_TOKEN_URL (google-auth-library hard-codes
 *   https://oauth2.googleapis.com/token, and `token_uri` in the JSON is not read), so
 *   ./google-oauth.ts implements firebase-admin's `Credential` interface with a configurable token
 *   URL; tokens are cached and renewed before expiry, and renewed at once after a 401.
 * - Every answer goes through ./outcomes.ts; FCM's Retry-After (429/503) becomes retryAfterMs.
 * - A push with an expiry carries `android.ttl` = the seconds left as each chunk of tokens starts.
 */
import { secondsLeft } from '../domain/delivery-options.js';
import { contentsJson } from '../domain/json-splice.js';
import { fcmSendBodyJson, toFcmMessage } from '../domain/push-mapping.js';
import type { Logger } from '../platform/logger.js';
import type { FcmServiceAccount } from '../domain/credentials.js';
import { AccessTokenCache, oauthAnswer, ServiceAccountTokenCredential } from './google-oauth.js';
import { Http2Origin, type Http2Response } from './http2-client.js';
import { Drain } from './drain.js';
import { StreamPool } from './stream-pool.js';
import { classify, type FcmErrorBody, type GatewayAnswer } from './outcomes.js';
import {
  answerAll,
  GATEWAY_CLOSED,
  GATEWAY_REQUEST_TIMEOUT_MS,
  type ContentOf,
  type NotificationPush,
  type PushGateway,
  type PushOutcome,
  type PushResult,
  type PushTarget,
} from './types.js';

export { parseFcmServiceAccount, type FcmServiceAccount } from '../domain/credentials.js';

export interface FcmGatewayOptions {
  serviceAccount: FcmServiceAccount;
  /** FCM_ORIGIN, default https://fcm.googleapis.com */
  origin: string;
  /** GOOGLE_TOKEN_URL, default https://oauth2.googleapis.com/token */
  tokenUrl: string;
  /** Streams open at once across connections (a memory bound; each connection carries what FCM allows). Default 2000. */
  maxInFlight?: number;
  /** HTTP/2 connections at most; another opens when the open ones are full. Default 4. */
  maxConnections?: number;
  /** Per-request timeout in ms. Default 10000. */
  requestTimeoutMs?: number;
  log?: Logger;
}

export class FcmGateway implements PushGateway {
  private readonly connections: StreamPool<Http2Origin>;
  private readonly tokens: AccessTokenCache;
  private readonly drain = new Drain();
  private readonly path: string;
  private readonly timeoutMs: number;
  private closing: Promise<void> | undefined;

  constructor(private readonly options: FcmGatewayOptions) {
    this.connections = new StreamPool(
      () => new Http2Origin(options.origin),
      (origin) => origin.window,
      { maxConnections: options.maxConnections ?? 4, maxInFlight: options.maxInFlight ?? 2000, origin: options.origin },
    );
    this.tokens = new AccessTokenCache(new ServiceAccountTokenCredential(options.serviceAccount, { tokenUrl: options.tokenUrl }));
    this.path = `/v1/projects/${encodeURIComponent(options.serviceAccount.project_id)}/messages:send`;
    this.timeoutMs = options.requestTimeoutMs ?? GATEWAY_REQUEST_TIMEOUT_MS;
  }

  async send(push: NotificationPush, targets: PushTarget[]): Promise<PushResult[]> {
    return this.sendEach(push, [{ payload: push.payload, targets }]);
  }

  async sendEach(push: Omit<NotificationPush, 'payload'>, groups: ContentOf[]): Promise<PushResult[]> {
    const run = this.drain.track(() => this.sendAll(push, groups));
    return (
      run ??
      answerAll(
        groups.flatMap((g) => g.targets),
        GATEWAY_CLOSED,
      )
    );
  }

  private async sendAll(push: Omit<NotificationPush, 'payload'>, groups: ContentOf[]): Promise<PushResult[]> {
    const targets = groups.length === 1 ? groups[0]!.targets : groups.flatMap((g) => g.targets);
    if (targets.length === 0) return [];
    const refused = await this.tokens.refusal(this.options.log, 'fcm');
    if (refused) return targets.map((t) => ({ deviceId: t.deviceId, outcome: refused }));
    const contents = fcmContents(
      push,
      groups.map((g) => g.payload),
    );
    // each target's content, by its index (one content: none needed)
    const contentOf = groups.length === 1 ? null : groups.flatMap((g, k) => g.targets.map(() => k));
    const outcomes = new Array<PushOutcome>(targets.length);
    const sendChunk = (http: Http2Origin, indexes: number[]) =>
      new Promise<void>((resolve) => {
        const json = contents(new Date());
        const encode = (i: number, token: string) => fcmSendBodyJson(json(contentOf ? contentOf[i]! : 0), token);
        let left = indexes.length;
        for (const i of indexes) {
          const settle = (outcome: PushOutcome) => {
            outcomes[i] = outcome;
            if (--left === 0) resolve();
          };
          // sendOne maps every failure to an outcome; a bug must still not leave the chunk hanging
          this.sendOne(http, encode(i, (targets[i] as PushTarget).token)).then(settle, (err: Error) =>
            settle({ kind: 'retry', reason: `internal: ${err.message}` }),
          );
        }
      });
    await this.connections.run(
      targets.map((_, i) => i),
      sendChunk,
    );
    return targets.map((t, i) => ({ deviceId: t.deviceId, outcome: outcomes[i] as PushOutcome }));
  }

  /**
   * One push; never rejects. Written with `then` rather than async/await: at thousands of pushes a
   * second the extra promises of nested async functions are a measurable share of the CPU.
   */
  private sendOne(http: Http2Origin, body: string, attempt = 0): Promise<PushOutcome> {
    const accessToken = this.tokens.peek();
    if (accessToken === undefined) {
      return this.tokens.get().then(
        () => this.sendOne(http, body, attempt),
        (err: unknown) => classify(oauthAnswer(err)).outcome,
      );
    }
    const headers = {
      authorization: `Bearer ${accessToken}`,
      'content-type': 'application/json; charset=UTF-8',
      accept: 'application/json',
    };
    return http.request('POST', this.path, headers, body, this.timeoutMs).then(
      (res) => {
        const { outcome, refreshAuth } = classify(answerOf(res));
        if (!refreshAuth || attempt > 0) return outcome;
        // 401: the access token was revoked or expired early; renew it (once for all callers) and re-send once.
        this.tokens.invalidate(accessToken);
        return this.sendOne(http, body, attempt + 1);
      },
      (err: Error) => classify({ gateway: 'fcm', transportError: err.message }).outcome,
    );
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.drain.close();
      await Promise.all(this.connections.connections.map((c) => c.close()));
    })();
    return this.closing;
  }
}

/**
 * Each content's message JSON as of a chunk's start. With an expiry, android.ttl is the time left then, so the
 * messages are mapped again when that whole number of seconds has changed (at most once a second), not per token.
 */
function fcmContents(push: Omit<NotificationPush, 'payload'>, payloads: Record<string, unknown>[]): (now: Date) => (k: number) => string {
  let cached: { left: number | null; json: (k: number) => string } | undefined;
  return (now) => {
    const left = push.expiresAt ? secondsLeft(push.expiresAt, now) : null;
    if (!cached || cached.left !== left)
      cached = { left, json: contentsJson(payloads, (p) => JSON.stringify(toFcmMessage(p, push.notificationId, { ...push, now }))).json };
    return cached.json;
  };
}

function answerOf(res: Http2Response): GatewayAnswer {
  if (res.status >= 200 && res.status < 300) return OK_ANSWER;
  const retryAfter = headerValue(res.headers['retry-after']);
  const fcmError = parseFcmError(res.body);
  return { gateway: 'fcm', status: res.status, ...(fcmError && { fcmError }), ...(retryAfter !== undefined && { retryAfter }) };
}

const OK_ANSWER: GatewayAnswer = { gateway: 'fcm', status: 200 };

function parseFcmError(body: string): FcmErrorBody | undefined {
  try {
    const parsed = JSON.parse(body) as { error?: unknown };
    return typeof parsed.error === 'object' && parsed.error !== null ? (parsed.error as FcmErrorBody) : undefined;
  } catch {
    return undefined;
  }
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
