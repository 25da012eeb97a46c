import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { admitInTime, admittingServer } from '../../src/http/overload.js';
import { Admission, OverloadedError } from '../../src/platform/admission.js';
import { HELD_FLOOR, IN_PROGRESS_CAP, SHARE_WINDOW_MS } from '../../src/platform/cpu-share.js';
import { Metrics } from '../../src/platform/metrics.js';
import { connectionsWithUnread } from '../../src/platform/unread-requests.js';

/** Keeps the event loop busy for `ms`, as work that takes the whole CPU does. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/**
 * Windows of the loop saturated, then one turn for the admission's timer to read them. Long enough that a short wait
 * of a loaded machine's before it (the window starts at the timer's last turn) leaves the window saturated.
 */
async function saturated(): Promise<void> {
  busy(8 * SHARE_WINDOW_MS);
  await sleep(1);
}

/** Waits until `check` holds, letting the loop turn. */
async function until(check: () => boolean, ms = 5000): Promise<void> {
  const by = Date.now() + ms;
  while (!check() && Date.now() < by) await sleep(20);
}

/** How many of `n` new requests the admission takes in; each taken one stays held until released via `held`. */
function offer(a: Admission, n: number, held: (() => void)[], holds = true): number {
  let taken = 0;
  for (let i = 0; i < n; i++) {
    const release = a.admit(holds);
    if (!(release instanceof OverloadedError)) {
      taken += 1;
      held.push(release);
    }
  }
  return taken;
}

/**
 * The share of new requests taken in while the CPU is saturated past capacity: a listening server that reads
 * nothing from its connections and clients that each sent it a request stand for what the kernel holds unread while
 * an event loop is too busy to read.
 */
describe.skipIf(process.platform !== 'linux')('admission: the share taken in while the CPU is saturated', () => {
  let unread: Server;
  let port: number;
  const clients: Socket[] = [];
  const accepted: Socket[] = [];
  const held: (() => void)[] = [];
  let stop: () => void = () => undefined;

  beforeAll(async () => {
    unread = createServer({ pauseOnConnect: true }, (socket) => accepted.push(socket));
    await new Promise<void>((resolve) => unread.listen(0, '127.0.0.1', resolve));
    port = (unread.address() as AddressInfo).port;
    for (let i = 0; i < HELD_FLOOR + 20; i++) {
      const socket = connect(port, '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write('POST /v6/notifications HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}');
      clients.push(socket);
    }
  });

  afterAll(async () => {
    for (const socket of [...clients, ...accepted]) socket.destroy();
    await new Promise((resolve) => unread.close(resolve));
  });

  /** A bound past the saturated windows' own pauses of the loop: what is refused here is refused for the share. */
  const BOUND_MS = 5000;

  afterEach(() => {
    stop();
    for (const release of held.splice(0)) release();
  });

  it('counts the connections whose requests wait unread, as the kernel does, and none where all is read', async () => {
    let count: number | undefined;
    for (let i = 0; i < 50 && count !== clients.length; i++) count = await connectionsWithUnread(port, 'IPv4');
    expect(count).toBe(clients.length);
    expect(await connectionsWithUnread(port, 'IPv4', 10)).toBe(10);
    const quiet = createServer((socket) => socket.resume());
    await new Promise<void>((resolve) => quiet.listen(0, '127.0.0.1', resolve));
    const quietPort = (quiet.address() as AddressInfo).port;
    const sent = connect(quietPort, '127.0.0.1', () => sent.write('GET / HTTP/1.1\r\n\r\n'));
    await sleep(100);
    expect(await connectionsWithUnread(quietPort, 'IPv4')).toBe(0);
    sent.destroy();
    await new Promise((resolve) => quiet.close(resolve));
  });

  it('takes in a share while the loop is saturated with requests unread, then all once it has room', async () => {
    const a = new Admission(BOUND_MS);
    stop = a.start();
    a.watchSockets(port, 'IPv4');
    // the first saturated window reads the kernel's count (off the loop), the next one acts on it
    await saturated();
    await until(() => a.held > HELD_FLOOR);
    expect(a.held).toBe(clients.length);
    await saturated();
    expect(a.share).toBe(0.7);
    // spread evenly: 7 of every 10, the others told why
    expect(offer(a, 10, held)).toBe(7);
    const refused = a.admit();
    expect(refused).toBeInstanceOf(OverloadedError);
    expect((refused as OverloadedError).message).toMatch(/^overloaded: this server's CPU is saturated past capacity; retry/);
    await saturated();
    expect(a.share).toBe(0.49);
    // the loop has room: 10 points back a window, up to all
    await until(() => a.share === 1);
    expect(a.share).toBe(1);
    expect(offer(a, 10, held)).toBe(10);
  });

  it('counts requests in progress as held, up to the cap at the floor: within it the loop is at capacity', async () => {
    const a = new Admission(BOUND_MS);
    stop = a.start();
    // what a closed set of clients keeps: a busy loop, every request taken in
    expect(offer(a, HELD_FLOOR - 1, held)).toBe(HELD_FLOOR - 1);
    await saturated();
    expect(a.share).toBe(1);
    // ones that wait on a remote server hold no CPU: not counted
    expect(offer(a, 50, held, false)).toBe(50);
    await saturated();
    expect(a.share).toBe(1);
    // a burst while saturated: taken up to the cap, the floor, and the rest refused at once; at the floor, no cut
    expect(offer(a, 10, held)).toBe(1);
    expect(a.inProgress).toBe(IN_PROGRESS_CAP);
    expect(IN_PROGRESS_CAP).toBe(HELD_FLOOR);
    await saturated();
    expect(a.share).toBe(1);
    // answered: the burst's place is free again
    for (const release of held.splice(0)) release();
    expect(a.inProgress).toBe(0);
    expect(offer(a, 10, held)).toBe(10);
  });

  it('cuts the share by what is held past the floor, as a burst taken in before the loop saturated', async () => {
    const a = new Admission(BOUND_MS);
    stop = a.start();
    // the loop not saturated yet: the cap does not apply
    expect(offer(a, 2 * HELD_FLOOR, held)).toBe(2 * HELD_FLOOR);
    await saturated();
    expect(a.share).toBe(0.5);
    // past the cap while saturated: every new one refused
    expect(offer(a, 10, held)).toBe(0);
  });

  it('takes everything with a bound of 0', async () => {
    const a = new Admission(0);
    stop = a.start();
    a.watchSockets(port, 'IPv4');
    await saturated();
    expect(offer(a, 10, held)).toBe(10);
  });
});

/** Through the plugin: a request counts as in progress until its answer is sent or its connection is gone. */
describe('admission: requests in progress through the plugin', () => {
  it('releases pipelined requests whose connection closed before their answer, and never counts health', async () => {
    const admission = new Admission(1000);
    const stop = admission.start();
    const app = Fastify();
    await app.register(admitInTime, { admission, metrics: new Metrics() });
    app.post('/v6/slow', async () => {
      await sleep(300);
      return { ok: true };
    });
    app.get('/health', async () => ({ ok: true }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const { port } = app.server.address() as AddressInfo;
      const socket = connect(port, '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      const request = 'POST /v6/slow HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}';
      socket.write(request + request + request + 'GET /health HTTP/1.1\r\nhost: x\r\n\r\n');
      // each pipelined request is taken in as it is read; only the first has its answer on the way
      await until(() => admission.inProgress >= 3);
      expect(admission.inProgress).toBe(3);
      socket.destroy();
      await until(() => admission.inProgress === 0, 3000);
      expect(admission.inProgress).toBe(0);
      const health = await fetch(`http://127.0.0.1:${port}/health`);
      expect(health.status).toBe(200);
      expect(admission.inProgress).toBe(0);
    } finally {
      stop();
      await app.close();
    }
  });
});

/** Refused before Fastify: a refusal must cost next to nothing when the CPU is what is short. */
describe('admission: refusals answered by the server in front of Fastify', () => {
  it("answers a refused request from its head alone, and a browser's through Fastify's hooks (its CORS headers)", async () => {
    const admission = new Admission(5000);
    const stop = admission.start();
    const metrics = new Metrics();
    const app = Fastify({ serverFactory: admittingServer(admission, metrics) });
    // stands for the browser CORS hook: a header only Fastify's hooks give
    app.addHook('onRequest', async (_request, reply) => void reply.header('x-through-fastify', 'yes'));
    await app.register(admitInTime, { admission, metrics });
    app.post('/v6/notifications', async () => ({ ok: true }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const held: (() => void)[] = [];
    try {
      const { port } = app.server.address() as AddressInfo;
      // past capacity: more in progress than the floor while the loop is saturated; the share holds for a window
      const pastCapacity = async () => {
        await until(() => admission.share === 1);
        for (let i = 0; i <= HELD_FLOOR; i++) held.push(admission.hold());
        await saturated();
        for (const release of held.splice(0)) release();
        expect(admission.share).toBe(0.7);
      };
      const post = (headers: Record<string, string> = {}) =>
        fetch(`http://127.0.0.1:${port}/v6/notifications`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: '{}',
        });
      await pastCapacity();
      const answers = await Promise.all(Array.from({ length: 10 }, () => post()));
      const refused = answers.filter((a) => a.status === 503);
      // 3 of 10 at 0.7 (fewer only if a window passed before all were read: the share then grows back)
      expect(refused.length).toBeGreaterThanOrEqual(1);
      expect(refused.length).toBeLessThanOrEqual(3);
      for (const a of refused) {
        expect(a.headers.get('retry-after')).toBe('1');
        expect(a.headers.get('x-through-fastify')).toBeNull();
        expect(await a.json()).toEqual({ error: "overloaded: this server's CPU is saturated past capacity; retry after 1 s" });
      }
      expect(answers.filter((a) => a.status === 200).every((a) => a.headers.get('x-through-fastify') === 'yes')).toBe(true);
      await pastCapacity();
      const fromBrowser = await Promise.all(Array.from({ length: 10 }, () => post({ origin: 'https://app.example' })));
      const refusedInBrowser = fromBrowser.filter((a) => a.status === 503);
      expect(refusedInBrowser.length).toBeGreaterThanOrEqual(1);
      expect(refusedInBrowser.length).toBeLessThanOrEqual(3);
      for (const a of refusedInBrowser) expect(a.headers.get('x-through-fastify')).toBe('yes');
      expect((await metrics.registry.getSingleMetric('pushd_http_requests_shed_total')!.get()).values[0]!.value).toBe(
        refused.length + refusedInBrowser.length,
      );
    } finally {
      stop();
      await app.close();
    }
  });
});
