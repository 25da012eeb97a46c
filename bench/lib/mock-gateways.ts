import { fork, type ChildProcess } from 'node:child_process';
import { ApnsMock, FcmMock, generateApnsKey, generateServiceAccount, type TestServiceAccount } from '../../test/mocks/index.js';

/** Where a benchmark's mock gateways listen, and the credentials they accept. */
export interface GatewayEndpoints {
  apnsOrigin: string;
  fcmOrigin: string;
  fcmTokenUrl: string;
  apnsCredentials: { keyPem: string; keyId: string; teamId: string };
  serviceAccount: TestServiceAccount['json'];
}

/** What a benchmark asks of its mock gateways: the pushes they accepted, per device token. */
export interface MockGateways extends GatewayEndpoints {
  /** the process they run in: null when it is the benchmark's own */
  pid: number | null;
  /**
   * pushes accepted since the last reset, when the first and the last came (epoch ms), and the most requests each
   * gateway (APNs, FCM) had in flight at once: the window a client kept open
   */
  received(): Promise<{ count: number; firstAtEpochMs: number; lastAtEpochMs: number; peakInFlight: [number, number] }>;
  reset(): Promise<void>;
  /** of these tokens, how many got no push and how many got more than one since the last reset */
  tally(tokens: string[]): Promise<{ missed: number; twice: number }>;
  /** every push answered `ms` late, as a far data centre does */
  delay(ms: number): Promise<void>;
  /** since the last reset: tokens pushed at least once, and more than once (every token, however many) */
  summary(): Promise<{ distinct: number; twice: number }>;
  /** records when these tokens' first push arrives from now on (epoch ms), read by `arrivals` */
  watch(tokens: string[]): Promise<void>;
  arrivals(tokens: string[]): Promise<(number | null)[]>;
  close(): Promise<void>;
}

/** The requests the mocks' process answers (mock-gateways-process.ts), and the handler both kinds share. */
export type MockRequest =
  | { op: 'received' }
  | { op: 'reset' }
  | { op: 'tally'; tokens: string[] }
  | { op: 'delay'; ms: number }
  | { op: 'summary' }
  | { op: 'watch'; tokens: string[] }
  | { op: 'arrivals'; tokens: string[] };

/** Starts the APNs and FCM mocks in this process, APNs for these topics; `answer` serves the MockRequests about them. */
export async function startMocks(topic: string | string[]) {
  const apnsKey = generateApnsKey();
  const serviceAccount = generateServiceAccount();
  const apns = await ApnsMock.start({ record: false, topic });
  const fcm = await FcmMock.start({ record: false });
  apns.addKey(apnsKey);
  fcm.addServiceAccount(serviceAccount);
  const counts = new Map<string, number>();
  let count = 0;
  let firstAtEpochMs = 0;
  let lastAtEpochMs = 0;
  // only the watched tokens' arrival times are kept: a broadcast's million are counted, not timed
  const arrivedAt = new Map<string, number | null>();
  apns.onAccept = fcm.onAccept = (token: string) => {
    counts.set(token, (counts.get(token) ?? 0) + 1);
    count += 1;
    lastAtEpochMs = performance.timeOrigin + performance.now();
    if (count === 1) firstAtEpochMs = lastAtEpochMs;
    if (arrivedAt.get(token) === null) arrivedAt.set(token, lastAtEpochMs);
  };
  const endpoints: GatewayEndpoints = {
    apnsOrigin: apns.origin,
    fcmOrigin: fcm.origin,
    fcmTokenUrl: fcm.tokenUrl,
    apnsCredentials: apnsKey.credentials,
    serviceAccount: serviceAccount.json,
  };
  const answer = (request: MockRequest): unknown => {
    switch (request.op) {
      case 'received':
        return { count, firstAtEpochMs, lastAtEpochMs, peakInFlight: [apns.peakConcurrency, fcm.peakConcurrency] };
      case 'reset':
        counts.clear();
        count = 0;
        apns.resetStats();
        fcm.resetStats();
        return null;
      case 'tally':
        return {
          missed: request.tokens.filter((t) => !counts.has(t)).length,
          twice: request.tokens.filter((t) => (counts.get(t) ?? 0) > 1).length,
        };
      case 'delay':
        for (const mock of [apns, fcm]) mock.faults.sometimes(1, { type: 'delay', ms: request.ms });
        return null;
      case 'summary': {
        let twice = 0;
        for (const n of counts.values()) if (n > 1) twice += 1;
        return { distinct: counts.size, twice };
      }
      case 'watch':
        for (const token of request.tokens) arrivedAt.set(token, null);
        return null;
      case 'arrivals':
        return request.tokens.map((token) => arrivedAt.get(token) ?? null);
    }
  };
  return { endpoints, answer, close: () => Promise.all([apns.close(), fcm.close()]).then(() => undefined) };
}

/** The mocks in the benchmark's process, sharing its main thread (the lab view). */
export async function mocksHere(topic: string): Promise<MockGateways> {
  const mocks = await startMocks(topic);
  const ask = async <T>(request: MockRequest) => mocks.answer(request) as T;
  return {
    ...mocks.endpoints,
    pid: null,
    received: () => ask({ op: 'received' }),
    reset: () => ask({ op: 'reset' }),
    tally: (tokens) => ask({ op: 'tally', tokens }),
    delay: (ms) => ask({ op: 'delay', ms }),
    summary: () => ask({ op: 'summary' }),
    watch: (tokens) => ask({ op: 'watch', tokens }),
    arrivals: (tokens) => ask({ op: 'arrivals', tokens }),
    close: mocks.close,
  };
}

/**
 * The mocks in a process of their own (as APNs and FCM are elsewhere): their TLS and HTTP/2 work takes no turn
 * on the benchmark's or the clients' event loop, and their CPU is counted apart.
 */
export async function mocksInProcess(topic: string | string[]): Promise<MockGateways> {
  // bundle ids hold no commas
  const child: ChildProcess = fork(new URL('./mock-gateways-process.mjs', import.meta.url), [[topic].flat().join(',')], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  process.on('exit', () => child.kill('SIGKILL'));
  const replies: ((value: unknown) => void)[] = [];
  const endpoints = await new Promise<GatewayEndpoints>((resolve, reject) => {
    child.once('message', (m) => resolve(m as GatewayEndpoints));
    child.once('exit', (code) => reject(new Error(`the mock gateways' process exited (code ${code})`)));
  });
  // answers come in the order asked: one IPC channel, each request answered before the next is read
  child.on('message', (m) => replies.shift()?.(m));
  const ask = <T>(request: MockRequest) =>
    new Promise<T>((resolve) => {
      replies.push(resolve as (value: unknown) => void);
      child.send(request);
    });
  return {
    ...endpoints,
    pid: child.pid!,
    received: () => ask({ op: 'received' }),
    reset: () => ask({ op: 'reset' }),
    tally: (tokens) => ask({ op: 'tally', tokens }),
    delay: (ms) => ask({ op: 'delay', ms }),
    summary: () => ask({ op: 'summary' }),
    watch: (tokens) => ask({ op: 'watch', tokens }),
    arrivals: (tokens) => ask({ op: 'arrivals', tokens }),
    close: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Waits until the mocks have received `count` pushes, or `timeoutMs` passed. */
export async function waitReceived(mocks: MockGateways, count: number, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while ((await mocks.received()).count < count && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}
