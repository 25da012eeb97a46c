/**
 * THE table that sorts every gateway answer into a push outcome (ok / invalid_token / retry / failed).
 * Gateways never decide on their own: they normalise what they got (HTTP status + reason, or a
 * transport error) into a `GatewayAnswer` and call `classify`. Keep it that way so one place says
 * what kills a token, mirroring sygnal's single TOKEN_ERRORS set.
 *
 * Rows are tried in order, first match wins (this table is OUTCOME_TABLE below, line for line:
 * test/gateways/outcome-docs.test.ts fails while they differ, and prints the lines to paste):
 *
 * | gateway | answer                                                     | outcome       | renews auth | note                            |
 * |---------|------------------------------------------------------------|---------------|-------------|---------------------------------|
 * | apns    | 200                                                        | ok            |             |                                 |
 * | apns    | 410 (Unregistered, ExpiredToken)                           | invalid_token |             |                                 |
 * | apns    | 400 BadDeviceToken                                         | invalid_token |             |                                 |
 * | apns    | 400 DeviceTokenNotForTopic                                 | invalid_token |             |                                 |
 * | apns    | 403 ExpiredProviderToken                                   | retry         | first       |                                 |
 * | apns    | 429 TooManyRequests                                        | retry         |             | Retry-After honoured (1)        |
 * | apns    | 5xx                                                        | retry         |             | Retry-After honoured (1)        |
 * | apns    | connection error / timeout / GOAWAY / stream reset         | retry         |             |                                 |
 * | apns    | other 4xx (413 PayloadTooLarge, 403 InvalidProviderToken…) | failed        |             | reason = APNs reason            |
 * | fcm     | 200                                                        | ok            |             |                                 |
 * | fcm     | 404 UNREGISTERED                                           | invalid_token |             |                                 |
 * | fcm     | 400 INVALID_ARGUMENT about the registration token          | invalid_token |             |                                 |
 * | fcm     | 401 THIRD_PARTY_AUTH_ERROR                                 | failed        |             | APNs/web-push creds in Firebase |
 * | fcm     | 401 (UNAUTHENTICATED)                                      | retry         | first       |                                 |
 * | fcm     | 429 QUOTA_EXCEEDED                                         | retry         |             | Retry-After honoured            |
 * | fcm     | 5xx (500 INTERNAL, 503 UNAVAILABLE…)                       | retry         |             | Retry-After honoured            |
 * | fcm     | connection error / timeout / GOAWAY / stream reset         | retry         |             |                                 |
 * | fcm     | other 4xx (400 about the message, 403 SENDER_ID_MISMATCH…) | failed        |             | reason = FCM errorCode          |
 * | webpush | 2xx (201 Created, 202 Accepted)                            | ok            |             |                                 |
 * | webpush | 404 Not Found / 410 Gone (subscription expired or ended)   | invalid_token |             |                                 |
 * | webpush | 429                                                        | retry         |             | Retry-After honoured            |
 * | webpush | 5xx                                                        | retry         |             | Retry-After honoured            |
 * | webpush | connection error / timeout / GOAWAY / stream reset         | retry         |             |                                 |
 * | webpush | other 4xx (413 too large, 401/403 VAPID refused, 400…)     | failed        |             | reason = status + its text      |
 * | hms     | 80000000 (success)                                         | ok            |             |                                 |
 * | hms     | 80100000 (partial): a token it names in illegal_tokens     | invalid_token |             | the others get 80000000: ok     |
 * | hms     | 80300007 (all tokens invalid)                              | invalid_token |             |                                 |
 * | hms     | 80200003 (OAuth token expired) / HTTP 401                  | retry         | first       |                                 |
 * | hms     | 81000001 (internal error)                                  | retry         |             | Retry-After honoured            |
 * | hms     | 429                                                        | retry         |             | Retry-After honoured            |
 * | hms     | 5xx                                                        | retry         |             | Retry-After honoured            |
 * | hms     | connection error / timeout / GOAWAY / stream reset         | retry         |             |                                 |
 * | hms     | 80300008 (message too big) and every other code            | failed        |             | reason = code + HMS's msg       |
 * | oauth   | token endpoint 429                                         | retry         |             | Retry-After honoured            |
 * | oauth   | token endpoint 5xx                                         | retry         |             | Retry-After honoured            |
 * | oauth   | token endpoint connection error / timeout                  | retry         |             |                                 |
 * | oauth   | token endpoint 4xx (invalid_grant: key revoked…)           | failed        |             | every push of the batch         |
 * | any     | anything else (1xx, 3xx, unparsable)                       | failed        |             |                                 |
 *
 * (1) when the transport exposes it: node-apn 8 does not (see apns.ts), and APNs does not document one.
 *
 * `refreshAuth` on a row tells the gateway its credential (APNs provider JWT, Google OAuth token) was
 * refused as stale: renew it before the retry. SENDER_ID_MISMATCH is deliberately not a token error:
 * it usually means the wrong service account was configured, and invalidating every token on a
 * misconfiguration would be destructive (sygnal makes the same call).
 */
import type { PushOutcome, PushOutcomeKind } from './types.js';

/** `oauth` is Google's or Huawei's token endpoint: when no access token can be had, every push of the batch gets its answer. */
export type GatewayName = 'apns' | 'fcm' | 'webpush' | 'hms' | 'oauth';

/** The error object FCM HTTP v1 returns (google.rpc.Status as JSON). */
export interface FcmErrorBody {
  code?: number;
  message?: string;
  status?: string;
  details?: Array<{ '@type'?: string; errorCode?: string; fieldViolations?: Array<{ field?: string; description?: string }> }>;
}

/** One gateway answer for one token, as a gateway module normalises it. */
export type GatewayAnswer =
  | {
      gateway: GatewayName;
      /** HTTP status of the gateway's answer (or a locally synthesised one, e.g. 413 before sending). */
      status: number;
      /** APNs `reason`; for FCM the FcmError errorCode, else the google.rpc status string. */
      reason?: string;
      /** FCM only: the parsed `error` object, used to tell token problems from message problems. */
      fcmError?: FcmErrorBody;
      /** Raw Retry-After header value, if any. */
      retryAfter?: string | undefined;
      /** HMS only: its `msg`, said after the code in the reason. */
      detail?: string;
    }
  | { gateway: GatewayName; transportError: string };

export interface Classification {
  outcome: PushOutcome;
  /** The credential was refused as stale: regenerate/refresh it before retrying. */
  refreshAuth: boolean;
}

/** What a rule looks at: the status (or 'transport'), the reason code, and whether an FCM 400 concerns the token. */
export interface Facts {
  gateway: GatewayName;
  status: number | 'transport';
  code: string;
  aboutToken: boolean;
}

export interface OutcomeRule {
  gateway: GatewayName | 'any';
  when: string;
  match: (f: Facts) => boolean;
  kind: PushOutcomeKind;
  refreshAuth?: boolean;
  /** What the doc comment's table adds to the row. */
  note?: string;
}

const is4xx = (s: Facts['status']) => typeof s === 'number' && s >= 400 && s < 500;
const is5xx = (s: Facts['status']) => typeof s === 'number' && s >= 500 && s < 600;

export const OUTCOME_TABLE: readonly OutcomeRule[] = [
  { gateway: 'apns', when: '200', match: (f) => f.status === 200, kind: 'ok' },
  { gateway: 'apns', when: '410 (Unregistered, ExpiredToken)', match: (f) => f.status === 410, kind: 'invalid_token' },
  { gateway: 'apns', when: '400 BadDeviceToken', match: (f) => f.status === 400 && f.code === 'BadDeviceToken', kind: 'invalid_token' },
  {
    gateway: 'apns',
    when: '400 DeviceTokenNotForTopic',
    match: (f) => f.status === 400 && f.code === 'DeviceTokenNotForTopic',
    kind: 'invalid_token',
  },
  {
    gateway: 'apns',
    when: '403 ExpiredProviderToken',
    match: (f) => f.status === 403 && f.code === 'ExpiredProviderToken',
    kind: 'retry',
    refreshAuth: true,
  },
  { gateway: 'apns', when: '429 TooManyRequests', match: (f) => f.status === 429, kind: 'retry', note: 'Retry-After honoured (1)' },
  { gateway: 'apns', when: '5xx', match: (f) => is5xx(f.status), kind: 'retry', note: 'Retry-After honoured (1)' },
  { gateway: 'apns', when: 'connection error / timeout / GOAWAY / stream reset', match: (f) => f.status === 'transport', kind: 'retry' },
  {
    gateway: 'apns',
    when: 'other 4xx (413 PayloadTooLarge, 403 InvalidProviderToken…)',
    match: (f) => is4xx(f.status),
    kind: 'failed',
    note: 'reason = APNs reason',
  },

  { gateway: 'fcm', when: '200', match: (f) => f.status === 200, kind: 'ok' },
  { gateway: 'fcm', when: '404 UNREGISTERED', match: (f) => f.status === 404 && f.code === 'UNREGISTERED', kind: 'invalid_token' },
  {
    gateway: 'fcm',
    when: '400 INVALID_ARGUMENT about the registration token',
    match: (f) => f.status === 400 && f.code === 'INVALID_ARGUMENT' && f.aboutToken,
    kind: 'invalid_token',
  },
  {
    gateway: 'fcm',
    when: '401 THIRD_PARTY_AUTH_ERROR',
    match: (f) => f.status === 401 && f.code === 'THIRD_PARTY_AUTH_ERROR',
    kind: 'failed',
    note: 'APNs/web-push creds in Firebase',
  },
  { gateway: 'fcm', when: '401 (UNAUTHENTICATED)', match: (f) => f.status === 401, kind: 'retry', refreshAuth: true },
  { gateway: 'fcm', when: '429 QUOTA_EXCEEDED', match: (f) => f.status === 429, kind: 'retry', note: 'Retry-After honoured' },
  {
    gateway: 'fcm',
    when: '5xx (500 INTERNAL, 503 UNAVAILABLE…)',
    match: (f) => is5xx(f.status),
    kind: 'retry',
    note: 'Retry-After honoured',
  },
  { gateway: 'fcm', when: 'connection error / timeout / GOAWAY / stream reset', match: (f) => f.status === 'transport', kind: 'retry' },
  {
    gateway: 'fcm',
    when: 'other 4xx (400 about the message, 403 SENDER_ID_MISMATCH…)',
    match: (f) => is4xx(f.status),
    kind: 'failed',
    note: 'reason = FCM errorCode',
  },

  {
    gateway: 'webpush',
    when: '2xx (201 Created, 202 Accepted)',
    match: (f) => typeof f.status === 'number' && f.status >= 200 && f.status < 300,
    kind: 'ok',
  },
  {
    gateway: 'webpush',
    when: '404 Not Found / 410 Gone (subscription expired or ended)',
    match: (f) => f.status === 404 || f.status === 410,
    kind: 'invalid_token',
  },
  { gateway: 'webpush', when: '429', match: (f) => f.status === 429, kind: 'retry', note: 'Retry-After honoured' },
  { gateway: 'webpush', when: '5xx', match: (f) => is5xx(f.status), kind: 'retry', note: 'Retry-After honoured' },
  { gateway: 'webpush', when: 'connection error / timeout / GOAWAY / stream reset', match: (f) => f.status === 'transport', kind: 'retry' },
  {
    gateway: 'webpush',
    when: 'other 4xx (413 too large, 401/403 VAPID refused, 400…)',
    match: (f) => is4xx(f.status),
    kind: 'failed',
    note: 'reason = status + its text',
  },

  { gateway: 'hms', when: '80000000 (success)', match: (f) => f.code === '80000000', kind: 'ok' },
  {
    gateway: 'hms',
    when: '80100000 (partial): a token it names in illegal_tokens',
    match: (f) => f.code === '80100000',
    kind: 'invalid_token',
    note: 'the others get 80000000: ok',
  },
  { gateway: 'hms', when: '80300007 (all tokens invalid)', match: (f) => f.code === '80300007', kind: 'invalid_token' },
  {
    gateway: 'hms',
    when: '80200003 (OAuth token expired) / HTTP 401',
    match: (f) => f.code === '80200003' || f.status === 401,
    kind: 'retry',
    refreshAuth: true,
  },
  { gateway: 'hms', when: '81000001 (internal error)', match: (f) => f.code === '81000001', kind: 'retry', note: 'Retry-After honoured' },
  { gateway: 'hms', when: '429', match: (f) => f.status === 429, kind: 'retry', note: 'Retry-After honoured' },
  { gateway: 'hms', when: '5xx', match: (f) => is5xx(f.status), kind: 'retry', note: 'Retry-After honoured' },
  { gateway: 'hms', when: 'connection error / timeout / GOAWAY / stream reset', match: (f) => f.status === 'transport', kind: 'retry' },
  {
    gateway: 'hms',
    when: '80300008 (message too big) and every other code',
    match: () => true,
    kind: 'failed',
    note: "reason = code + HMS's msg",
  },

  { gateway: 'oauth', when: 'token endpoint 429', match: (f) => f.status === 429, kind: 'retry', note: 'Retry-After honoured' },
  { gateway: 'oauth', when: 'token endpoint 5xx', match: (f) => is5xx(f.status), kind: 'retry', note: 'Retry-After honoured' },
  { gateway: 'oauth', when: 'token endpoint connection error / timeout', match: (f) => f.status === 'transport', kind: 'retry' },
  {
    gateway: 'oauth',
    when: 'token endpoint 4xx (invalid_grant: key revoked…)',
    match: (f) => is4xx(f.status),
    kind: 'failed',
    note: 'every push of the batch',
  },

  { gateway: 'any', when: 'anything else (1xx, 3xx, unparsable)', match: () => true, kind: 'failed' },
];

const OK: Classification = Object.freeze({ outcome: Object.freeze({ kind: 'ok' }), refreshAuth: false });

/** Sorts one gateway answer into an outcome. `now` is injectable for Retry-After dates. */
export function classify(answer: GatewayAnswer, now: number = Date.now()): Classification {
  const facts = factsOf(answer);
  const rule = OUTCOME_TABLE.find((r) => (r.gateway === 'any' || r.gateway === answer.gateway) && r.match(facts));
  // The 'any' row always matches, so `rule` is defined; the fallback keeps the type checker honest.
  const kind = rule?.kind ?? 'failed';
  const refreshAuth = rule?.refreshAuth === true;
  // Nearly every answer is a plain success: one shared, frozen answer keeps that path allocation-free.
  if (kind === 'ok' && !refreshAuth) return OK;
  const reason = reasonOf(answer, facts);
  switch (kind) {
    case 'ok':
      return { outcome: { kind: 'ok' }, refreshAuth };
    case 'invalid_token':
      return { outcome: { kind: 'invalid_token', reason }, refreshAuth };
    case 'failed':
      return { outcome: { kind: 'failed', reason }, refreshAuth };
    case 'retry': {
      const retryAfterMs = 'status' in answer ? parseRetryAfter(answer.retryAfter, now) : undefined;
      return { outcome: retryAfterMs === undefined ? { kind: 'retry', reason } : { kind: 'retry', reason, retryAfterMs }, refreshAuth };
    }
  }
}

function factsOf(answer: GatewayAnswer): Facts {
  if (!('status' in answer)) return { gateway: answer.gateway, status: 'transport', code: '', aboutToken: false };
  const code = answer.gateway === 'fcm' ? (fcmErrorCode(answer.fcmError) ?? answer.reason ?? '') : (answer.reason ?? '');
  return {
    gateway: answer.gateway,
    status: answer.status,
    code,
    aboutToken: answer.gateway === 'fcm' && fcmErrorConcernsToken(answer.fcmError),
  };
}

/** Short, stable reason: the gateway's own code ("Unregistered", "QUOTA_EXCEEDED"), else "HTTP <status>". */
function reasonOf(answer: GatewayAnswer, facts: Facts): string {
  const prefix = answer.gateway === 'oauth' ? 'oauth ' : '';
  if (!('status' in answer)) return `${prefix}transport: ${answer.transportError}`;
  const detail = answer.detail ? `: ${answer.detail}` : '';
  return prefix + (facts.code !== '' ? facts.code : `HTTP ${answer.status}`) + detail;
}

/** The FcmError errorCode of an FCM v1 error, falling back to the google.rpc status ("UNAVAILABLE"). */
export function fcmErrorCode(error: FcmErrorBody | undefined): string | undefined {
  const detail = error?.details?.find((d) => typeof d.errorCode === 'string' && (d['@type'] ?? '').endsWith('FcmError'));
  return detail?.errorCode ?? error?.status;
}

/**
 * FCM answers 400 INVALID_ARGUMENT both for a malformed message and for a bad registration token.
 * Only the latter kills the token: it names the field `message.token` in a BadRequest detail, or says
 * "registration token" in its message ("The registration token is not a valid FCM registration token").
 */
export function fcmErrorConcernsToken(error: FcmErrorBody | undefined): boolean {
  if (!error) return false;
  const fields = (error.details ?? []).flatMap((d) => d.fieldViolations ?? []);
  if (fields.some((v) => v.field === 'message.token')) return true;
  return /registration[ -]token/i.test(error.message ?? '');
}

/**
 * Retry-After is either delta-seconds or an HTTP date (RFC 9110 §10.2.3). Returns milliseconds from
 * now, or undefined when absent or unparsable (the worker then uses its own backoff).
 */
export function parseRetryAfter(value: string | undefined | null, now: number = Date.now()): number | undefined {
  if (value === undefined || value === null) return undefined;
  const text = String(value).trim();
  if (text === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  // An HTTP date names its day and month ("Wed, 21 Oct 2015 07:28:00 GMT"); Date.parse alone reads "-3" as a year.
  if (!/[A-Za-z]{3}/.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}
