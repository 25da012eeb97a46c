/**
 * The production HmsGateway against the Push Kit mock over real TLS HTTP/2: requests of at most 1,000 tokens, every
 * HMS code sorted by the outcome table, the access token shared by the requests and a refused grant answered once.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HmsGateway } from '../../src/gateways/hms.js';
import type { PushTarget } from '../../src/gateways/types.js';
import { HmsMock } from '../mocks/hms-mock.js';
import { requireTestCa } from './tls-guard.js';

let mock: HmsMock;
const open: HmsGateway[] = [];
const APP = '10000002';

const gateway = (clientSecret = 'the-client-secret') => {
  const g = new HmsGateway({
    credentials: { app_id: APP, client_secret: clientSecret },
    origin: mock.origin,
    tokenUrl: mock.tokenUrl,
    requestTimeoutMs: 2000,
  });
  open.push(g);
  return g;
};
const targets = (n: number): PushTarget[] =>
  Array.from({ length: n }, (_, i) => ({ deviceId: `dev-${i}`, token: `IQAAAA${randomBytes(40).toString('base64url')}` }));
const push = (payload: Record<string, unknown> = { alert: 'Hello' }) => ({ notificationId: 'n-1', payload });

beforeAll(async () => {
  requireTestCa();
  mock = await HmsMock.start();
  mock.addApp(APP, 'the-client-secret');
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((g) => g.close()));
  mock.reset();
});
afterAll(() => mock.close());

describe('HmsGateway', () => {
  it('sends 2,500 tokens as requests of 1,000, 1,000 and 500 under one access token; one ok per target, in order', async () => {
    const all = targets(2500);
    const results = await gateway().send(push(), all);
    expect(results.map((r) => r.deviceId)).toEqual(all.map((t) => t.deviceId));
    expect(results.every((r) => r.outcome.kind === 'ok')).toBe(true);
    expect(mock.requests.map((r) => r.message.token.length).sort((a, b) => b - a)).toEqual([1000, 1000, 500]);
    expect(new Set(mock.requests.flatMap((r) => r.message.token))).toEqual(new Set(all.map((t) => t.token)));
    expect(mock.tokenRequests).toBe(1);
  });

  it('80300007 invalidates every token of the request; 80100000 only those it names', async () => {
    const dead = targets(2);
    for (const t of dead) mock.markIllegal(t.token);
    const all = await gateway().send(push(), dead);
    expect(all.map((r) => r.outcome)).toEqual([
      { kind: 'invalid_token', reason: '80300007: All the tokens are invalid' },
      { kind: 'invalid_token', reason: '80300007: All the tokens are invalid' },
    ]);
    const mixed = [...targets(1), dead[0]!, ...targets(1)];
    const some = await gateway().send(push(), mixed);
    expect(some.map((r) => r.outcome.kind)).toEqual(['ok', 'invalid_token', 'ok']);
  });

  it('a refused grant (wrong client secret) fails every target with one token request, and sends nothing', async () => {
    const results = await gateway('not-the-secret').send(push(), targets(3));
    expect(results.map((r) => r.outcome)).toEqual(Array(3).fill({ kind: 'failed', reason: 'oauth 1101' }));
    expect(mock.tokenRequests).toBe(1);
    expect(mock.requests).toEqual([]);
  });

  it('a message over 4,096 bytes fails as 80300008 without a request; an unknown code fails with HMS msg', async () => {
    const big = await gateway().send(push({ alert: 'a', blob: 'x'.repeat(4100) }), targets(1));
    expect(big[0]!.outcome).toEqual({ kind: 'failed', reason: expect.stringMatching(/^80300008: message of \d+ bytes/) });
    expect(mock.requests).toEqual([]);
    mock.faults.next(1, { type: 'status', status: 400, reason: '80100016' });
    const refused = await gateway().send(push(), targets(1));
    expect(refused[0]!.outcome).toEqual({ kind: 'failed', reason: '80100016: injected 80100016' });
  });

  it('answers retry, with Retry-After, for 429 and a transport reset', async () => {
    mock.faults.next(1, { type: 'status', status: 429, reason: '80200001', retryAfter: 7 });
    const limited = await gateway().send(push(), targets(1));
    expect(limited[0]!.outcome).toMatchObject({ kind: 'retry', retryAfterMs: 7000 });
    mock.faults.next(1, { type: 'reset' });
    const reset = await gateway().send(push(), targets(1));
    expect(reset[0]!.outcome.kind).toBe('retry');
  });
});
