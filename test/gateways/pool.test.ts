/**
 * GatewayPool: one long-lived gateway per app + platform + environment + credentials, sandbox vs
 * production routing, and the answers for missing or unusable credentials.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GatewayPool, type AppPushCredentials } from '../../src/gateways/pool.js';
import { ApnsMock, randomApnsToken } from '../mocks/apns-mock.js';
import { generateApnsKey, generateServiceAccount, type TestApnsKey, type TestServiceAccount } from '../mocks/credentials.js';
import { FcmMock, randomFcmToken } from '../mocks/fcm-mock.js';
import { requireTestCa } from './tls-guard.js';

const BUNDLE = 'com.example.app';
let production: ApnsMock;
let sandbox: ApnsMock;
let fcm: FcmMock;
let key: TestApnsKey;
let account: TestServiceAccount;
let pool: GatewayPool;

const push = { notificationId: 'notif-9', payload: { alert: 'Hi' } };
const app = (over: Partial<AppPushCredentials> = {}): AppPushCredentials => ({
  id: 'app-1',
  bundleId: BUNDLE,
  apnsCredentials: key.credentials,
  fcmCredentials: account.json,
  ...over,
});

beforeAll(async () => {
  requireTestCa();
  key = generateApnsKey();
  account = generateServiceAccount();
  [production, sandbox, fcm] = await Promise.all([ApnsMock.start(), ApnsMock.start(), FcmMock.start()]);
  production.addKey(key);
  sandbox.addKey(key);
  fcm.addServiceAccount(account);
});

afterEach(async () => {
  await pool?.close();
  for (const m of [production, sandbox, fcm]) m.reset();
});

afterAll(async () => {
  await Promise.all([production.close(), sandbox.close(), fcm.close()]);
});

const newPool = () =>
  (pool = new GatewayPool({
    apnsOriginProduction: production.origin,
    apnsOriginSandbox: sandbox.origin,
    fcmOrigin: fcm.origin,
    googleTokenUrl: fcm.tokenUrl,
  }));

describe('GatewayPool', () => {
  it('routes development devices to the sandbox origin and the others to production', async () => {
    newPool();
    const dev = { deviceId: 'd-dev', token: randomApnsToken() };
    const prod = { deviceId: 'd-prod', token: randomApnsToken() };
    await pool.get(app(), 'ios', 'development').send(push, [dev]);
    await pool.get(app(), 'ios', 'production').send(push, [prod]);

    expect(sandbox.pushes.map((p) => p.token)).toEqual([dev.token]);
    expect(production.pushes.map((p) => p.token)).toEqual([prod.token]);
    expect(production.pushes[0]).toMatchObject({ topic: BUNDLE, payload: { _nid: 'notif-9' } });
  });

  it('uses the topic of the credentials when they have one', async () => {
    newPool();
    await pool
      .get(app({ apnsCredentials: { ...key.credentials, topic: 'com.example.whitelabel' } }), 'ios', 'production')
      .send(push, [{ deviceId: 'd', token: randomApnsToken() }]);
    expect(production.pushes[0]?.topic).toBe('com.example.whitelabel');
  });

  it('reuses one gateway (and its connections) per app, platform and environment', async () => {
    newPool();
    const a = pool.get(app(), 'ios', 'production');
    expect(pool.get(app(), 'ios', 'production')).toBe(a);
    expect(pool.get(app(), 'ios', 'development')).not.toBe(a);
    expect(pool.get(app({ id: 'app-2' }), 'ios', 'production')).not.toBe(a);
    // FCM has one environment
    expect(pool.get(app(), 'android', 'development')).toBe(pool.get(app(), 'android', 'production'));

    await a.send(push, [{ deviceId: 'd1', token: randomApnsToken() }]);
    await pool.get(app(), 'ios', 'production').send(push, [{ deviceId: 'd2', token: randomApnsToken() }]);
    expect(production.sessionCount).toBe(1); // one connection carries both: not one per batch
  });

  it('replaces the gateway when the credentials change and closes the old one', async () => {
    newPool();
    const before = pool.get(app(), 'ios', 'production');
    const rotated = generateApnsKey({ teamId: key.credentials.teamId });
    production.addKey(rotated);
    const after = pool.get(app({ apnsCredentials: rotated.credentials }), 'ios', 'production');
    expect(after).not.toBe(before);

    const [r] = await after.send(push, [{ deviceId: 'd', token: randomApnsToken() }]);
    expect(r?.outcome).toEqual({ kind: 'ok' });
    expect((await before.send(push, [{ deviceId: 'd', token: randomApnsToken() }]))[0]?.outcome).toEqual({
      kind: 'retry',
      reason: 'gateway closed',
    });
  });

  it('sends Android pushes through FCM with the app service account', async () => {
    newPool();
    const t = { deviceId: 'a1', token: randomFcmToken() };
    const [r] = await pool.get(app(), 'android', 'production').send(push, [t]);
    expect(r?.outcome).toEqual({ kind: 'ok' });
    expect(fcm.pushes[0]).toMatchObject({ project: account.json.project_id, token: t.token });
  });

  it('answers failed no_credentials for every token of an app without credentials', async () => {
    newPool();
    const results = await pool.get(app({ apnsCredentials: null }), 'ios', 'production').send(push, [
      { deviceId: 'd1', token: randomApnsToken() },
      { deviceId: 'd2', token: randomApnsToken() },
    ]);
    expect(results).toEqual([
      { deviceId: 'd1', outcome: { kind: 'failed', reason: 'no_credentials' } },
      { deviceId: 'd2', outcome: { kind: 'failed', reason: 'no_credentials' } },
    ]);
    expect(
      (await pool.get(app({ fcmCredentials: undefined }), 'android', 'production').send(push, [{ deviceId: 'a', token: 't' }]))[0]?.outcome,
    ).toEqual({
      kind: 'failed',
      reason: 'no_credentials',
    });
  });

  it('answers failed invalid_credentials when stored credentials are unusable', async () => {
    newPool();
    const [r] = await pool
      .get(app({ apnsCredentials: { ...key.credentials, keyId: 'bad' } }), 'ios', 'production')
      .send(push, [{ deviceId: 'd', token: randomApnsToken() }]);
    expect(r?.outcome).toMatchObject({ kind: 'failed', reason: expect.stringMatching(/^invalid_credentials: APNs keyId/) });
    expect(production.requestCount).toBe(0);
  });

  it('answers failed gateway_misconfigured when a configured origin is unusable', async () => {
    pool = new GatewayPool({
      apnsOriginProduction: 'http://127.0.0.1:1',
      apnsOriginSandbox: sandbox.origin,
      fcmOrigin: fcm.origin,
      googleTokenUrl: fcm.tokenUrl,
    });
    const [r] = await pool.get(app(), 'ios', 'production').send(push, [{ deviceId: 'd', token: randomApnsToken() }]);
    expect(r?.outcome).toMatchObject({
      kind: 'failed',
      reason: expect.stringMatching(/^gateway_misconfigured: APNs origin must be https/),
    });
  });

  it('after close() hands out gateways that answer retry', async () => {
    newPool();
    await pool.close();
    const [r] = await pool.get(app(), 'ios', 'production').send(push, [{ deviceId: 'd', token: randomApnsToken() }]);
    expect(r?.outcome).toEqual({ kind: 'retry', reason: 'gateway pool closed' });
  });
});
