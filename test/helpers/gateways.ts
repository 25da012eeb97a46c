import { ApnsMock, FcmMock, generateApnsKey, generateServiceAccount, randomApnsToken, randomFcmToken } from '../mocks/index.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { NotificationsRepository } from '../../src/db/repositories/notifications.js';
import type { Db } from '../../src/db/database.js';
import { afterAll, beforeAll } from 'vitest';
import type { Harness } from './harness.js';
import { basic, createHarness } from './harness.js';

/** Mock APNs (production and sandbox, told apart by origin) and FCM with its OAuth endpoint. */
export async function startGateways() {
  const apnsKey = generateApnsKey();
  const serviceAccount = generateServiceAccount();
  const apns = await ApnsMock.start();
  const sandbox = await ApnsMock.start();
  const fcm = await FcmMock.start();
  apns.addKey(apnsKey);
  sandbox.addKey(apnsKey);
  fcm.addServiceAccount(serviceAccount);
  return {
    apns,
    sandbox,
    fcm,
    apnsKey,
    serviceAccount,
    /** The config that points the production gateways at the mocks. */
    env: {
      APNS_ORIGIN_PRODUCTION: apns.origin,
      APNS_ORIGIN_SANDBOX: sandbox.origin,
      FCM_ORIGIN: fcm.origin,
      GOOGLE_TOKEN_URL: fcm.tokenUrl,
    },
    reset() {
      apns.reset();
      sandbox.reset();
      fcm.reset();
    },
    async close() {
      await Promise.all([apns.close(), sandbox.close(), fcm.close()]);
    },
  };
}
export type Gateways = Awaited<ReturnType<typeof startGateways>>;

/**
 * Mock gateways and a harness whose production gateways point at them (`env` added to its settings), started before
 * the file's tests and closed after them: `useHarness` with its own mocks.
 */
export function useGatewaysHarness(env: Record<string, string> = {}): { h: Harness; gw: Gateways } {
  let gw: Gateways | undefined;
  let h: Harness | undefined;
  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ env: { ...gw.env, ...env } });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });
  const late = <T extends object>(get: () => T | undefined) =>
    new Proxy({} as T, {
      get(_target, key) {
        const value = get();
        if (!value) throw new Error('used before its beforeAll ran');
        const member = value[key as keyof T];
        return typeof member === 'function' ? member.bind(value) : member;
      },
    });
  return { h: late(() => h), gw: late(() => gw) };
}

/** Stores both credentials the way `app set-apns` / `app set-fcm` do (same parsers). */
export async function setCredentials(
  h: Harness,
  appId: string,
  gw: Gateways,
  which: { apns?: boolean; fcm?: boolean } = { apns: true, fcm: true },
) {
  const apps = new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() });
  if (which.apns) await apps.setPushCredentials(appId, 'apns', gw.apnsKey.credentials);
  if (which.fcm) await apps.setPushCredentials(appId, 'fcm', gw.serviceAccount.json);
}

export interface RegisteredDevice {
  id: string;
  token: string;
  platform: 'ios' | 'android';
  development: boolean;
}

/** Registers a device through the public device API with the app's sdk key. */
export async function registerDevice(
  h: Harness,
  sdkKey: string,
  device: Record<string, unknown> & { platform: 'ios' | 'android' },
): Promise<RegisteredDevice> {
  const token = (device.token as string | undefined) ?? (device.platform === 'ios' ? randomApnsToken() : randomFcmToken());
  const res = await h.server.inject({
    method: 'POST',
    url: '/v6/devices',
    headers: { authorization: basic(sdkKey) },
    payload: { device: { ...device, token } },
  });
  if (res.statusCode !== 201 && res.statusCode !== 200) throw new Error(`device registration failed: ${res.statusCode} ${res.body}`);
  return { id: res.json().device.id, token, platform: device.platform, development: device.development === true };
}

export { waitFor } from '../engines/engines.js';

/**
 * A notification's state and counters as the API reads them: the counters are sums of its batches and fan-out
 * ranges (`NotificationsRepository.withCounters`), not its row's columns.
 */
export async function storedNotification(db: Db, id: string) {
  const repo = new NotificationsRepository();
  const n = await repo.findById(db, id);
  if (!n) throw new Error(`no notification ${id}`);
  return (await repo.withCounters(db, [n]))[0]!;
}
