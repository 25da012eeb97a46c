/**
 * The production WebPushGateway against the Web Push mock over real TLS HTTP/2: every answer of a push service
 * sorted by the outcome table, connections per origin, the VAPID JWT reused per origin and signed again near its end.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { generateVapidCredentials, webPushRecordBytes, type VapidCredentials } from '../../src/domain/web-push.js';
import { classify } from '../../src/gateways/outcomes.js';
import { encryptRecord, WebPushGateway } from '../../src/gateways/web-push.js';
import type { PushTarget } from '../../src/gateways/types.js';
import { WebPushMock } from '../mocks/web-push-mock.js';
import { requireTestCa } from './tls-guard.js';

let mock: WebPushMock;
let other: WebPushMock;
let vapid: VapidCredentials;
const open: WebPushGateway[] = [];

const gateway = () => {
  const g = new WebPushGateway({ credentials: vapid, requestTimeoutMs: 2000, allowedOrigins: [mock.origin, other.origin] });
  open.push(g);
  return g;
};
const target = (service = mock, i = 0): PushTarget => {
  const sub = service.subscribe(vapid.public_key);
  return { deviceId: `dev-${i}`, token: sub.endpoint, keys: sub.keys };
};
const push = (payload: Record<string, unknown> = { alert: 'Hello' }) => ({ notificationId: 'n-1', payload });

beforeAll(async () => {
  requireTestCa();
  vapid = generateVapidCredentials('mailto:ops@example.com');
  mock = await WebPushMock.start();
  other = await WebPushMock.start();
});
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(open.splice(0).map((g) => g.close()));
  mock.reset();
  other.reset();
});
afterAll(async () => {
  await mock.close();
  await other.close();
});

describe('WebPushGateway', () => {
  it('sends each subscription its own encrypted copy, one result per target in order, over one connection per origin', async () => {
    const targets = [target(mock, 0), target(other, 1), target(mock, 2)];
    const results = await gateway().send(push({ alert: 'Hi', k: 'v' }), targets);
    expect(results.map((r) => [r.deviceId, r.outcome.kind])).toEqual([
      ['dev-0', 'ok'],
      ['dev-1', 'ok'],
      ['dev-2', 'ok'],
    ]);
    expect(mock.pushes.map((p) => p.document)).toEqual([
      { body: 'Hi', data: { k: 'v', _nid: 'n-1' } },
      { body: 'Hi', data: { k: 'v', _nid: 'n-1' } },
    ]);
    expect(other.pushes[0]!.claims.aud).toBe(other.origin);
    expect(mock.sessionCount).toBe(1);
    expect(other.sessionCount).toBe(1);
  });

  it('sorts the answers: 404/410 invalid, 413 and other 4xx failed with the text, 429/5xx retry with Retry-After', async () => {
    const cases: [number, string, number | undefined, string, string | RegExp][] = [
      [410, 'gone', undefined, 'invalid_token', 'HTTP 410: gone'],
      [404, 'no such subscription', undefined, 'invalid_token', 'HTTP 404: no such subscription'],
      [413, 'payload too large', undefined, 'failed', 'HTTP 413: payload too large'],
      [400, 'bad', undefined, 'failed', 'HTTP 400: bad'],
      [403, 'vapid key mismatch', undefined, 'failed', 'HTTP 403: vapid key mismatch'],
      [429, 'slow down', 7, 'retry', 'HTTP 429: slow down'],
      [503, 'maintenance', undefined, 'retry', 'HTTP 503: maintenance'],
      [301, 'moved', undefined, 'failed', 'HTTP 301: moved'],
    ];
    for (const [status, reason, retryAfter, kind, text] of cases) {
      const t = target();
      mock.faults.forToken(t.token, { type: 'status', status, reason, ...(retryAfter !== undefined && { retryAfter }) });
      const [result] = await gateway().send(push(), [t]);
      expect(result!.outcome, `${status}`).toEqual({
        kind,
        reason: text,
        ...(retryAfter !== undefined && { retryAfterMs: retryAfter * 1000 }),
      });
    }
  });

  it('a connection reset or GOAWAY is a retry, and the next push dials again', async () => {
    const t = target();
    mock.faults.forToken(t.token, { type: 'goaway' }, 1);
    const [first] = await gateway().send(push(), [t]);
    expect(first!.outcome.kind).toBe('retry');
    const g = gateway();
    mock.faults.forToken(t.token, { type: 'reset' }, 1);
    expect((await g.send(push(), [t]))[0]!.outcome.kind).toBe('retry');
    expect((await g.send(push(), [t]))[0]!.outcome.kind).toBe('ok');
  });

  it('a subscription the service does not know (404) or a document too large for one record is never a success', async () => {
    const unknown = { ...target(), token: `${mock.origin}/push/unknown` };
    expect((await gateway().send(push(), [unknown]))[0]!.outcome).toEqual({
      kind: 'invalid_token',
      reason: 'HTTP 404: no such subscription',
    });
    const big = await gateway().send(push({ x: 'a'.repeat(4000) }), [target()]);
    expect(big[0]!.outcome).toEqual({ kind: 'failed', reason: 'PayloadTooLarge' });
    expect(mock.requestCount).toBe(1); // the too-large push was not sent
  });

  it('signs one JWT per origin and reuses it until an hour before it expires', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const g = gateway();
    await g.send(push(), [target()]);
    vi.setSystemTime(Date.now() + 10 * 3600 * 1000); // 10 h later: still 2 h left
    await g.send(push(), [target()]);
    expect(new Set(mock.pushes.map((p) => p.jwt)).size).toBe(1);
    vi.setSystemTime(Date.now() + 1.5 * 3600 * 1000); // 30 min left: a new one
    await g.send(push(), [target()]);
    const jwts = mock.pushes.map((p) => p.jwt);
    expect(new Set(jwts).size).toBe(2);
    expect(mock.pushes[2]!.claims.exp).toBeGreaterThan(mock.pushes[0]!.claims.exp);
  });

  it('checks the endpoint again at send: one outside the push services and the allowed origins is not sent to', async () => {
    const outside = { ...target(), token: 'https://169.254.169.254/latest/meta-data' };
    const narrow = new WebPushGateway({ credentials: vapid, allowedOrigins: [mock.origin] });
    open.push(narrow);
    const results = await narrow.send(push(), [outside, target(other)]);
    expect(results.map((r) => r.outcome)).toEqual([
      { kind: 'failed', reason: 'endpoint_not_allowed: must name a push service, not an IP address' },
      // the other mock: on the loopback address, not in this gateway's list
      { kind: 'failed', reason: 'endpoint_not_allowed: must name a push service, not an IP address' },
    ]);
    expect(other.requestCount).toBe(0);
  });

  it('a stored key that is not a point fails its push only', async () => {
    const bad = { ...target(), keys: { p256dh: Buffer.alloc(65, 4).toString('base64url'), auth: Buffer.alloc(16).toString('base64url') } };
    const results = await gateway().send(push(), [bad, target()]);
    expect(results[0]!.outcome).toEqual({ kind: 'failed', reason: expect.stringMatching(/^cannot encrypt: /) });
    expect(results[1]!.outcome).toEqual({ kind: 'ok' });
  });

  it('the record is the size the POST check counts: header, document, delimiter and tag', () => {
    const doc = Buffer.from(JSON.stringify({ body: 'x'.repeat(300) }));
    const sub = mock.subscribe(vapid.public_key);
    expect(encryptRecord(doc, sub.keys).length).toBe(webPushRecordBytes(doc.length));
  });
});

describe('outcome table, webpush rows', () => {
  it('201 and 202 are ok; a transport error is a retry', () => {
    expect(classify({ gateway: 'webpush', status: 201 }).outcome).toEqual({ kind: 'ok' });
    expect(classify({ gateway: 'webpush', status: 202 }).outcome).toEqual({ kind: 'ok' });
    expect(classify({ gateway: 'webpush', transportError: 'ECONNRESET' }).outcome).toEqual({
      kind: 'retry',
      reason: 'transport: ECONNRESET',
    });
  });
});
