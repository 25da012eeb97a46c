/**
 * Gateways in worker threads (GATEWAY_THREADS >= 1): the same pool, reached
 * through messages, against the APNs and FCM mocks over real TLS HTTP/2.
 */
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AppPushCredentials } from '../../src/gateways/pool.js';
import { parseApnsCredentials, parseFcmServiceAccount } from '../../src/domain/credentials.js';
import type { PushTarget } from '../../src/gateways/types.js';
import { createLogger } from '../../src/platform/logger.js';
import { GatewayThreads } from '../../src/gateways/runtime/threads.js';
import { GATEWAY_THREAD_ENTRY } from '../helpers/gateway-thread.js';
import { ApnsMock, randomApnsToken } from '../mocks/apns-mock.js';
import { generateApnsKey, generateServiceAccount, type TestApnsKey, type TestServiceAccount } from '../mocks/credentials.js';
import { FcmMock, randomFcmToken } from '../mocks/fcm-mock.js';
import { requireTestCa } from './tls-guard.js';

const TOPIC = 'com.example.threads';
let apns: ApnsMock;
let fcm: FcmMock;
let key: TestApnsKey;
let account: TestServiceAccount;

const push = { notificationId: 'notif-threads', payload: { alert: 'Hello', badge: 2 } };
const apnsTargets = (n: number): PushTarget[] => Array.from({ length: n }, (_, i) => ({ deviceId: `ios-${i}`, token: randomApnsToken() }));
const fcmTargets = (n: number): PushTarget[] =>
  Array.from({ length: n }, (_, i) => ({ deviceId: `android-${i}`, token: randomFcmToken() }));

function threads(count = 2): GatewayThreads {
  return new GatewayThreads(
    count,
    {
      pool: { apnsOriginProduction: apns.origin, apnsOriginSandbox: apns.origin, fcmOrigin: fcm.origin, googleTokenUrl: fcm.tokenUrl },
      logLevel: 'silent',
    },
    createLogger('silent'),
    { entry: GATEWAY_THREAD_ENTRY, closeTimeoutMs: 25_000 },
  );
}

function app(withCredentials = true): AppPushCredentials {
  return {
    id: `app-${Math.random()}`,
    bundleId: TOPIC,
    apnsCredentials: withCredentials ? { ...parseApnsCredentials(key.credentials) } : null,
    fcmCredentials: withCredentials ? { ...parseFcmServiceAccount(account.json) } : null,
  };
}

beforeAll(async () => {
  requireTestCa();
  key = generateApnsKey();
  account = generateServiceAccount({ projectId: 'pushd-threads' });
  apns = await ApnsMock.start({ topic: TOPIC });
  apns.addKey(key);
  fcm = await FcmMock.start();
  fcm.addServiceAccount(account);
});

afterAll(async () => {
  await Promise.all([apns.close(), fcm.close()]);
});

describe('GatewayThreads', () => {
  it('delivers through the thread and answers one result per target, in order, with the mapped payloads', async () => {
    const t = threads();
    try {
      const a = app();
      const ios = apnsTargets(30);
      const android = fcmTargets(30);
      const [iosResults, androidResults] = await Promise.all([
        t.get(a, 'ios', 'production').send(push, ios),
        t.get(a, 'android', 'production').send(push, android),
      ]);
      expect(iosResults.map((r) => r.deviceId)).toEqual(ios.map((x) => x.deviceId));
      expect(androidResults.map((r) => r.deviceId)).toEqual(android.map((x) => x.deviceId));
      expect([...iosResults, ...androidResults].every((r) => r.outcome.kind === 'ok')).toBe(true);

      expect(new Set(apns.pushes.map((p) => p.token))).toEqual(new Set(ios.map((x) => x.token)));
      expect(apns.pushes[0]).toMatchObject({ topic: TOPIC, payload: { aps: { alert: 'Hello', badge: 2 }, _nid: 'notif-threads' } });
      expect(new Set(fcm.pushes.map((p) => p.token))).toEqual(new Set(android.map((x) => x.token)));
      expect(fcm.pushes[0]?.message).toMatchObject({ data: { _nid: 'notif-threads' }, android: { notification: { body: 'Hello' } } });
    } finally {
      await t.close();
      apns.reset();
      fcm.reset();
    }
  });

  it('keeps one long-lived connection per gateway across sends', async () => {
    const t = threads();
    try {
      const a = app();
      await t.get(a, 'android', 'production').send(push, fcmTargets(5));
      const sessions = fcm.sessionCount;
      for (let i = 0; i < 3; i++) await t.get(a, 'android', 'production').send(push, fcmTargets(5));
      expect(fcm.sessionCount).toBe(sessions);
    } finally {
      await t.close();
      fcm.reset();
    }
  });

  it('answers no_credentials for an app without credentials, without retrying', async () => {
    const t = threads(1);
    try {
      const results = await t.get(app(false), 'ios', 'production').send(push, apnsTargets(3));
      expect(results.map((r) => r.outcome)).toEqual(Array(3).fill({ kind: 'failed', reason: 'no_credentials' }));
      expect(apns.pushes).toHaveLength(0);
    } finally {
      await t.close();
    }
  });

  it('close() lets in-flight sends finish; sends after it answer retry', async () => {
    const t = threads(1);
    const a = app();
    const targets = fcmTargets(3);
    fcm.faults.forToken(targets[0]!.token, { type: 'delay', ms: 400 });
    const inFlight = t.get(a, 'android', 'production').send(push, targets);
    await new Promise((r) => setTimeout(r, 100));
    const closing = t.close();
    const late = await t.get(a, 'android', 'production').send(push, fcmTargets(2));
    expect(late.every((r) => r.outcome.kind === 'retry')).toBe(true);
    expect((await inFlight).every((r) => r.outcome.kind === 'ok')).toBe(true);
    await closing;
    fcm.reset();
  });

  it("posts an app's credentials to its thread once per change, not with every send", async () => {
    const posted = vi.spyOn(Worker.prototype, 'postMessage');
    const t = threads(1);
    try {
      const a = app();
      const results = [];
      for (let i = 0; i < 5; i++) results.push(...(await t.get(a, 'ios', 'production').send(push, apnsTargets(1))));
      // a change is a new object from the credentials lookup
      const changed = { ...a, apnsCredentials: { ...(a.apnsCredentials as object) } };
      for (let i = 0; i < 3; i++) results.push(...(await t.get(changed, 'android', 'production').send(push, fcmTargets(1))));
      expect(results.map((r) => r.outcome.kind)).toEqual(Array(8).fill('ok'));
      const messages = posted.mock.calls.map(([m]) => m as { type: string; app?: unknown });
      expect(messages.filter((m) => m.type === 'send')).toHaveLength(8);
      expect(messages.filter((m) => m.app !== undefined).map((m) => m.app)).toEqual([a, changed]);
    } finally {
      posted.mockRestore();
      await t.close();
    }
  });
});
