/**
 * A loopback Huawei Push Kit server (v1) plus Huawei's OAuth token endpoint, on one TLS server (HTTP/2 for sends,
 * HTTP/1.1 too because the token request goes through fetch).
 *
 * - `POST /oauth2/v3/token` (`tokenUrl`): the client credentials grant (form `grant_type=client_credentials`,
 *   `client_id` = a registered app id, `client_secret`); issues `{access_token, expires_in, token_type: "Bearer"}`,
 *   else 400 `{"error": 1101, "sub_error": 20101, "error_description": "invalid client"}`.
 * - `POST /v1/<app id>/messages:send`: needs `authorization: Bearer <token issued here for that app>` (else 401
 *   80200001) not expired nor expired by `expireAccessTokens()` (else 401 80200003, "Oauth Token expired"); checks the
 *   body (`validate_only`, `message.token` 1 to 1,000 strings, `data` a string, the android fields and their forms,
 *   4,096 bytes of message without its tokens: else 80300008) and answers `{code, msg, requestId}`: 80000000;
 *   80100000 with `msg` = `{"success":n,"failure":n,"illegal_tokens":[...]}` when some tokens are marked illegal;
 *   80300007 when all are.
 *
 *   const hms = await HmsMock.start();
 *   hms.addApp('10000001', 'secret');
 *   hms.faults.next(1, { type: 'status', status: 500, reason: '81000001' });   // reason = the HMS code answered
 *   hms.markIllegal(token); hms.expireAccessTokens();
 *   ... hms.requests, hms.answers, hms.tokenRequests ...
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Http2ServerRequest, Http2ServerResponse, IncomingHttpHeaders } from 'node:http2';
import { MockHttp2Server, type MockServerOptions } from './server.js';

export interface HmsMockOptions extends MockServerOptions {
  /** Lifetime of issued access tokens, seconds. Default 3600 (what Huawei answers). */
  accessTokenTtlSec?: number;
}

export interface RecordedHmsRequest {
  appId: string;
  /** the message as received, tokens included */
  message: { token: string[]; data?: string; android?: Record<string, unknown> } & Record<string, unknown>;
  validateOnly: unknown;
  headers: IncomingHttpHeaders;
  accessToken: string;
}

export interface HmsAnswerRecord {
  at: number;
  status: number | 'goaway' | 'reset';
  code?: string;
  tokens: string[];
  accessToken: string;
}

const MAX_MESSAGE_BYTES = 4096;
const MESSAGE_FIELDS = new Set(['data', 'notification', 'android', 'apns', 'webpush', 'token', 'topic', 'condition']);
const ANDROID_FIELDS = new Set([
  'collapse_key',
  'urgency',
  'category',
  'ttl',
  'bi_tag',
  'fast_app_target',
  'data',
  'notification',
  'receipt_id',
]);
const NOTIFICATION_FIELDS = new Set([
  'title',
  'body',
  'icon',
  'color',
  'sound',
  'tag',
  'click_action',
  'channel_id',
  'image',
  'importance',
]);

export class HmsMock extends MockHttp2Server {
  readonly requests: RecordedHmsRequest[] = [];
  readonly answers: HmsAnswerRecord[] = [];
  tokenRequests = 0;
  accessTokenTtlSec: number;
  private readonly apps = new Map<string, string>();
  private readonly accessTokens = new Map<string, { appId: string; expiresAt: number }>();
  private readonly illegal = new Set<string>();

  private constructor(options: HmsMockOptions) {
    super();
    this.accessTokenTtlSec = options.accessTokenTtlSec ?? 3600;
  }

  static async start(options: HmsMockOptions = {}): Promise<HmsMock> {
    const mock = new HmsMock(options);
    await mock.listen({ ...options, allowHTTP1: true });
    return mock;
  }

  get tokenUrl(): string {
    return `${this.origin}/oauth2/v3/token`;
  }

  addApp(appId: string, clientSecret: string): this {
    this.apps.set(appId, clientSecret);
    return this;
  }

  /** From now on HMS names this token in illegal_tokens (80100000), or answers 80300007 when no token of a request is legal. */
  markIllegal(token: string): this {
    this.illegal.add(token);
    return this;
  }

  /** Every access token issued so far has expired: sends answer 401 80200003. */
  expireAccessTokens(): this {
    for (const grant of this.accessTokens.values()) grant.expiresAt = 0;
    return this;
  }

  /** The tokens of the accepted (80000000 / 80100000) requests, the illegal ones left out. */
  get delivered(): string[] {
    return this.answers
      .filter((a) => a.code === '80000000' || a.code === '80100000')
      .flatMap((a) => a.tokens.filter((t) => !(a.code === '80100000' && this.illegal.has(t))));
  }

  reset(): void {
    this.requests.length = 0;
    this.answers.length = 0;
    this.faults.clear();
    this.illegal.clear();
    this.tokenRequests = 0;
    this.resetStats();
  }

  protected async handle(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    const path = req.url.split('?')[0] ?? '';
    if (path === '/oauth2/v3/token' && req.method === 'POST') return this.handleToken(req, res);
    const match = /^\/v1\/([^/]+)\/messages:send$/.exec(path);
    if (!match || req.method !== 'POST') return MockHttp2Server.json(res, 404, { code: '404', msg: 'not found' });
    const appId = decodeURIComponent(match[1] ?? '');
    const authorization = req.headers.authorization;
    const accessToken = typeof authorization === 'string' && authorization.startsWith('Bearer ') ? authorization.slice(7) : '';
    const answer = (status: number, code: string, msg: string, tokens: string[] = [], headers: Record<string, string> = {}) => {
      // a benchmark's hundreds of thousands of tokens are only counted (onAccept), not kept
      if (this.recording) this.answers.push({ at: Date.now(), status, code, tokens, accessToken });
      MockHttp2Server.json(res, status, { code, msg, requestId: randomUUID() }, headers);
    };
    const grant = this.accessTokens.get(accessToken);
    if (!grant || grant.appId !== appId) return answer(401, '80200001', 'Oauth authentication error');
    if (grant.expiresAt <= Date.now()) return answer(401, '80200003', 'Oauth Token expired.');

    const raw = await MockHttp2Server.readBody(req);
    let body: { validate_only?: unknown; message?: unknown } | undefined;
    try {
      body = raw === 'too-large' ? undefined : (JSON.parse(raw.toString('utf8')) as typeof body);
    } catch {
      body = undefined;
    }
    const message = body?.message as RecordedHmsRequest['message'] | undefined;
    const problem = shapeProblem(body, message);
    if (problem !== null || !message) return answer(400, '80100003', `Illegal payload, ${problem ?? 'no message'}`);
    const tokens = message.token;
    if (this.recording) this.requests.push({ appId, message, validateOnly: body?.validate_only, headers: req.headers, accessToken });
    const { token: _tokens, ...rest } = message;
    if (Buffer.byteLength(JSON.stringify(rest)) > MAX_MESSAGE_BYTES)
      return answer(400, '80300008', 'The message body size exceeds the default value', tokens);

    const fault = this.faults.take(tokens[0]);
    if (fault?.type === 'status') {
      const headers: Record<string, string> = fault.retryAfter === undefined ? {} : { 'retry-after': String(fault.retryAfter) };
      return answer(fault.status, fault.reason, `injected ${fault.reason}`, tokens, headers);
    }
    if (fault && (await this.applyTransportFault(fault, req, res))) {
      if (this.recording && (fault.type === 'goaway' || fault.type === 'reset'))
        this.answers.push({ at: Date.now(), status: fault.type, tokens, accessToken });
      return;
    }
    if (!this.deliverable(res)) return;
    const illegal = tokens.filter((t) => this.illegal.has(t));
    if (illegal.length === tokens.length) return answer(400, '80300007', 'All the tokens are invalid', tokens);
    this.accepted += tokens.length - illegal.length;
    if (this.onAccept) for (const token of tokens) if (!this.illegal.has(token)) this.onAccept(token);
    if (illegal.length === 0) return answer(200, '80000000', 'Success', tokens);
    const msg = JSON.stringify({ success: tokens.length - illegal.length, failure: illegal.length, illegal_tokens: illegal });
    return answer(200, '80100000', msg, tokens);
  }

  private async handleToken(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    this.tokenRequests += 1;
    const raw = await MockHttp2Server.readBody(req);
    const form = new URLSearchParams(raw === 'too-large' ? '' : raw.toString('utf8'));
    const appId = form.get('client_id') ?? '';
    const secret = this.apps.get(appId);
    if (form.get('grant_type') !== 'client_credentials' || secret === undefined || form.get('client_secret') !== secret)
      return MockHttp2Server.json(res, 400, { error: 1101, sub_error: 20101, error_description: 'invalid client' });
    const accessToken = randomBytes(24).toString('base64');
    this.accessTokens.set(accessToken, { appId, expiresAt: Date.now() + this.accessTokenTtlSec * 1000 });
    MockHttp2Server.json(res, 200, { access_token: accessToken, expires_in: this.accessTokenTtlSec, token_type: 'Bearer' });
  }
}

/** What HMS would refuse in the body as 80100003 (illegal payload), or null. */
function shapeProblem(body: { validate_only?: unknown } | undefined, message: RecordedHmsRequest['message'] | undefined): string | null {
  if (typeof message !== 'object' || message === null) return 'message must be an object';
  if (body?.validate_only !== undefined && typeof body.validate_only !== 'boolean') return 'validate_only must be a boolean';
  for (const key of Object.keys(message)) if (!MESSAGE_FIELDS.has(key)) return `unknown message field ${key}`;
  const tokens = message.token as unknown;
  if (!Array.isArray(tokens) || tokens.length < 1 || tokens.length > 1000 || !tokens.every((t) => typeof t === 'string'))
    return 'token must be 1 to 1000 strings';
  if (message.data !== undefined && typeof message.data !== 'string') return 'data must be a string';
  const android = message.android;
  if (android === undefined) return null;
  for (const key of Object.keys(android)) if (!ANDROID_FIELDS.has(key)) return `unknown android field ${key}`;
  if (android.urgency !== undefined && android.urgency !== 'HIGH' && android.urgency !== 'NORMAL') return 'urgency must be HIGH or NORMAL';
  if (android.ttl !== undefined && !(typeof android.ttl === 'string' && /^\d+(\.\d+)?s$/.test(android.ttl))) return 'ttl must be "<n>s"';
  if (android.collapse_key !== undefined && !(Number.isInteger(android.collapse_key) && Number(android.collapse_key) >= -1))
    return 'collapse_key must be an integer -1 to 100';
  const notification = android.notification as Record<string, unknown> | undefined;
  if (notification === undefined) return null;
  for (const key of Object.keys(notification)) if (!NOTIFICATION_FIELDS.has(key)) return `unknown notification field ${key}`;
  const action = notification.click_action as { type?: unknown; url?: unknown } | undefined;
  if (!action || ![1, 2, 3, 4].includes(action.type as number)) return 'click_action.type must be 1 to 4';
  if (action.type === 2 && typeof action.url !== 'string') return 'click_action type 2 needs a url';
  return null;
}
