/**
 * The production FcmGateway (own HTTP/2 client + service-account OAuth) against the FCM mock and its
 * OAuth endpoint, over real TLS.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FcmGateway, parseFcmServiceAccount, type FcmGatewayOptions } from '../../src/gateways/fcm.js';
import type { PushTarget } from '../../src/gateways/types.js';
import { generateServiceAccount, type TestServiceAccount } from '../mocks/credentials.js';
import { FcmMock, randomFcmToken } from '../mocks/fcm-mock.js';
import { requireTestCa } from './tls-guard.js';

let mock: FcmMock;
let account: TestServiceAccount;
const open: FcmGateway[] = [];

function gateway(options: Partial<FcmGatewayOptions> = {}): FcmGateway {
  const g = new FcmGateway({
    serviceAccount: parseFcmServiceAccount(account.json),
    origin: mock.origin,
    tokenUrl: mock.tokenUrl,
    ...options,
  });
  open.push(g);
  return g;
}

const targets = (n: number): PushTarget[] => Array.from({ length: n }, (_, i) => ({ deviceId: `dev-${i}`, token: randomFcmToken() }));
const push = (payload: Record<string, unknown> = { alert: 'Hello' }) => ({ notificationId: 'notif-1', payload });

beforeAll(async () => {
  requireTestCa();
  account = generateServiceAccount({ projectId: 'pushd-fcm-test' });
  mock = await FcmMock.start();
  mock.addServiceAccount(account);
});

afterEach(async () => {
  await Promise.all(open.splice(0).map((g) => g.close()));
  mock.reset();
  mock.accessTokenTtlSec = 3599;
});

afterAll(async () => {
  await mock.close();
});

describe('FcmGateway', () => {
  it('delivers a v1 message per token, one ok per target, in order', async () => {
    const t = targets(5);
    const results = await gateway().send(
      push({ alert: 'Body', title: 'Title', badge: 2, category: 'REPLY', collapse_key: 'score', _channel_id: 'news', _st: { mid: 'm1' } }),
      t,
    );

    expect(results.map((r) => r.deviceId)).toEqual(t.map((x) => x.deviceId));
    expect(results.every((r) => r.outcome.kind === 'ok')).toBe(true);
    const sent = mock.pushes.find((p) => p.token === t[0]?.token);
    expect(sent?.project).toBe('pushd-fcm-test');
    expect(sent?.message).toEqual({
      token: t[0]?.token,
      data: { alert: 'Body', title: 'Title', badge: '2', category: 'REPLY', _st: '{"mid":"m1"}', _nid: 'notif-1' },
      android: {
        priority: 'HIGH',
        collapse_key: 'score',
        notification: { title: 'Title', body: 'Body', channel_id: 'news', tag: 'score', click_action: 'REPLY' },
      },
    });
  });

  it('sends several contents as one send: each target its own, results in order', async () => {
    const [a, b] = [targets(3), targets(2)];
    const results = await gateway().sendEach!({ notificationId: 'notif-1' }, [
      { payload: { alert: 'Hi Ana' }, targets: a },
      { payload: { alert: 'Hi Bo' }, targets: b },
    ]);

    expect(results.map((r) => r.deviceId)).toEqual([...a, ...b].map((x) => x.deviceId));
    expect(results.every((r) => r.outcome.kind === 'ok')).toBe(true);
    const alertOf = (t: PushTarget) => (mock.pushes.find((p) => p.token === t.token)?.message.data as { alert?: string })?.alert;
    expect([...a, ...b].map(alertOf)).toEqual(['Hi Ana', 'Hi Ana', 'Hi Ana', 'Hi Bo', 'Hi Bo']);
  });

  it('sends android.ttl as the seconds left and the asked priority; without them, no ttl and the default priority', async () => {
    const t = targets(3);
    const expiresAt = new Date(Date.now() + 600_000);
    await gateway().send({ ...push({ alert: 'Soon gone' }), expiresAt, priority: 'normal' }, [t[0]!]);
    await gateway().send({ ...push({ foo: 'data only' }), priority: 'high' }, [t[1]!]);
    await gateway().send(push({ foo: 'data only' }), [t[2]!]);
    const android = (token: string) =>
      (mock.pushes.find((p) => p.token === token)?.message as { android: Record<string, unknown> }).android;
    const first = android(t[0]!.token);
    expect(first.priority).toBe('NORMAL');
    expect(first.ttl).toMatch(/^\d+s$/);
    // sent at once: 600 s left, less the moments the send took
    expect(parseInt(first.ttl as string, 10)).toBeGreaterThanOrEqual(590);
    expect(parseInt(first.ttl as string, 10)).toBeLessThanOrEqual(600);
    expect(android(t[1]!.token)).toEqual({ priority: 'HIGH' });
    expect(android(t[2]!.token)).toEqual({ priority: 'NORMAL' });
  });

  it('counts android.ttl down to 0s as the expiry comes, never below', async () => {
    const [t] = targets(1);
    await gateway().send({ ...push(), expiresAt: new Date(Date.now() - 5000) }, [t!]);
    expect((mock.pushes[0]?.message as { android: { ttl: string } }).android.ttl).toBe('0s');
  });

  it('fetches one OAuth token from the token endpoint and reuses it across sends', async () => {
    const g = gateway();
    await g.send(push(), targets(20));
    await g.send(push(), targets(20));
    expect(mock.tokenRequests).toBe(1);
    expect(new Set(mock.answers.map((a) => a.accessToken)).size).toBe(1);
    expect(mock.sessionCount).toBe(1); // and one long-lived HTTP/2 connection
  });

  it('renews the OAuth token before it expires', async () => {
    mock.accessTokenTtlSec = 2; // renewed at half-life for short-lived tokens
    const g = gateway();
    await g.send(push(), targets(1));
    await sleep(1200);
    const results = await g.send(push(), targets(3));
    expect(results.every((r) => r.outcome.kind === 'ok')).toBe(true);
    expect(mock.tokenRequests).toBe(2);
  });

  it('on 401 renews the token once for the whole batch and re-sends', async () => {
    const g = gateway();
    await g.send(push(), targets(1));
    mock.revokeAccessTokens();
    const results = await g.send(push(), targets(30));
    expect(results.every((r) => r.outcome.kind === 'ok')).toBe(true);
    expect(mock.tokenRequests).toBe(2);
  });

  it('sorts UNREGISTERED and invalid registration tokens into invalid_token', async () => {
    const t = targets(3);
    mock.markUnregistered(t[0]!.token);
    mock.markInvalid(t[1]!.token);
    const results = await gateway().send(push(), t);
    expect(results.map((r) => r.outcome)).toEqual([
      { kind: 'invalid_token', reason: 'UNREGISTERED' },
      { kind: 'invalid_token', reason: 'INVALID_ARGUMENT' },
      { kind: 'ok' },
    ]);
  });

  it('answers failed (token kept) for INVALID_ARGUMENT about the message, and for SENDER_ID_MISMATCH', async () => {
    const t = targets(2);
    mock.faults.forToken(t[0]!.token, { type: 'status', status: 400, reason: 'INVALID_ARGUMENT' });
    mock.faults.forToken(t[1]!.token, { type: 'status', status: 403, reason: 'SENDER_ID_MISMATCH' });
    const results = await gateway().send(push(), t);
    expect(results.map((r) => r.outcome)).toEqual([
      { kind: 'failed', reason: 'INVALID_ARGUMENT' },
      { kind: 'failed', reason: 'SENDER_ID_MISMATCH' },
    ]);
  });

  it('answers 429 and 503 with retry and the Retry-After delay', async () => {
    const t = targets(3);
    mock.faults.forToken(t[0]!.token, { type: 'status', status: 429, reason: 'QUOTA_EXCEEDED', retryAfter: 30 });
    const at = new Date(Date.now() + 120_000).toUTCString();
    mock.faults.forToken(t[1]!.token, { type: 'status', status: 503, reason: 'UNAVAILABLE', retryAfter: at });
    const results = await gateway().send(push(), t);

    expect(results[0]?.outcome).toEqual({ kind: 'retry', reason: 'QUOTA_EXCEEDED', retryAfterMs: 30_000 });
    expect(results[1]?.outcome).toMatchObject({ kind: 'retry', reason: 'UNAVAILABLE' });
    const ms = (results[1]?.outcome as { retryAfterMs?: number }).retryAfterMs ?? 0;
    expect(ms).toBeGreaterThan(110_000);
    expect(ms).toBeLessThanOrEqual(120_000);
    expect(results[2]?.outcome).toEqual({ kind: 'ok' });
  });

  it('answers 500 INTERNAL with retry', async () => {
    const [t] = targets(1);
    mock.faults.forToken(t!.token, { type: 'status', status: 500, reason: 'INTERNAL' });
    expect((await gateway().send(push(), [t!]))[0]?.outcome).toEqual({ kind: 'retry', reason: 'INTERNAL' });
  });

  it('answers retry for streams refused by GOAWAY, then reconnects', async () => {
    const g = gateway({ maxInFlight: 10 });
    await g.send(push(), targets(1));
    mock.faults.next(1, { type: 'goaway' });
    const t = targets(30);
    const results = await g.send(push(), t);
    expect(results.every((r) => r.outcome.kind === 'ok' || r.outcome.kind === 'retry')).toBe(true);
    expect(results.some((r) => r.outcome.kind === 'retry')).toBe(true);

    const again = await g.send(push(), t);
    expect(again.every((r) => r.outcome.kind === 'ok')).toBe(true);
    expect(mock.sessionCount).toBe(2);
  });

  it('answers retry for a reset stream and a timed-out request', async () => {
    const t = targets(3);
    mock.faults.forToken(t[0]!.token, { type: 'reset' });
    mock.faults.forToken(t[1]!.token, { type: 'delay', ms: 1500 });
    const results = await gateway({ requestTimeoutMs: 300 }).send(push(), t);
    expect(results[0]?.outcome).toMatchObject({ kind: 'retry', reason: expect.stringContaining('NGHTTP2_INTERNAL_ERROR') });
    expect(results[1]?.outcome).toMatchObject({ kind: 'retry', reason: expect.stringContaining('timeout') });
    expect(results[2]?.outcome).toEqual({ kind: 'ok' });
  });

  it('answers retry for the whole batch when the token endpoint is unavailable, without sending', async () => {
    mock.tokenFaults.next(1, { type: 'status', status: 503, reason: 'temporarily_unavailable', retryAfter: 5 });
    const results = await gateway().send(push(), targets(50));
    expect(results).toHaveLength(50);
    expect(
      results.every(
        (r) => JSON.stringify(r.outcome) === JSON.stringify({ kind: 'retry', reason: 'oauth temporarily_unavailable', retryAfterMs: 5000 }),
      ),
    ).toBe(true);
    expect(mock.tokenRequests).toBe(1);
    expect(mock.pushes).toHaveLength(0);
  });

  it('answers failed for the whole batch when Google refuses the service account', async () => {
    const stranger = generateServiceAccount({ projectId: 'pushd-fcm-test' }); // never registered with the mock
    const g = gateway({ serviceAccount: parseFcmServiceAccount(stranger.json) });
    const results = await g.send(push(), targets(3));
    expect(results.map((r) => r.outcome)).toEqual(Array(3).fill({ kind: 'failed', reason: 'oauth invalid_grant' }));
  });

  it('answers retry for every token when FCM cannot be reached', async () => {
    const gone = await FcmMock.start();
    const origin = gone.origin;
    await gone.close();
    const results = await gateway({ origin }).send(push(), targets(5));
    expect(results.every((r) => r.outcome.kind === 'retry')).toBe(true);
  });

  it('opens another connection when those open carry all the streams FCM announces, and no more than allowed', async () => {
    const narrow = await FcmMock.start({ maxConcurrentStreams: 40 });
    try {
      narrow.addServiceAccount(account);
      narrow.faults.sometimes(1, { type: 'delay', ms: 20 });
      const g = gateway({ origin: narrow.origin, tokenUrl: narrow.tokenUrl, maxInFlight: 1000, maxConnections: 2 });
      const results = await g.send(push(), targets(600));
      expect(results.every((r) => r.outcome.kind === 'ok')).toBe(true);
      expect(narrow.sessionCount).toBe(2);
      expect(narrow.peakConcurrency).toBeGreaterThan(40);
      expect(narrow.peakConcurrency).toBeLessThanOrEqual(80);
    } finally {
      await narrow.close();
    }
  });

  it('keeps at most maxInFlight streams open, across concurrent sends', async () => {
    const g = gateway({ maxInFlight: 25 });
    const results = await Promise.all([g.send(push(), targets(1000)), g.send(push(), targets(1000))]);
    expect(results.flat().every((r) => r.outcome.kind === 'ok')).toBe(true);
    expect(mock.peakConcurrency).toBeLessThanOrEqual(25);
    expect(mock.pushes).toHaveLength(2000);
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
