/**
 * A loopback FCM HTTP v1 endpoint plus Google's OAuth token endpoint, on one TLS server
 * (HTTP/2 for sends, HTTP/1.1 too because the token request goes through fetch).
 *
 * - `POST /token` (`tokenUrl`): JWT-bearer grant. Verifies the RS256 assertion against a registered
 *   service account (iss = client_email, aud = this URL, scope has firebase.messaging, exp-iat <= 1 h,
 *   not expired) and issues `{access_token, expires_in, token_type: "Bearer"}`; else 400 invalid_grant.
 * - `POST /v1/projects/<project>/messages:send`: needs `authorization: Bearer <token issued here, not
 *   expired>` (else 401 UNAUTHENTICATED) for that project (else 403 PERMISSION_DENIED); checks the v1
 *   message shape (exactly one of token/topic/condition, string data values, known android fields,
 *   size) and answers like FCM: 200 `{"name": "projects/<p>/messages/<id>"}` or
 *   `{"error": {code, message, status, details: [{"@type": "...FcmError", errorCode}]}}`.
 *
 *   const fcm = await FcmMock.start();
 *   fcm.addServiceAccount(sa);                                 // from generateServiceAccount()
 *   fcm.faults.next(1, { type: 'status', status: 429, reason: 'QUOTA_EXCEEDED', retryAfter: 30 });
 *   fcm.markUnregistered(token); fcm.markInvalid(token2); fcm.revokeAccessTokens();
 *   fcm.tokenFaults.next(1, { type: 'status', status: 503, reason: 'temporarily_unavailable' });
 *   ... fcm.pushes, fcm.answers, fcm.tokenRequests ...
 *   await fcm.close();
 */
import { createPublicKey, randomBytes, type KeyObject } from 'node:crypto';
import type { Http2ServerRequest, Http2ServerResponse, IncomingHttpHeaders } from 'node:http2';
import type { TestServiceAccount } from './credentials.js';
import { FaultPlan } from './faults.js';
import { decodeJwt, verifyRs256 } from './jwt.js';
import { MockHttp2Server, type MockServerOptions } from './server.js';

export interface FcmMockOptions extends MockServerOptions {
  /** Lifetime of issued access tokens, seconds. Default 3599 (what Google answers). */
  accessTokenTtlSec?: number;
}

export interface RecordedFcmPush {
  project: string;
  token: string;
  message: Record<string, unknown>;
  headers: IncomingHttpHeaders;
  accessToken: string;
  name: string;
  receivedAt: number;
}

export interface FcmAnswerRecord {
  /** when the answer was sent (Date.now()) */
  at: number;
  token: string | undefined;
  status: number | 'goaway' | 'reset';
  errorCode?: string;
  accessToken?: string;
}

const GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const MESSAGING_SCOPES = ['https://www.googleapis.com/auth/firebase.messaging', 'https://www.googleapis.com/auth/cloud-platform'];
const FCM_ERROR = 'type.googleapis.com/google.firebase.fcm.v1.FcmError';
const BAD_REQUEST = 'type.googleapis.com/google.rpc.BadRequest';
/** FCM's longest android.ttl: 28 days. */
const FCM_MAX_TTL_SECONDS = 2_419_200;
/** FCM's limit on a message's data + notification payload. */
export const FCM_MAX_PAYLOAD = 4096;
/** What FCM registration tokens look like (base64url-ish with a colon). */
const REGISTRATION_TOKEN = /^[A-Za-z0-9_:-]{20,4096}$/;

/** google.rpc status string for each FcmError errorCode. */
const RPC_STATUS: Record<string, string> = {
  UNREGISTERED: 'NOT_FOUND',
  INVALID_ARGUMENT: 'INVALID_ARGUMENT',
  SENDER_ID_MISMATCH: 'PERMISSION_DENIED',
  QUOTA_EXCEEDED: 'RESOURCE_EXHAUSTED',
  UNAVAILABLE: 'UNAVAILABLE',
  INTERNAL: 'INTERNAL',
  THIRD_PARTY_AUTH_ERROR: 'UNAUTHENTICATED',
};

const MESSAGE_FIELDS = new Set([
  'name',
  'data',
  'notification',
  'android',
  'webpush',
  'apns',
  'fcm_options',
  'token',
  'topic',
  'condition',
]);
const ANDROID_FIELDS = new Set([
  'collapse_key',
  'priority',
  'ttl',
  'restricted_package_name',
  'data',
  'notification',
  'fcm_options',
  'direct_boot_ok',
]);
const ANDROID_NOTIFICATION_FIELDS = new Set([
  'title',
  'body',
  'icon',
  'color',
  'sound',
  'tag',
  'click_action',
  'body_loc_key',
  'body_loc_args',
  'title_loc_key',
  'title_loc_args',
  'channel_id',
  'ticker',
  'sticky',
  'event_time',
  'local_only',
  'notification_priority',
  'default_sound',
  'default_vibrate_timings',
  'default_light_settings',
  'vibrate_timings',
  'visibility',
  'notification_count',
  'light_settings',
  'image',
]);

/** Proto3 JSON accepts lowerCamelCase and the original snake_case names. */
const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

class FcmFailure {
  constructor(
    readonly status: number,
    readonly errorCode: string | undefined,
    readonly message: string,
    readonly field?: string,
  ) {}
}

export class FcmMock extends MockHttp2Server {
  readonly pushes: RecordedFcmPush[] = [];
  readonly answers: FcmAnswerRecord[] = [];
  /** Faults of the token endpoint (keyed by nothing: use `next`). */
  readonly tokenFaults = new FaultPlan();
  /** Successful and failed calls of the token endpoint. */
  tokenRequests = 0;
  accessTokenTtlSec: number;
  private readonly accounts = new Map<string, { projectId: string; publicKey: KeyObject }>();
  private readonly accessTokens = new Map<string, { projectId: string; expiresAt: number }>();
  private readonly unregistered = new Set<string>();
  private readonly invalid = new Set<string>();

  private constructor(options: FcmMockOptions) {
    super();
    this.accessTokenTtlSec = options.accessTokenTtlSec ?? 3599;
  }

  static async start(options: FcmMockOptions = {}): Promise<FcmMock> {
    const mock = new FcmMock(options);
    await mock.listen({ ...options, allowHTTP1: true });
    return mock;
  }

  /** The OAuth token endpoint of this mock (use as GOOGLE_TOKEN_URL). */
  get tokenUrl(): string {
    return `${this.origin}/token`;
  }

  addServiceAccount(account: TestServiceAccount | { clientEmail: string; projectId: string; publicKey: KeyObject | string }): this {
    const [clientEmail, projectId] =
      'json' in account ? [account.json.client_email, account.json.project_id] : [account.clientEmail, account.projectId];
    const publicKey = typeof account.publicKey === 'string' ? createPublicKey(account.publicKey) : account.publicKey;
    this.accounts.set(clientEmail, { projectId, publicKey });
    return this;
  }

  /** From now on the registration token answers 404 UNREGISTERED. */
  markUnregistered(token: string): this {
    this.unregistered.add(token);
    return this;
  }

  /** From now on the registration token answers 400 INVALID_ARGUMENT (not a valid registration token). */
  markInvalid(token: string): this {
    this.invalid.add(token);
    return this;
  }

  /** Every access token issued so far stops working (as if revoked): sends answer 401. */
  revokeAccessTokens(): this {
    this.accessTokens.clear();
    return this;
  }

  reset(): void {
    this.pushes.length = 0;
    this.answers.length = 0;
    this.faults.clear();
    this.tokenFaults.clear();
    this.unregistered.clear();
    this.invalid.clear();
    this.tokenRequests = 0;
    this.resetStats();
  }

  protected async handle(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    const path = req.url.split('?')[0] ?? '';
    if (path === '/token') return this.handleToken(req, res);
    const match = /^\/v1\/projects\/([^/]+)\/messages:send$/.exec(path);
    if (!match || req.method !== 'POST') {
      return this.fcmError(res, undefined, new FcmFailure(404, undefined, `The requested URL ${path} was not found on this server.`));
    }
    const project = decodeURIComponent(match[1] ?? '');

    const authorization = req.headers.authorization;
    const accessToken =
      typeof authorization === 'string' && /^Bearer\s+/i.test(authorization) ? authorization.replace(/^Bearer\s+/i, '') : '';
    const grant = this.accessTokens.get(accessToken);
    if (!grant || grant.expiresAt <= Date.now()) {
      return this.fcmError(
        res,
        undefined,
        new FcmFailure(
          401,
          undefined,
          'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
        ),
        accessToken,
      );
    }
    if (grant.projectId !== project) {
      return this.fcmError(
        res,
        undefined,
        new FcmFailure(
          403,
          undefined,
          `Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/${project}'`,
        ),
        accessToken,
      );
    }

    const raw = await MockHttp2Server.readBody(req);
    let body: unknown;
    try {
      body = raw === 'too-large' ? undefined : JSON.parse(raw.toString('utf8'));
    } catch {
      body = undefined;
    }
    const message = (body as { message?: unknown } | undefined)?.message;
    const token =
      typeof message === 'object' && message !== null && typeof (message as { token?: unknown }).token === 'string'
        ? (message as { token: string }).token
        : undefined;

    const fault = this.faults.take(token);
    if (fault?.type === 'status') {
      const headers: Record<string, string> = fault.retryAfter === undefined ? {} : { 'retry-after': String(fault.retryAfter) };
      return this.fcmError(res, token, new FcmFailure(fault.status, fault.reason, `injected ${fault.reason}`), accessToken, headers);
    }
    if (fault && (await this.applyTransportFault(fault, req, res))) {
      if (fault.type === 'goaway' || fault.type === 'reset') this.answers.push({ at: Date.now(), token, status: fault.type });
      return;
    }

    const problem = validateMessage(body);
    if (problem) return this.fcmError(res, token, problem, accessToken);
    if (token !== undefined && (this.invalid.has(token) || !REGISTRATION_TOKEN.test(token))) {
      return this.fcmError(
        res,
        token,
        new FcmFailure(400, 'INVALID_ARGUMENT', 'The registration token is not a valid FCM registration token', 'message.token'),
        accessToken,
      );
    }
    if (token !== undefined && this.unregistered.has(token)) {
      return this.fcmError(res, token, new FcmFailure(404, 'UNREGISTERED', 'Requested entity was not found.'), accessToken);
    }

    const name = `projects/${project}/messages/${randomBytes(8).readBigUInt64BE()}`;
    if (!this.deliverable(res)) return;
    this.accepted += 1;
    this.onAccept?.(token ?? '');
    if (this.recording) {
      this.pushes.push({
        project,
        token: token ?? '',
        message: message as Record<string, unknown>,
        headers: req.headers,
        accessToken,
        name,
        receivedAt: Date.now(),
      });
      this.answers.push({ at: Date.now(), token, status: 200, accessToken });
    }
    MockHttp2Server.json(res, 200, { name });
  }

  private fcmError(
    res: Http2ServerResponse,
    token: string | undefined,
    f: FcmFailure,
    accessToken?: string,
    headers: Record<string, string> = {},
  ): void {
    this.answers.push({
      at: Date.now(),
      token,
      status: f.status,
      ...(f.errorCode && { errorCode: f.errorCode }),
      ...(accessToken && { accessToken }),
    });
    const details: unknown[] = [];
    if (f.errorCode) details.push({ '@type': FCM_ERROR, errorCode: f.errorCode });
    if (f.field) details.push({ '@type': BAD_REQUEST, fieldViolations: [{ field: f.field, description: f.message }] });
    const status = (f.errorCode && RPC_STATUS[f.errorCode]) ?? defaultRpcStatus(f.status);
    MockHttp2Server.json(
      res,
      f.status,
      { error: { code: f.status, message: f.message, status, ...(details.length > 0 && { details }) } },
      headers,
    );
  }

  private async handleToken(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    this.tokenRequests += 1;
    const refuse = (status: number, error: string, description: string, headers: Record<string, string> = {}) =>
      MockHttp2Server.json(res, status, { error, error_description: description }, headers);
    if (req.method !== 'POST') return refuse(405, 'invalid_request', 'POST required');

    const fault = this.tokenFaults.take(undefined);
    if (fault?.type === 'status')
      return refuse(
        fault.status,
        fault.reason,
        'injected',
        fault.retryAfter === undefined ? {} : { 'retry-after': String(fault.retryAfter) },
      );
    if (fault && (await this.applyTransportFault(fault, req, res))) return;

    const raw = await MockHttp2Server.readBody(req);
    const form = new URLSearchParams(raw === 'too-large' ? '' : raw.toString('utf8'));
    if (form.get('grant_type') !== GRANT)
      return refuse(400, 'unsupported_grant_type', 'Invalid grant_type: ' + String(form.get('grant_type')));
    const jwt = decodeJwt(form.get('assertion') ?? '');
    if (!jwt) return refuse(400, 'invalid_grant', 'Invalid JWT: Token must be a short-lived token and in a reasonable timeframe.');
    const account = typeof jwt.claims.iss === 'string' ? this.accounts.get(jwt.claims.iss) : undefined;
    if (!account) return refuse(400, 'invalid_grant', 'Invalid JWT Signature.');
    if (!verifyRs256(jwt, account.publicKey)) return refuse(400, 'invalid_grant', 'Invalid JWT Signature.');
    if (jwt.claims.aud !== this.tokenUrl) return refuse(400, 'invalid_grant', 'Invalid JWT: Failed audience check.');
    const { iat, exp, scope } = jwt.claims;
    const now = Math.floor(Date.now() / 1000);
    if (typeof iat !== 'number' || typeof exp !== 'number' || exp - iat > 3600 || exp <= now || iat > now + 300) {
      return refuse(400, 'invalid_grant', 'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.');
    }
    if (typeof scope !== 'string' || !scope.split(' ').some((s) => MESSAGING_SCOPES.includes(s)))
      return refuse(400, 'invalid_scope', 'Invalid OAuth scope or ID token audience provided.');

    const accessToken = `ya29.mock-${randomBytes(24).toString('base64url')}`;
    this.accessTokens.set(accessToken, { projectId: account.projectId, expiresAt: Date.now() + this.accessTokenTtlSec * 1000 });
    MockHttp2Server.json(res, 200, { access_token: accessToken, expires_in: this.accessTokenTtlSec, token_type: 'Bearer' });
  }
}

function defaultRpcStatus(status: number): string {
  switch (status) {
    case 400:
      return 'INVALID_ARGUMENT';
    case 401:
      return 'UNAUTHENTICATED';
    case 403:
      return 'PERMISSION_DENIED';
    case 404:
      return 'NOT_FOUND';
    case 429:
      return 'RESOURCE_EXHAUSTED';
    case 503:
      return 'UNAVAILABLE';
    default:
      return status >= 500 ? 'INTERNAL' : 'FAILED_PRECONDITION';
  }
}

/** The v1 `message` checks FCM applies before looking at the token. */
function validateMessage(body: unknown): FcmFailure | undefined {
  const bad = (field: string, message: string) => new FcmFailure(400, 'INVALID_ARGUMENT', message, field);
  if (typeof body !== 'object' || body === null) return new FcmFailure(400, undefined, 'Invalid JSON payload received.');
  for (const key of Object.keys(body)) {
    if (key !== 'message' && key !== 'validate_only' && key !== 'validateOnly')
      return new FcmFailure(400, undefined, `Invalid JSON payload received. Unknown name "${key}": Cannot find field.`);
  }
  const message = (body as { message?: unknown }).message;
  if (typeof message !== 'object' || message === null || Array.isArray(message))
    return bad('message', 'Request contains an invalid argument.');
  const m = message as Record<string, unknown>;
  for (const key of Object.keys(m)) {
    if (!MESSAGE_FIELDS.has(snake(key)))
      return new FcmFailure(400, undefined, `Invalid JSON payload received. Unknown name "${key}" at 'message': Cannot find field.`);
  }
  const targets = ['token', 'topic', 'condition'].filter((k) => m[k] !== undefined);
  if (targets.length !== 1) return bad('message', 'Exactly one of token, topic or condition must be specified.');
  const target = m[targets[0] as string];
  if (typeof target !== 'string' || target === '') return bad(`message.${targets[0]}`, `Invalid value at 'message.${targets[0]}'`);

  const dataProblem = checkStringMap(m.data, 'message.data');
  if (dataProblem) return dataProblem;

  let size = Buffer.byteLength(JSON.stringify(m.data ?? {})) + Buffer.byteLength(JSON.stringify(m.notification ?? {}));
  if (m.android !== undefined) {
    if (typeof m.android !== 'object' || m.android === null) return bad('message.android', "Invalid value at 'message.android'");
    const a = m.android as Record<string, unknown>;
    for (const key of Object.keys(a)) {
      if (!ANDROID_FIELDS.has(snake(key)))
        return new FcmFailure(
          400,
          undefined,
          `Invalid JSON payload received. Unknown name "${key}" at 'message.android': Cannot find field.`,
        );
    }
    const priority = a.priority;
    if (priority !== undefined && !['normal', 'high', 'NORMAL', 'HIGH'].includes(String(priority))) {
      return bad(
        'message.android.priority',
        `Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), "${String(priority)}"`,
      );
    }
    const collapseKey = a.collapse_key ?? a.collapseKey;
    if (collapseKey !== undefined && typeof collapseKey !== 'string')
      return bad('message.android.collapse_key', "Invalid value at 'message.android.collapse_key' (TYPE_STRING)");
    const ttl = a.ttl;
    if (ttl !== undefined && !(typeof ttl === 'string' && /^\d+(\.\d+)?s$/.test(ttl)))
      return bad('message.android.ttl', "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration)");
    // FCM keeps a message at most 28 days and refuses a longer ttl.
    if (typeof ttl === 'string' && parseFloat(ttl) > FCM_MAX_TTL_SECONDS)
      return bad('message.android.ttl', 'The TTL value must be between 0 and 2419200 seconds (28 days).');
    const androidData = checkStringMap(a.data, 'message.android.data');
    if (androidData) return androidData;
    if (a.notification !== undefined) {
      if (typeof a.notification !== 'object' || a.notification === null)
        return bad('message.android.notification', "Invalid value at 'message.android.notification'");
      for (const [key, value] of Object.entries(a.notification)) {
        const name = snake(key);
        if (!ANDROID_NOTIFICATION_FIELDS.has(name))
          return new FcmFailure(
            400,
            undefined,
            `Invalid JSON payload received. Unknown name "${key}" at 'message.android.notification': Cannot find field.`,
          );
        if (
          ['title', 'body', 'channel_id', 'tag', 'click_action', 'sound', 'icon', 'color', 'image'].includes(name) &&
          typeof value !== 'string'
        ) {
          return bad(`message.android.notification.${name}`, `Invalid value at 'message.android.notification.${name}' (TYPE_STRING)`);
        }
      }
      size += Buffer.byteLength(JSON.stringify(a.notification));
    }
  }
  if (size > FCM_MAX_PAYLOAD) return bad('message', 'Message is too big');
  return undefined;
}

function checkStringMap(value: unknown, field: string): FcmFailure | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return new FcmFailure(400, 'INVALID_ARGUMENT', `Invalid value at '${field}'`, field);
  let i = 0;
  for (const [key, v] of Object.entries(value)) {
    if (typeof v !== 'string') {
      return new FcmFailure(
        400,
        'INVALID_ARGUMENT',
        `Invalid value at '${field}[${i}].value' (TYPE_STRING), ${JSON.stringify(v)}`,
        `${field}[${i}].value`,
      );
    }
    if (key.startsWith('google.') || key.startsWith('gcm.') || ['from', 'notification', 'message_type'].includes(key)) {
      return new FcmFailure(400, 'INVALID_ARGUMENT', `Invalid data payload key: ${key}`, field);
    }
    i += 1;
  }
  return undefined;
}

/** A plausible FCM registration token. */
export function randomFcmToken(): string {
  return `${randomBytes(16).toString('base64url')}:APA91b${randomBytes(96).toString('base64url')}`;
}
