/**
 * Huawei Push Kit gateway (HMS Core Push Kit server API v1): `POST <HMS_ORIGIN>/v1/<app id>/messages:send` with up to
 * 1,000 tokens a request (`message.token: [...]`), authorised by an OAuth 2.0 access token of the client credentials
 * grant (`client_id` = the app id, `client_secret`) from HMS_TOKEN_URL, cached until near its end (./google-oauth.ts'
 * AccessTokenCache) and renewed at once when HMS answers 401 or 80200003 (token expired), then sent again once.
 *
 * HMS answers one `{code, msg, requestId}` for the whole request: 80000000 is every token; 80100000 (partial) names the
 * refused tokens in `msg` (a JSON string, `{"success":n,"failure":n,"illegal_tokens":[...]}`), which are invalidated,
 * the others being sent; any other code is the answer of every token of the request. Every answer goes through
 * ./outcomes.ts. android.ttl is the time left when the batch is mapped (its requests start together).
 *
 * Over pushd's HTTP/2 client (./http2-client.ts), like FCM: Huawei's docs name HTTPS, not the HTTP version. Whether
 * push-api.cloud.huawei.com offers h2 by ALPN was not checked (no network here); if it does not, this needs an
 * HTTP/1.1 keep-alive transport behind the same request() (see docs/api/huawei.md).
 */
import type { HmsCredentials } from '../domain/hms.js';
import { HMS_MAX_MESSAGE_BYTES, jsonBytes, toHmsMessage, type HmsMessageTemplate } from '../domain/push-mapping.js';
import type { Logger } from '../platform/logger.js';
import { Drain } from './drain.js';
import { AccessTokenCache, oauthAnswer, requestAccessToken } from './google-oauth.js';
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
} from './types.js';

/** HMS takes at most 1,000 tokens in one message. */
export const HMS_MAX_TOKENS_PER_REQUEST = 1000;

/**
 * Requests kept in flight however near the gateway looks: the round-trip window (./stream-pool.ts) counts requests,
 * but its fastest round trip is a small request's, while a full one carries about 130 KB, more than HTTP/2's first
 * flow-control window, and waits for the server to read it. One at a time, a broadcast went at the pace of those
 * waits (a batch's 2 requests after another's on a busy host); this is what a worker's large batches offer at
 * once by default (DELIVERY_CONCURRENCY 8 × 2 requests).
 */
export const HMS_MIN_IN_FLIGHT = 16;

export interface HmsGatewayOptions {
  credentials: HmsCredentials;
  /** HMS_ORIGIN, default https://push-api.cloud.huawei.com */
  origin: string;
  /** HMS_TOKEN_URL, default https://oauth-login.cloud.huawei.com/oauth2/v3/token */
  tokenUrl: string;
  /** HTTP/2 connections at most. Default 4. */
  maxConnections?: number;
  /** Requests open at once across connections (each up to 1,000 tokens). Default 100. */
  maxInFlight?: number;
  /** Per-request timeout in ms. Default 10000. */
  requestTimeoutMs?: number;
  log?: Logger;
}

export class HmsGateway implements PushGateway {
  private readonly connections: StreamPool<Http2Origin>;
  private readonly tokens: AccessTokenCache;
  private readonly drain = new Drain();
  private readonly path: string;
  private readonly timeoutMs: number;
  private closing: Promise<void> | undefined;

  constructor(private readonly options: HmsGatewayOptions) {
    this.connections = new StreamPool(
      () => new Http2Origin(options.origin, { keepSuccessBody: true }),
      (origin) => origin.window,
      {
        maxConnections: options.maxConnections ?? 4,
        maxInFlight: Math.min(options.maxInFlight ?? 100, 100),
        minInFlight: HMS_MIN_IN_FLIGHT,
        chunkSize: 1,
        origin: options.origin,
      },
    );
    const { app_id, client_secret } = options.credentials;
    const form = () => new URLSearchParams({ grant_type: 'client_credentials', client_id: app_id, client_secret });
    this.tokens = new AccessTokenCache({ getAccessToken: () => requestAccessToken(options.tokenUrl, form(), this.timeoutMs) });
    this.path = `/v1/${encodeURIComponent(app_id)}/messages:send`;
    this.timeoutMs = options.requestTimeoutMs ?? GATEWAY_REQUEST_TIMEOUT_MS;
  }

  async send(push: NotificationPush, targets: PushTarget[]): Promise<PushResult[]> {
    const run = this.drain.track(() => this.sendAll(push, targets));
    return run ?? answerAll(targets, GATEWAY_CLOSED);
  }

  private async sendAll(push: NotificationPush, targets: PushTarget[]): Promise<PushResult[]> {
    if (targets.length === 0) return [];
    const message = toHmsMessage(push.payload, push.notificationId, { ...push, now: new Date() });
    const bytes = jsonBytes(message);
    if (bytes > HMS_MAX_MESSAGE_BYTES) {
      // HMS would answer 80300008: don't send what can't succeed
      const detail = `message of ${bytes} bytes, HMS accepts at most ${HMS_MAX_MESSAGE_BYTES}`;
      const outcome = classify({ gateway: 'hms', status: 400, reason: '80300008', detail }).outcome;
      return targets.map((t) => ({ deviceId: t.deviceId, outcome }));
    }
    const refused = await this.tokens.refusal(this.options.log, 'hms');
    if (refused) return targets.map((t) => ({ deviceId: t.deviceId, outcome: refused }));
    // request r holds targets [r × 1,000, (r + 1) × 1,000); its answers land at the same places of `outcomes`
    const requests = Math.ceil(targets.length / HMS_MAX_TOKENS_PER_REQUEST);
    const outcomes = new Array<PushOutcome | undefined>(targets.length);
    await this.connections.run(
      Array.from({ length: requests }, (_, r) => r),
      (http, chunk) =>
        Promise.all(
          chunk.map(async (r) => {
            const first = r * HMS_MAX_TOKENS_PER_REQUEST;
            const answers = await this.sendRequest(http, message, targets.slice(first, first + HMS_MAX_TOKENS_PER_REQUEST));
            for (let j = 0; j < answers.length; j++) outcomes[first + j] = answers[j];
          }),
        ).then(() => undefined),
    );
    return targets.map((t, i) => ({ deviceId: t.deviceId, outcome: outcomes[i] ?? NO_ANSWER }));
  }

  /** One request for up to 1,000 tokens; an outcome per token, same order; never rejects. */
  private async sendRequest(http: Http2Origin, message: HmsMessageTemplate, targets: PushTarget[], attempt = 0): Promise<PushOutcome[]> {
    const every = (outcome: PushOutcome) => new Array<PushOutcome>(targets.length).fill(outcome);
    let accessToken: string;
    try {
      accessToken = await this.tokens.get();
    } catch (err) {
      return every(classify(oauthAnswer(err)).outcome);
    }
    const body = JSON.stringify({ validate_only: false, message: { ...message, token: targets.map((t) => t.token) } });
    const headers = {
      authorization: `Bearer ${accessToken}`,
      'content-type': 'application/json; charset=UTF-8',
      accept: 'application/json',
    };
    let res: Http2Response;
    try {
      res = await http.request('POST', this.path, headers, body, this.timeoutMs);
    } catch (err) {
      return every(classify({ gateway: 'hms', transportError: (err as Error).message }).outcome);
    }
    const answer = answerOf(res);
    if (answer.reason === '80100000') return partial(targets, answer.detail ?? '', this.options.log);
    const { outcome, refreshAuth } = classify(answer);
    if (!refreshAuth || attempt > 0) return every(outcome);
    // 401 / 80200003: the access token expired or was revoked early; renew it (once for all callers) and send again once.
    this.tokens.invalidate(accessToken);
    return this.sendRequest(http, message, targets, attempt + 1);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.drain.close();
      await Promise.all(this.connections.connections.map((c) => c.close()));
    })();
    return this.closing;
  }
}

const NO_ANSWER: PushOutcome = { kind: 'retry', reason: 'internal: no answer' };

/** 80100000: the tokens `msg` names as illegal are dead, the others were sent. */
function partial(targets: PushTarget[], msg: string, log: Logger | undefined): PushOutcome[] {
  let illegal: Set<string>;
  try {
    const parsed = JSON.parse(msg) as { illegal_tokens?: unknown; illegalTokens?: unknown };
    const list = parsed.illegal_tokens ?? parsed.illegalTokens;
    illegal = new Set(Array.isArray(list) ? list.filter((t): t is string => typeof t === 'string') : []);
  } catch {
    illegal = new Set();
  }
  if (illegal.size === 0) log?.warn({ msg }, 'hms: partial success without a readable illegal_tokens list');
  const dead = classify({ gateway: 'hms', status: 200, reason: '80100000', detail: 'illegal token' }).outcome;
  const sent = classify({ gateway: 'hms', status: 200, reason: '80000000' }).outcome;
  return targets.map((t) => (illegal.has(t.token) ? dead : sent));
}

function answerOf(res: Http2Response): GatewayAnswer & { reason?: string; detail?: string } {
  let code: string | undefined;
  let msg: string | undefined;
  try {
    const parsed = JSON.parse(res.body) as { code?: unknown; msg?: unknown };
    if (typeof parsed.code === 'string' || typeof parsed.code === 'number') code = String(parsed.code);
    if (typeof parsed.msg === 'string') msg = parsed.msg;
  } catch {
    // not JSON (a proxy's error page): the HTTP status decides
  }
  const retryAfter = res.headers['retry-after'];
  return {
    gateway: 'hms',
    status: res.status,
    ...(code !== undefined && { reason: code }),
    ...(msg !== undefined && code !== '80000000' && { detail: msg.slice(0, 500) }),
    ...(retryAfter !== undefined && { retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter }),
  };
}
