import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import Fastify, { type FastifyBaseLogger } from 'fastify';
import pino from 'pino';
import { ListeningDescriptors, pollListeningSocketWhenBusy } from '../../src/http/accept-handles.js';

/** A listening HTTP server on a free port, and the connections it has accepted so far. */
async function listening(): Promise<{ server: http.Server; port: number; accepted: () => number }> {
  const server = http.createServer((_req, res) => res.end('ok'));
  let accepted = 0;
  server.on('connection', () => accepted++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as net.AddressInfo).port, accepted: () => accepted };
}

/**
 * Runs `turns` turns of the event loop each busy for `busyMs` (a saturated process), `connections` clients connecting
 * during the first; answers how many the server had accepted after each turn.
 */
async function acceptedPerTurn(
  target: { port: number; accepted: () => number },
  load: { turns: number; busyMs: number; connections: number },
): Promise<{ counts: number[]; sockets: net.Socket[] }> {
  const sockets: net.Socket[] = [];
  const counts: number[] = [];
  await new Promise<void>((resolve) => {
    const turn = () => {
      const until = performance.now() + load.busyMs;
      while (performance.now() < until);
      if (sockets.length === 0) {
        for (let i = 0; i < load.connections; i++) sockets.push(net.connect(target.port, '127.0.0.1').on('error', () => {}));
      } else counts.push(target.accepted());
      if (counts.length < load.turns) setImmediate(turn);
      else resolve();
    };
    setImmediate(turn);
  });
  return { counts, sockets };
}

/** Turns of the event loop each busy for `busyMs` until `done` holds (at most `max`); answers how many ran. */
async function busyTurnsUntil(done: () => boolean, busyMs: number, max: number): Promise<number> {
  let turns = 0;
  await new Promise<void>((resolve) => {
    const turn = () => {
      const until = performance.now() + busyMs;
      while (performance.now() < until);
      turns++;
      if (done() || turns >= max) resolve();
      else setImmediate(turn);
    };
    setImmediate(turn);
  });
  return turns;
}

const silent = pino({ level: 'silent' }) as unknown as FastifyBaseLogger;

/** The extra descriptors of `server`'s socket, `count` in all, fetched. */
async function descriptorsOf(server: net.Server, count: number): Promise<ListeningDescriptors> {
  const descriptors = new ListeningDescriptors(server, count - 1, silent);
  await descriptors.acquire();
  return descriptors;
}

/** A GET on `agent`'s connections, answered with its body. */
function get(port: number, path: string, agent: http.Agent): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, agent }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve(body));
      })
      .on('error', reject);
  });
}

describe('the listening socket polled through more descriptors', () => {
  const opened: { close(): unknown }[] = [];
  afterEach(async () => {
    for (const o of opened.splice(0).reverse()) await o.close();
  });

  it('while the event loop is busy, accepts a connection a descriptor each turn, where one took one a turn', async () => {
    const one = await listening();
    const eight = await listening();
    const descriptors = await descriptorsOf(eight.server, 8);
    opened.push(one.server, eight.server, { close: () => descriptors.stopTaking() });
    expect(descriptors.polled).toBe(1);
    // turns of 50 ms: the 10 ms checks of the loop's lateness see it busy
    await busyTurnsUntil(() => descriptors.polled === 8, 50, 40);
    expect(descriptors.polled).toBe(8);

    const load = { turns: 6, busyMs: 20, connections: 40 };
    const withOne = await acceptedPerTurn(one, load);
    const withEight = await acceptedPerTurn(eight, load);
    for (const s of [...withOne.sockets, ...withEight.sockets]) s.destroy();

    // one descriptor: a connection a turn (a turn may see it twice if it polled before the busy wait)
    expect(withOne.counts.at(-1)).toBeLessThanOrEqual(2 * load.turns);
    // eight: every client within the turns at eight a turn
    expect(withEight.counts.at(-1)).toBe(load.connections);
  });

  it('stops polling the extra ones once the loop has been on time for 5 s, and holds new ones for the next time', async () => {
    const target = await listening();
    const descriptors = await descriptorsOf(target.server, 4);
    opened.push(target.server, { close: () => descriptors.stopTaking() });
    descriptors.pollAll();
    expect(descriptors.polled).toBe(4);
    await new Promise((r) => setTimeout(r, 4000));
    expect(descriptors.polled).toBe(4);
    await vi.waitFor(() => expect(descriptors.polled).toBe(1), { timeout: 3000, interval: 100 });
    // a new set of descriptors comes from the child while the loop is idle, ready for the next busy turn
    await vi.waitFor(
      () => {
        descriptors.pollAll();
        expect(descriptors.polled).toBe(4);
      },
      { timeout: 5000, interval: 100 },
    );
  });

  it('serves the connections the extra descriptors take, and takes none once stopped', async () => {
    const target = await listening();
    opened.push(target.server);
    const descriptors = await descriptorsOf(target.server, 4);
    descriptors.pollAll();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 20 });
    const answers = await Promise.all(Array.from({ length: 20 }, () => get(target.port, '/', agent)));
    expect(answers).toEqual(Array(20).fill('ok'));
    // 20 connecting at once: each turn of the loop, each descriptor took one
    expect(descriptors.takenIn).toBeGreaterThan(0);
    agent.destroy();

    descriptors.stopTaking();
    expect(descriptors.polled).toBe(1);
    // the server's own descriptor still serves: one more connection, answered
    const again = await fetch(`http://127.0.0.1:${target.port}/`, { headers: { connection: 'close' } });
    expect(await again.text()).toBe('ok');
    expect(target.accepted()).toBe(21);
  });

  it("an API server's close waits for the requests on connections the extra descriptors took", async () => {
    const app = Fastify();
    const descriptors = pollListeningSocketWhenBusy(app, 4)!;
    // the requests on a connection an extra descriptor took are the slow ones
    app.get('/slow', async (request) => {
      await new Promise((r) => setTimeout(r, descriptors.took(request.raw.socket) ? 1000 : 50));
      return 'done';
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const port = (app.server.address() as net.AddressInfo).port;
    await vi.waitFor(() => {
      descriptors.pollAll();
      expect(descriptors.polled).toBe(4);
    });
    const agent = new http.Agent({ keepAlive: false, maxSockets: 20 });
    let lastAnswer = 0;
    const answers = Array.from({ length: 20 }, () =>
      get(port, '/slow', agent).then((body) => {
        lastAnswer = performance.now();
        return body;
      }),
    );
    await vi.waitFor(() => expect(descriptors.takenIn).toBeGreaterThan(0));
    await new Promise((r) => setTimeout(r, 100));

    await app.close();
    const closedAt = performance.now();
    expect(await Promise.all(answers)).toEqual(Array(20).fill('done'));
    expect(closedAt).toBeGreaterThanOrEqual(lastAnswer);
    expect(descriptors.takenIn).toBe(0);
  });

  it('is nothing for one descriptor, and fails to fetch for a server not listening', async () => {
    expect(pollListeningSocketWhenBusy(Fastify(), 1)).toBeNull();
    const idle = new ListeningDescriptors(http.createServer(), 7, silent);
    await expect(idle.acquire()).rejects.toThrow('the server is not listening');
  });
});
