/**
 * The production ApnsGateway (node-apn underneath) against the APNs mock, over real TLS HTTP/2.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ApnsGateway, parseApnsCredentials, type ApnsGatewayOptions } from '../../src/gateways/apns.js';
import type { PushTarget } from '../../src/gateways/types.js';
import { ApnsMock, randomApnsToken } from '../mocks/apns-mock.js';
import { generateApnsKey, type TestApnsKey } from '../mocks/credentials.js';
import { decodeJwt } from '../mocks/jwt.js';
import { requireTestCa } from './tls-guard.js';

const TOPIC = 'com.example.app';
let mock: ApnsMock;
let key: TestApnsKey;
const open: ApnsGateway[] = [];

function gateway(options: Partial<ApnsGatewayOptions> = {}): ApnsGateway {
  const g = new ApnsGateway({ credentials: parseApnsCredentials(key.credentials), topic: TOPIC, origin: mock.origin, ...options });
  open.push(g);
  return g;
}

const targets = (n: number): PushTarget[] => Array.from({ length: n }, (_, i) => ({ deviceId: `dev-${i}`, token: randomApnsToken() }));
const push = (payload: Record<string, unknown> = { alert: 'Hello' }) => ({ notificationId: 'notif-1', payload });
const answersFor = (token: string) => mock.answers.filter((a) => a.token === token);

beforeAll(async () => {
  requireTestCa();
  key = generateApnsKey();
  mock = await ApnsMock.start({ topic: TOPIC });
  mock.addKey(key);
});

afterEach(async () => {
  await Promise.all(open.splice(0).map((g) => g.close()));
  mock.reset();
  mock.tokenMaxAgeSec = 3600;
});

afterAll(async () => {
  await mock.close();
});

describe('ApnsGateway', () => {
  it('delivers to every token and answers one ok per target, in order', async () => {
    const t = targets(10);
    const results = await gateway().send(push({ alert: 'Hello', badge: 1, foo: 'bar' }), t);

    expect(results.map((r) => r.deviceId)).toEqual(t.map((x) => x.deviceId));
    expect(results.every((r) => r.outcome.kind === 'ok')).toBe(true);
    expect(mock.pushes).toHaveLength(10);
    const first = mock.pushes.find((p) => p.token === t[0]?.token);
    expect(first).toMatchObject({
      topic: TOPIC,
      pushType: 'alert',
      priority: 10,
      payload: { aps: { alert: 'Hello', badge: 1 }, foo: 'bar', _nid: 'notif-1' },
    });
    const jwt = decodeJwt(first?.jwt ?? '');
    expect(jwt?.header).toMatchObject({ alg: 'ES256', kid: key.credentials.keyId });
    expect(jwt?.claims).toMatchObject({ iss: key.credentials.teamId });
  });

  it('sends several contents as one send: each target its own, a too-large one refused alone, results in order', async () => {
    const [a, b, c] = [targets(3), targets(2), targets(2)];
    const results = await gateway().sendEach!({ notificationId: 'notif-1' }, [
      { payload: { alert: 'Hi Ana' }, targets: a },
      { payload: { alert: 'x'.repeat(5_000) }, targets: b },
      { payload: { alert: 'Hi Bo' }, targets: c },
    ]);

    expect(results.map((r) => r.deviceId)).toEqual([...a, ...b, ...c].map((x) => x.deviceId));
    expect(results.map((r) => r.outcome.kind)).toEqual(['ok', 'ok', 'ok', 'failed', 'failed', 'ok', 'ok']);
    expect(results[3]!.outcome).toMatchObject({ reason: 'PayloadTooLarge' });
    const alertOf = (t: PushTarget) => (mock.pushes.find((p) => p.token === t.token)?.payload as { aps: { alert: string } }).aps.alert;
    expect([...a, ...c].map(alertOf)).toEqual(['Hi Ana', 'Hi Ana', 'Hi Ana', 'Hi Bo', 'Hi Bo']);
    expect(mock.pushes).toHaveLength(5);
  });

  it('sends the mapped headers: background push, priority 5, collapse id', async () => {
    const [t] = targets(1);
    await gateway().send(push({ content_available: true, collapse_key: 'sync' }), [t!]);
    expect(mock.pushes[0]).toMatchObject({
      pushType: 'background',
      priority: 5,
      collapseId: 'sync',
      payload: { aps: { 'content-available': 1 } },
    });
  });

  it('sends the expiry as apns-expiration and the asked priority; without them, no expiration header', async () => {
    const t = targets(2);
    const expiresAt = new Date(Date.now() + 3_600_500);
    await gateway().send({ ...push({ alert: 'Soon gone' }), expiresAt, priority: 'normal' }, [t[0]!]);
    await gateway().send({ ...push({ alert: 'Urgent' }), expiresAt: null, priority: 'high' }, [t[1]!]);
    const byToken = (token: string) => mock.pushes.find((p) => p.token === token);
    expect(byToken(t[0]!.token)).toMatchObject({ pushType: 'alert', priority: 5, expiration: Math.floor(expiresAt.getTime() / 1000) });
    expect(byToken(t[0]!.token)?.headers['apns-expiration']).toBe(String(Math.floor(expiresAt.getTime() / 1000)));
    expect(byToken(t[1]!.token)).toMatchObject({ priority: 10, expiration: undefined });
    expect(byToken(t[1]!.token)?.headers).not.toHaveProperty('apns-expiration');
  });

  it('keeps a background push at priority 5 when high is asked', async () => {
    const [t] = targets(1);
    await gateway().send({ ...push({ content_available: true }), priority: 'high' }, [t!]);
    expect(mock.pushes[0]).toMatchObject({ pushType: 'background', priority: 5 });
  });

  it('sorts dead tokens into invalid_token and leaves the others ok', async () => {
    const t = targets(4);
    mock.markUnregistered(t[0]!.token);
    mock.markBadToken(t[1]!.token);
    t[2]!.token = 'not-a-hex-token';
    const results = await gateway().send(push(), t);

    expect(results.map((r) => r.outcome)).toEqual([
      { kind: 'invalid_token', reason: 'Unregistered' },
      { kind: 'invalid_token', reason: 'BadDeviceToken' },
      { kind: 'invalid_token', reason: 'BadDeviceToken' },
      { kind: 'ok' },
    ]);
    expect(answersFor('not-a-hex-token')).toHaveLength(0); // refused locally, never put in a URL
  });

  it('answers DeviceTokenNotForTopic as invalid_token', async () => {
    const results = await gateway({ topic: 'com.other.app' }).send(push(), targets(2));
    expect(results.map((r) => r.outcome)).toEqual([
      { kind: 'invalid_token', reason: 'DeviceTokenNotForTopic' },
      { kind: 'invalid_token', reason: 'DeviceTokenNotForTopic' },
    ]);
  });

  it('answers 503 and 429 with retry, without node-apn re-sending on its own', async () => {
    const t = targets(3);
    mock.faults.forToken(t[0]!.token, { type: 'status', status: 503, reason: 'ServiceUnavailable', retryAfter: 7 });
    mock.faults.forToken(t[1]!.token, { type: 'status', status: 429, reason: 'TooManyRequests', retryAfter: 30 });
    const results = await gateway().send(push(), t);

    // node-apn 8 cannot surface Retry-After (see apns.ts), so there is no retryAfterMs: the worker backs off.
    expect(results.map((r) => r.outcome)).toEqual([
      { kind: 'retry', reason: 'ServiceUnavailable' },
      { kind: 'retry', reason: 'TooManyRequests' },
      { kind: 'ok' },
    ]);
    expect(answersFor(t[0]!.token)).toHaveLength(1);
    expect(answersFor(t[1]!.token)).toHaveLength(1);
  });

  it('answers other 4xx with failed and the APNs reason', async () => {
    const [t] = targets(1);
    mock.faults.forToken(t!.token, { type: 'status', status: 400, reason: 'BadCollapseId' });
    expect((await gateway().send(push(), [t!]))[0]?.outcome).toEqual({ kind: 'failed', reason: 'BadCollapseId' });
  });

  it('refuses a payload over 4096 bytes as failed without sending it', async () => {
    const results = await gateway().send(push({ alert: 'x'.repeat(4100) }), targets(3));
    expect(results.map((r) => r.outcome)).toEqual(Array(3).fill({ kind: 'failed', reason: 'PayloadTooLarge' }));
    expect(mock.requestCount).toBe(0);
  });

  it('answers failed InvalidProviderToken when Apple does not know the key', async () => {
    const stranger = generateApnsKey({ teamId: key.credentials.teamId });
    const g = gateway({ credentials: parseApnsCredentials(stranger.credentials) });
    expect((await g.send(push(), targets(1)))[0]?.outcome).toEqual({ kind: 'failed', reason: 'InvalidProviderToken' });
  });

  it('regenerates an expired provider JWT and re-sends, so the pushes still go out', async () => {
    const g = gateway();
    expect((await g.send(push(), targets(1)))[0]?.outcome.kind).toBe('ok');
    const firstJwt = mock.pushes[0]!.jwt;

    mock.tokenMaxAgeSec = 1; // the JWTs minted at start are now too old for the mock
    await sleep(2200);
    const t = targets(20);
    const results = await g.send(push(), t);

    expect(results.every((r) => r.outcome.kind === 'ok')).toBe(true);
    const expired = mock.answers.filter((a) => a.reason === 'ExpiredProviderToken');
    expect(expired.length).toBeGreaterThan(0);
    // One regeneration per connection, not per refused request: at most one fresh JWT per connection opened.
    const fresh = new Set(mock.pushes.slice(1).map((p) => p.jwt));
    expect(fresh.has(firstJwt)).toBe(false);
    expect(fresh.size).toBeLessThanOrEqual(mock.sessionCount);
  }, 10_000);

  it('re-sends once with the regenerated JWT; a second ExpiredProviderToken answers retry', async () => {
    const [t] = targets(1);
    mock.faults.forToken(t!.token, { type: 'status', status: 403, reason: 'ExpiredProviderToken' });
    const results = await gateway().send(push(), [t!]);
    expect(results[0]?.outcome).toEqual({ kind: 'retry', reason: 'ExpiredProviderToken' });
    const answers = answersFor(t!.token);
    expect(answers).toHaveLength(2);
    expect(answers[0]?.jwt).not.toBe(answers[1]?.jwt); // the re-send carried a new JWT
  });

  it('answers retry for streams refused by GOAWAY, then reconnects', async () => {
    const g = gateway({ maxConnections: 1 });
    await g.send(push(), targets(1));
    const sessionsBefore = mock.sessionCount;

    mock.faults.next(1, { type: 'goaway' });
    const t = targets(30);
    const results = await g.send(push(), t);
    expect(results).toHaveLength(30);
    const kinds = new Set(results.map((r) => r.outcome.kind));
    expect([...kinds].every((k) => k === 'ok' || k === 'retry')).toBe(true);
    expect(results.some((r) => r.outcome.kind === 'retry')).toBe(true);

    const again = await g.send(push(), t);
    expect(again.every((r) => r.outcome.kind === 'ok')).toBe(true);
    expect(mock.sessionCount).toBeGreaterThan(sessionsBefore);
  });

  it('answers retry for a reset stream and ok for the rest of the batch', async () => {
    const t = targets(5);
    mock.faults.forToken(t[2]!.token, { type: 'reset' });
    const results = await gateway().send(push(), t);
    expect(results[2]?.outcome).toMatchObject({ kind: 'retry', reason: expect.stringContaining('NGHTTP2_INTERNAL_ERROR') });
    expect(results.filter((r) => r.outcome.kind === 'ok')).toHaveLength(4);
  });

  it('answers retry when APNs does not answer in time', async () => {
    const t = targets(3);
    mock.faults.forToken(t[0]!.token, { type: 'delay', ms: 1500 });
    const results = await gateway({ requestTimeoutMs: 300 }).send(push(), t);
    expect(results[0]?.outcome).toMatchObject({ kind: 'retry', reason: expect.stringContaining('timeout') });
    expect(results.slice(1).every((r) => r.outcome.kind === 'ok')).toBe(true);
  });

  it('answers retry for every token when APNs cannot be reached', async () => {
    const gone = await ApnsMock.start();
    const origin = gone.origin;
    await gone.close();
    const results = await gateway({ origin }).send(push(), targets(5));
    expect(results.every((r) => r.outcome.kind === 'retry')).toBe(true);
  });

  it('sends a 20,000-token burst with all ok and bounded in-flight streams', async () => {
    const t = targets(20_000);
    const started = Date.now();
    const results = await gateway({ maxInFlight: 200 }).send(push({ alert: 'burst' }), t);
    const elapsed = Date.now() - started;

    expect(results).toHaveLength(20_000);
    expect(results.filter((r) => r.outcome.kind !== 'ok')).toEqual([]);
    expect(new Set(mock.pushes.map((p) => p.token)).size).toBe(20_000);
    expect(mock.peakConcurrency).toBeLessThanOrEqual(200);
    expect(mock.sessionCount).toBe(1); // 200 streams fit the 1,000 the mock announces: one long-lived connection
    console.info(`20,000 APNs pushes in ${elapsed} ms, peak ${mock.peakConcurrency} streams`);
  }, 45_000);

  it('opens another connection when those open carry all the streams APNs announces, and no more than allowed', async () => {
    const narrow = await ApnsMock.start({ topic: TOPIC, maxConcurrentStreams: 50 });
    try {
      narrow.addKey(key);
      narrow.faults.sometimes(1, { type: 'delay', ms: 20 }); // a far gateway: streams stay open a while
      const g = gateway({ origin: narrow.origin, maxInFlight: 1000, maxConnections: 3 });
      const results = await g.send(push(), targets(1500));
      expect(results.every((r) => r.outcome.kind === 'ok')).toBe(true);
      expect(narrow.sessionCount).toBe(3);
      expect(narrow.peakConcurrency).toBeGreaterThan(50);
      expect(narrow.peakConcurrency).toBeLessThanOrEqual(150); // 3 connections x 50 streams
    } finally {
      await narrow.close();
    }
  });

  it('shares the in-flight bound across concurrent sends', async () => {
    const g = gateway({ maxInFlight: 20 });
    const results = await Promise.all([g.send(push(), targets(200)), g.send(push(), targets(200))]);
    expect(results.flat().every((r) => r.outcome.kind === 'ok')).toBe(true);
    expect(mock.peakConcurrency).toBeLessThanOrEqual(20);
  });

  it('close() lets in-flight sends finish; later sends answer retry', async () => {
    const g = gateway();
    const t = targets(3);
    mock.faults.forToken(t[0]!.token, { type: 'delay', ms: 300 });
    const inFlight = g.send(push(), t);
    await sleep(50);
    await g.close();
    expect((await inFlight).every((r) => r.outcome.kind === 'ok')).toBe(true);
    expect((await g.send(push(), targets(1)))[0]?.outcome).toEqual({ kind: 'retry', reason: 'gateway closed' });
  });
});
