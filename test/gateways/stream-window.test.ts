/**
 * Where a broadcast's stream window starts, seen from a real HTTP/2 gateway (the FCM mock over TLS): one-device
 * sends answered at once, then a broadcast the gateway answers far later, as in `bench/outside`.
 */
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FcmGateway, parseFcmServiceAccount } from '../../src/gateways/fcm.js';
import type { PushTarget } from '../../src/gateways/types.js';
import { generateServiceAccount, type TestServiceAccount } from '../mocks/credentials.js';
import { FcmMock, randomFcmToken } from '../mocks/fcm-mock.js';
import { requireTestCa } from './tls-guard.js';

let mock: FcmMock;
let account: TestServiceAccount;
const open: FcmGateway[] = [];

const targets = (n: number): PushTarget[] => Array.from({ length: n }, (_, i) => ({ deviceId: `dev-${i}`, token: randomFcmToken() }));
const push = { notificationId: 'notif-1', payload: { alert: 'Hello' } };

function gateway(limits: { maxConnections: number; maxInFlight: number }): FcmGateway {
  const g = new FcmGateway({
    serviceAccount: parseFcmServiceAccount(account.json),
    origin: mock.origin,
    tokenUrl: mock.tokenUrl,
    ...limits,
  });
  open.push(g);
  return g;
}

/**
 * Sends a broadcast the gateway answers `delayMs` late; resolves with the requests it had received at its first answer.
 * The delay is long because the mock shares this process: on a busy machine it reads a thousand requests in a second.
 */
async function streamsBeforeFirstAnswer(g: FcmGateway, devices: number, delayMs: number): Promise<number> {
  mock.resetStats();
  mock.faults.sometimes(1, { type: 'delay', ms: delayMs });
  let atFirstAnswer: number | undefined;
  mock.onAccept = () => void (atFirstAnswer ??= mock.requestCount);
  const results = await g.send(push, targets(devices));
  mock.onAccept = undefined;
  mock.faults.clear();
  expect(results.every((r) => r.outcome.kind === 'ok')).toBe(true);
  return atFirstAnswer!;
}

beforeAll(() => {
  requireTestCa();
  account = generateServiceAccount({ projectId: 'pushd-window-test' });
});

// a mock of its own each test: what a gateway's window was is remembered by origin for the process
beforeEach(async () => {
  mock = await FcmMock.start({ record: false });
  mock.addServiceAccount(account);
});

afterEach(async () => {
  await Promise.all(open.splice(0).map((g) => g.close()));
  await mock.close();
});

describe('the stream window at a broadcast', () => {
  it('the first broadcast after one-device sends opens the streams the gateway offers, not the floor of 200', async () => {
    // the mock announces 1,000 streams a connection: 2 connections offer 2,000, within maxInFlight 2,500
    const g = gateway({ maxConnections: 2, maxInFlight: 2500 });
    for (let i = 0; i < 20; i++) await g.send(push, targets(1));
    expect(await streamsBeforeFirstAnswer(g, 2500, 2000)).toBe(2000);
  });

  it('opens no more than maxInFlight, however many streams the gateway offers', async () => {
    const g = gateway({ maxConnections: 4, maxInFlight: 1500 });
    for (let i = 0; i < 20; i++) await g.send(push, targets(1));
    expect(await streamsBeforeFirstAnswer(g, 2500, 2000)).toBe(1500);
  });
});
