import { fork, type ChildProcess } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
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
  /** pushes each of these tokens got since the last reset */
  counts(tokens: string[]): Promise<number[]>;
  /** every token pushed since the last reset, with its pushes: for mocks that take few (an API process's own sends) */
  pushed(): Promise<[string, number][]>;
  /** the mocks' event-loop delay since the last call (ms): how long a request waited for its turn there */
  loopDelay(): Promise<LoopDelay>;
  close(): Promise<void>;
}

export interface LoopDelay {
  p50: number;
  p99: number;
  max: number;
}

/** The requests the mocks' process answers (mock-gateways-process.ts), and the handler both kinds share. */
export type MockRequest =
  | { op: 'received' }
  | { op: 'reset' }
  | { op: 'tally'; tokens: string[] }
  | { op: 'delay'; ms: number }
  | { op: 'summary' }
  | { op: 'watch'; tokens: string[] }
  | { op: 'arrivals'; tokens: string[] }
  | { op: 'counts'; tokens: string[] }
  | { op: 'pushed' }
  | { op: 'loopDelay' };

/**
 * Starts the APNs and FCM mocks in this process, APNs for these topics; `answer` serves the MockRequests about them.
 * With `like`, they accept the credentials those other mocks accept (another gateway of the same apps), else new ones.
 */
export async function startMocks(topic: string | string[], like?: GatewayEndpoints) {
  const apnsKey = generateApnsKey();
  const serviceAccount = generateServiceAccount();
  const apns = await ApnsMock.start({ record: false, topic });
  const fcm = await FcmMock.start({ record: false });
  if (like) {
    // a public key made from the private one the apps hold
    apns.addKey({ ...like.apnsCredentials, publicKey: like.apnsCredentials.keyPem });
    const sa = like.serviceAccount;
    fcm.addServiceAccount({ clientEmail: sa.client_email, projectId: sa.project_id, publicKey: sa.private_key });
  } else {
    apns.addKey(apnsKey);
    fcm.addServiceAccount(serviceAccount);
  }
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
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
    apnsCredentials: like?.apnsCredentials ?? apnsKey.credentials,
    serviceAccount: like?.serviceAccount ?? serviceAccount.json,
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
      case 'counts':
        return request.tokens.map((token) => counts.get(token) ?? 0);
      case 'pushed':
        return [...counts];
      case 'loopDelay': {
        const ms = (ns: number) => ns / 1e6;
        const delay = { p50: ms(loop.percentile(50)), p99: ms(loop.percentile(99)), max: ms(loop.max) };
        loop.reset();
        return delay;
      }
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
    counts: (tokens) => ask({ op: 'counts', tokens }),
    pushed: () => ask({ op: 'pushed' }),
    loopDelay: () => ask({ op: 'loopDelay' }),
    close: mocks.close,
  };
}

/**
 * The mocks in a process of their own (as APNs and FCM are elsewhere): their TLS and HTTP/2 work takes no turn
 * on the benchmark's or the clients' event loop, and their CPU is counted apart.
 */
export async function mocksInProcess(topic: string | string[], like?: GatewayEndpoints): Promise<MockGateways> {
  // bundle ids hold no commas
  const args = [[topic].flat().join(','), ...(like ? [JSON.stringify(like)] : [])];
  const child: ChildProcess = fork(new URL('./mock-gateways-process.mjs', import.meta.url), args, {
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
    counts: (tokens) => ask({ op: 'counts', tokens }),
    pushed: () => ask({ op: 'pushed' }),
    loopDelay: () => ask({ op: 'loopDelay' }),
    close: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * Two mock processes seen as one gateway: `few` takes the sends of a few processes (the API processes' own, so
 * that a broadcast's 10,000 pushes a second to `many` do not delay them in the mocks' event loop), `many` the rest
 * and every request about credentials. A token pushed by both counts as pushed twice.
 */
export function combinedMocks(many: MockGateways, few: MockGateways): MockGateways {
  const both = [many, few];
  // the tokens `few` got, with their pushes at `many` added
  const fewTotals = async () => {
    const pushed = await few.pushed();
    const atMany = await many.counts(pushed.map(([token]) => token));
    return pushed.map(([token, n], i) => ({ token, n, atMany: atMany[i]! }));
  };
  return {
    ...many,
    async received() {
      const [a, b] = await Promise.all(both.map((m) => m.received()));
      const firsts = [a!, b!].filter((r) => r.count > 0).map((r) => r.firstAtEpochMs);
      return {
        count: a!.count + b!.count,
        firstAtEpochMs: firsts.length ? Math.min(...firsts) : 0,
        lastAtEpochMs: Math.max(a!.lastAtEpochMs, b!.lastAtEpochMs),
        peakInFlight: [Math.max(a!.peakInFlight[0], b!.peakInFlight[0]), Math.max(a!.peakInFlight[1], b!.peakInFlight[1])],
      };
    },
    reset: () => Promise.all(both.map((m) => m.reset())).then(() => undefined),
    async tally(tokens) {
      const counts = await this.counts(tokens);
      return { missed: counts.filter((n) => n === 0).length, twice: counts.filter((n) => n > 1).length };
    },
    delay: (ms) => Promise.all(both.map((m) => m.delay(ms))).then(() => undefined),
    async summary() {
      const [s, extra] = await Promise.all([many.summary(), fewTotals()]);
      // `few`'s tokens: new ones add to the distinct, and each is twice if its pushes in all are, unless `many` counted it so
      let { distinct, twice } = s;
      for (const { n, atMany } of extra) {
        if (atMany === 0) distinct += 1;
        if (n + atMany > 1 && atMany <= 1) twice += 1;
      }
      return { distinct, twice };
    },
    watch: (tokens) => Promise.all(both.map((m) => m.watch(tokens))).then(() => undefined),
    async arrivals(tokens) {
      const [a, b] = await Promise.all(both.map((m) => m.arrivals(tokens)));
      return tokens.map((_, i) => {
        const times = [a![i], b![i]].filter((t): t is number => t != null);
        return times.length ? Math.min(...times) : null;
      });
    },
    async counts(tokens) {
      const [a, b] = await Promise.all(both.map((m) => m.counts(tokens)));
      return tokens.map((_, i) => a![i]! + b![i]!);
    },
    async pushed() {
      const all = new Map(await many.pushed());
      for (const [token, n] of await few.pushed()) all.set(token, (all.get(token) ?? 0) + n);
      return [...all];
    },
    loopDelay: () => many.loopDelay(),
    close: () => Promise.all(both.map((m) => m.close())).then(() => undefined),
  };
}

/** Waits until the mocks have received `count` pushes, or `timeoutMs` passed. */
export async function waitReceived(mocks: MockGateways, count: number, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while ((await mocks.received()).count < count && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}
