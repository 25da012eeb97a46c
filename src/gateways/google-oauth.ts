/**
 * Google OAuth 2.0 access tokens for a service account (the JWT-bearer grant, RFC 7523), with the
 * token endpoint as a parameter (config GOOGLE_TOKEN_URL).
 *
 * Why not firebase-admin's `cert(serviceAccount)`: in firebase-admin 13 it delegates to
 * google-auth-library 10, whose token request and JWT audience are the constant
 * https://oauth2.googleapis.com/token (gtoken/getToken.js, gtoken/jwsSign.js); the `token_uri` of the
 * service account JSON is ignored and the only knob is an http.Agent. So this class implements
 * firebase-admin's own `Credential` interface (`getAccessToken(): {access_token, expires_in}`) the way
 * google-auth-library does it: an RS256 assertion {iss: client_email, scope, aud: token URL, iat, exp}
 * POSTed as `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<jwt>`.
 */
import { createSign } from 'node:crypto';
import type { Credential, GoogleOAuthAccessToken } from 'firebase-admin/app';
import type { FcmServiceAccount } from '../domain/credentials.js';
import type { Logger } from '../platform/logger.js';
import { classify, type GatewayAnswer } from './outcomes.js';
import { GATEWAY_REQUEST_TIMEOUT_MS, type PushOutcome } from './types.js';

export const FCM_SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
/** Google issues tokens for at most one hour and refuses assertions asking for more. */
const ASSERTION_LIFETIME_S = 3600;

/** No access token could be had. `status` is absent when no HTTP answer came at all. */
export class OAuthError extends Error {
  override name = 'OAuthError';
  constructor(
    message: string,
    readonly status?: number,
    readonly code?: string,
    readonly retryAfter?: string,
  ) {
    super(message);
  }
}

export interface ServiceAccountCredentialOptions {
  tokenUrl: string;
  scope?: string;
  timeoutMs?: number;
}

export class ServiceAccountTokenCredential implements Credential {
  constructor(
    private readonly account: FcmServiceAccount,
    private readonly options: ServiceAccountCredentialOptions,
  ) {}

  getAccessToken(): Promise<GoogleOAuthAccessToken> {
    const body = new URLSearchParams({ grant_type: JWT_BEARER, assertion: this.assertion() });
    return requestAccessToken(this.options.tokenUrl, body, this.options.timeoutMs);
  }

  private assertion(): string {
    const iat = Math.floor(Date.now() / 1000);
    const header = { alg: 'RS256', typ: 'JWT', ...(this.account.private_key_id && { kid: this.account.private_key_id }) };
    const claims = {
      iss: this.account.client_email,
      scope: this.options.scope ?? FCM_SCOPE,
      aud: this.options.tokenUrl,
      iat,
      exp: iat + ASSERTION_LIFETIME_S,
    };
    const unsigned = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
    const signature = createSign('RSA-SHA256').update(unsigned).sign(this.account.private_key);
    return `${unsigned}.${signature.toString('base64url')}`;
  }
}

/**
 * Caches the access token of a Credential and renews it before it expires (5 minutes ahead, like
 * google-auth-library, or at half-life for short-lived tokens). Concurrent callers share one
 * request. `invalidate(token)` after a 401 drops that token only, so a burst of 401s for the same
 * stale token causes a single renewal.
 */
export class AccessTokenCache {
  private current: { token: string; renewAt: number } | undefined;
  private pending: Promise<string> | undefined;

  constructor(
    private readonly credential: Credential,
    private readonly now: () => number = Date.now,
  ) {}

  /** The cached token while it is fresh, else undefined (then `get()` renews it). Saves a promise per push. */
  peek(): string | undefined {
    return this.current && this.now() < this.current.renewAt ? this.current.token : undefined;
  }

  get(): Promise<string> {
    const fresh = this.peek();
    if (fresh !== undefined) return Promise.resolve(fresh);
    this.pending ??= this.fetch().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  /**
   * Gets the token once before a batch: if the endpoint refuses it, the one outcome every push of the batch gets
   * (instead of a token request per push), else undefined.
   */
  async refusal(log: Logger | undefined, gateway: string): Promise<PushOutcome | undefined> {
    try {
      await this.get();
      return undefined;
    } catch (err) {
      const outcome = classify(oauthAnswer(err)).outcome;
      log?.warn({ reason: outcome.kind === 'ok' ? '' : outcome.reason }, `${gateway}: no access token`);
      return outcome;
    }
  }

  invalidate(token: string): void {
    if (this.current?.token === token) this.current = undefined;
  }

  private async fetch(): Promise<string> {
    const asked = this.now();
    const { access_token, expires_in } = await this.credential.getAccessToken();
    const lifetime = expires_in * 1000;
    this.current = { token: access_token, renewAt: asked + Math.max(lifetime - 5 * 60_000, lifetime / 2) };
    return access_token;
  }
}

/**
 * POSTs a token request (a form) and reads `{access_token, expires_in}`: Google's and Huawei's endpoints answer alike
 * (RFC 6749 §5). Throws OAuthError with the status, the error code and Retry-After when refused.
 */
export async function requestAccessToken(
  tokenUrl: string,
  body: URLSearchParams,
  timeoutMs: number = GATEWAY_REQUEST_TIMEOUT_MS,
): Promise<GoogleOAuthAccessToken> {
  let res: Response;
  let text: string;
  try {
    res = await fetch(tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body,
      signal: AbortSignal.timeout(timeoutMs),
    });
    text = await res.text();
  } catch (err) {
    const cause = (err as Error & { cause?: Error }).cause;
    throw new OAuthError(`token request failed: ${cause?.message ?? (err as Error).message}`);
  }
  const json = safeJson(text);
  if (!res.ok) {
    const code = typeof json?.error === 'string' || typeof json?.error === 'number' ? String(json.error) : `HTTP ${res.status}`;
    const description = typeof json?.error_description === 'string' ? `: ${json.error_description}` : '';
    throw new OAuthError(`token endpoint refused: ${code}${description}`, res.status, code, res.headers.get('retry-after') ?? undefined);
  }
  if (typeof json?.access_token !== 'string' || typeof json.expires_in !== 'number') {
    throw new OAuthError('token endpoint answered without access_token/expires_in', res.status, 'bad_response');
  }
  return { access_token: json.access_token, expires_in: json.expires_in };
}

/** What a gateway tells the outcome table when no access token could be had. */
export function oauthAnswer(err: unknown): GatewayAnswer {
  if (err instanceof OAuthError && err.status !== undefined) {
    return {
      gateway: 'oauth',
      status: err.status,
      ...(err.code && { reason: err.code }),
      ...(err.retryAfter !== undefined && { retryAfter: err.retryAfter }),
    };
  }
  return { gateway: 'oauth', transportError: (err as Error).message ?? String(err) };
}

function b64url(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64url');
}

function safeJson(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
