import { describe, expect, it } from 'vitest';
import { classify, fcmErrorConcernsToken, OUTCOME_TABLE, parseRetryAfter, type GatewayAnswer } from '../../src/gateways/outcomes.js';

const NOW = Date.parse('2030-01-01T00:00:00Z');

const fcmError = (status: number, errorCode: string | undefined, message = 'x', field?: string) => ({
  code: status,
  message,
  status: 'WHATEVER',
  details: [
    ...(errorCode ? [{ '@type': 'type.googleapis.com/google.firebase.fcm.v1.FcmError', errorCode }] : []),
    ...(field ? [{ '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [{ field, description: message }] }] : []),
  ],
});

describe('outcome table', () => {
  const cases: Array<[string, GatewayAnswer, string, string | undefined]> = [
    // [name, answer, expected kind, expected reason]
    ['apns 200', { gateway: 'apns', status: 200 }, 'ok', undefined],
    ['apns 410 Unregistered', { gateway: 'apns', status: 410, reason: 'Unregistered' }, 'invalid_token', 'Unregistered'],
    ['apns 410 ExpiredToken', { gateway: 'apns', status: 410, reason: 'ExpiredToken' }, 'invalid_token', 'ExpiredToken'],
    ['apns 400 BadDeviceToken', { gateway: 'apns', status: 400, reason: 'BadDeviceToken' }, 'invalid_token', 'BadDeviceToken'],
    [
      'apns 400 DeviceTokenNotForTopic',
      { gateway: 'apns', status: 400, reason: 'DeviceTokenNotForTopic' },
      'invalid_token',
      'DeviceTokenNotForTopic',
    ],
    ['apns 403 ExpiredProviderToken', { gateway: 'apns', status: 403, reason: 'ExpiredProviderToken' }, 'retry', 'ExpiredProviderToken'],
    ['apns 429', { gateway: 'apns', status: 429, reason: 'TooManyRequests' }, 'retry', 'TooManyRequests'],
    ['apns 500', { gateway: 'apns', status: 500, reason: 'InternalServerError' }, 'retry', 'InternalServerError'],
    ['apns 503', { gateway: 'apns', status: 503, reason: 'ServiceUnavailable' }, 'retry', 'ServiceUnavailable'],
    ['apns 500 without body', { gateway: 'apns', status: 500 }, 'retry', 'HTTP 500'],
    ['apns transport', { gateway: 'apns', transportError: 'apn write timeout' }, 'retry', 'transport: apn write timeout'],
    ['apns 413', { gateway: 'apns', status: 413, reason: 'PayloadTooLarge' }, 'failed', 'PayloadTooLarge'],
    ['apns 403 InvalidProviderToken', { gateway: 'apns', status: 403, reason: 'InvalidProviderToken' }, 'failed', 'InvalidProviderToken'],
    ['apns 400 TopicDisallowed', { gateway: 'apns', status: 400, reason: 'TopicDisallowed' }, 'failed', 'TopicDisallowed'],
    ['apns 400 MissingTopic', { gateway: 'apns', status: 400, reason: 'MissingTopic' }, 'failed', 'MissingTopic'],
    ['apns 405', { gateway: 'apns', status: 405, reason: 'MethodNotAllowed' }, 'failed', 'MethodNotAllowed'],
    ['apns 302 (unexpected)', { gateway: 'apns', status: 302 }, 'failed', 'HTTP 302'],

    ['fcm 200', { gateway: 'fcm', status: 200 }, 'ok', undefined],
    ['fcm 404 UNREGISTERED', { gateway: 'fcm', status: 404, fcmError: fcmError(404, 'UNREGISTERED') }, 'invalid_token', 'UNREGISTERED'],
    ['fcm 404 without UNREGISTERED (wrong URL)', { gateway: 'fcm', status: 404 }, 'failed', 'HTTP 404'],
    [
      'fcm 400 INVALID_ARGUMENT on message.token',
      {
        gateway: 'fcm',
        status: 400,
        fcmError: fcmError(400, 'INVALID_ARGUMENT', 'The registration token is not a valid FCM registration token', 'message.token'),
      },
      'invalid_token',
      'INVALID_ARGUMENT',
    ],
    [
      'fcm 400 INVALID_ARGUMENT whose message names the registration token',
      {
        gateway: 'fcm',
        status: 400,
        fcmError: fcmError(400, 'INVALID_ARGUMENT', 'The registration token is not a valid FCM registration token'),
      },
      'invalid_token',
      'INVALID_ARGUMENT',
    ],
    [
      'fcm 400 INVALID_ARGUMENT about the message',
      {
        gateway: 'fcm',
        status: 400,
        fcmError: fcmError(400, 'INVALID_ARGUMENT', "Invalid value at 'message.data[0].value' (TYPE_STRING), 3", 'message.data[0].value'),
      },
      'failed',
      'INVALID_ARGUMENT',
    ],
    [
      'fcm 401 UNAUTHENTICATED',
      {
        gateway: 'fcm',
        status: 401,
        fcmError: { code: 401, status: 'UNAUTHENTICATED', message: 'Request had invalid authentication credentials.' },
      },
      'retry',
      'UNAUTHENTICATED',
    ],
    [
      'fcm 401 THIRD_PARTY_AUTH_ERROR',
      { gateway: 'fcm', status: 401, fcmError: fcmError(401, 'THIRD_PARTY_AUTH_ERROR') },
      'failed',
      'THIRD_PARTY_AUTH_ERROR',
    ],
    [
      'fcm 403 SENDER_ID_MISMATCH',
      { gateway: 'fcm', status: 403, fcmError: fcmError(403, 'SENDER_ID_MISMATCH') },
      'failed',
      'SENDER_ID_MISMATCH',
    ],
    ['fcm 429 QUOTA_EXCEEDED', { gateway: 'fcm', status: 429, fcmError: fcmError(429, 'QUOTA_EXCEEDED') }, 'retry', 'QUOTA_EXCEEDED'],
    ['fcm 500 INTERNAL', { gateway: 'fcm', status: 500, fcmError: fcmError(500, 'INTERNAL') }, 'retry', 'INTERNAL'],
    ['fcm 503 UNAVAILABLE', { gateway: 'fcm', status: 503, fcmError: fcmError(503, 'UNAVAILABLE') }, 'retry', 'UNAVAILABLE'],
    ['fcm 502 HTML body', { gateway: 'fcm', status: 502 }, 'retry', 'HTTP 502'],
    [
      'fcm transport',
      { gateway: 'fcm', transportError: 'ERR_HTTP2_STREAM_ERROR: REFUSED_STREAM' },
      'retry',
      'transport: ERR_HTTP2_STREAM_ERROR: REFUSED_STREAM',
    ],

    ['oauth 503', { gateway: 'oauth', status: 503 }, 'retry', 'oauth HTTP 503'],
    ['oauth 429', { gateway: 'oauth', status: 429, reason: 'rate_limited' }, 'retry', 'oauth rate_limited'],
    ['oauth transport', { gateway: 'oauth', transportError: 'ECONNREFUSED' }, 'retry', 'oauth transport: ECONNREFUSED'],
    ['oauth 400 invalid_grant', { gateway: 'oauth', status: 400, reason: 'invalid_grant' }, 'failed', 'oauth invalid_grant'],
  ];

  it.each(cases)('%s', (_name, answer, kind, reason) => {
    const { outcome } = classify(answer, NOW);
    expect(outcome.kind).toBe(kind);
    if (reason !== undefined) expect(outcome).toMatchObject({ reason });
  });

  it('asks for a credential refresh only on APNs ExpiredProviderToken and FCM 401', () => {
    expect(classify({ gateway: 'apns', status: 403, reason: 'ExpiredProviderToken' }).refreshAuth).toBe(true);
    expect(classify({ gateway: 'fcm', status: 401 }).refreshAuth).toBe(true);
    expect(classify({ gateway: 'fcm', status: 401, fcmError: fcmError(401, 'THIRD_PARTY_AUTH_ERROR') }).refreshAuth).toBe(false);
    expect(classify({ gateway: 'apns', status: 403, reason: 'InvalidProviderToken' }).refreshAuth).toBe(false);
    expect(classify({ gateway: 'apns', status: 503 }).refreshAuth).toBe(false);
  });

  it('honours Retry-After in seconds and as an HTTP date on retry outcomes', () => {
    expect(classify({ gateway: 'fcm', status: 429, retryAfter: '30' }, NOW).outcome).toEqual({
      kind: 'retry',
      reason: 'HTTP 429',
      retryAfterMs: 30_000,
    });
    const date = new Date(NOW + 90_000).toUTCString();
    expect(classify({ gateway: 'apns', status: 503, reason: 'ServiceUnavailable', retryAfter: date }, NOW).outcome).toEqual({
      kind: 'retry',
      reason: 'ServiceUnavailable',
      retryAfterMs: 90_000,
    });
    expect(classify({ gateway: 'fcm', status: 503 }, NOW).outcome).toEqual({ kind: 'retry', reason: 'HTTP 503' });
  });

  it('ignores Retry-After on non-retry outcomes', () => {
    expect(classify({ gateway: 'fcm', status: 400, retryAfter: '30' }, NOW).outcome).toEqual({ kind: 'failed', reason: 'HTTP 400' });
  });

  it('ends with a catch-all row, so every answer has an outcome', () => {
    expect(OUTCOME_TABLE.at(-1)?.gateway).toBe('any');
    expect(classify({ gateway: 'fcm', status: 101 }).outcome.kind).toBe('failed');
  });
});

describe('parseRetryAfter', () => {
  it.each([
    [undefined, undefined],
    ['', undefined],
    ['0', 0],
    ['5', 5000],
    ['1.5', 1500],
    ['soon', undefined],
    ['-3', undefined],
  ])('%j -> %j', (value, ms) => {
    expect(parseRetryAfter(value, NOW)).toBe(ms);
  });

  it('clamps a date in the past to 0', () => {
    expect(parseRetryAfter(new Date(NOW - 10_000).toUTCString(), NOW)).toBe(0);
  });
});

describe('fcmErrorConcernsToken', () => {
  it('is false without an error or for message problems', () => {
    expect(fcmErrorConcernsToken(undefined)).toBe(false);
    expect(fcmErrorConcernsToken(fcmError(400, 'INVALID_ARGUMENT', 'Message is too big', 'message'))).toBe(false);
  });
});

describe('hms rows', () => {
  const hms = (status: number, reason: string, detail?: string): GatewayAnswer => ({
    gateway: 'hms',
    status,
    reason,
    ...(detail !== undefined && { detail }),
  });

  it('sorts each HMS code the issue names', () => {
    expect(classify(hms(200, '80000000')).outcome).toEqual({ kind: 'ok' });
    expect(classify(hms(200, '80100000', 'illegal token')).outcome).toEqual({ kind: 'invalid_token', reason: '80100000: illegal token' });
    expect(classify(hms(400, '80300007', 'All the tokens are invalid')).outcome.kind).toBe('invalid_token');
    expect(classify(hms(400, '80300008', 'too big')).outcome).toEqual({ kind: 'failed', reason: '80300008: too big' });
    expect(classify(hms(500, '81000001')).outcome.kind).toBe('retry');
    // the code decides even when HMS answers it with a 200 or a 400
    expect(classify(hms(200, '81000001')).outcome.kind).toBe('retry');
    expect(classify(hms(400, '80100003', 'Illegal payload')).outcome).toEqual({ kind: 'failed', reason: '80100003: Illegal payload' });
    expect(classify({ gateway: 'hms', status: 503, retryAfter: '30' }, NOW).outcome).toEqual({
      kind: 'retry',
      reason: 'HTTP 503',
      retryAfterMs: 30_000,
    });
    expect(classify({ gateway: 'hms', status: 429 }).outcome.kind).toBe('retry');
    expect(classify({ gateway: 'hms', transportError: 'ECONNRESET' }).outcome.kind).toBe('retry');
  });

  it('asks for a new access token on 80200003 and on 401', () => {
    expect(classify(hms(401, '80200003'))).toMatchObject({ outcome: { kind: 'retry' }, refreshAuth: true });
    expect(classify(hms(200, '80200003'))).toMatchObject({ outcome: { kind: 'retry' }, refreshAuth: true });
    expect(classify(hms(401, '80200001'))).toMatchObject({ outcome: { kind: 'retry' }, refreshAuth: true });
    expect(classify(hms(400, '80100003')).refreshAuth).toBe(false);
  });
});
