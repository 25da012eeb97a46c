import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ListeningDescriptors } from '../../src/http/accept-handles.js';

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

describe('the listening socket polled through more descriptors', () => {
  const opened: { close(): unknown }[] = [];
  afterEach(async () => {
    for (const o of opened.splice(0).reverse()) await o.close();
  });

  it('while the event loop is busy, accepts a connection a descriptor each turn, where one took one a turn', async () => {
    const one = await listening();
    const eight = await listening();
    const descriptors = (await ListeningDescriptors.open(eight.server, 8))!;
    opened.push(one.server, eight.server, descriptors);
    expect(descriptors.polled).toBe(1);
    // turns of 50 ms make the lateness check see a busy loop within a few of its 100 ms checks
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
    const descriptors = (await ListeningDescriptors.open(target.server, 4))!;
    opened.push(target.server, descriptors);
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

  it('serves the connections the extra descriptors take, and stops taking them when closed', async () => {
    const target = await listening();
    opened.push(target.server);
    const descriptors = (await ListeningDescriptors.open(target.server, 4))!;
    descriptors.pollAll();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        fetch(`http://127.0.0.1:${target.port}/`, { headers: { connection: 'close' } }).then((r) => r.text()),
      ),
    );
    expect(answers).toEqual(Array(20).fill('ok'));

    await descriptors.close();
    expect(descriptors.polled).toBe(1);
    // the server's own descriptor still serves: one more connection, answered
    const again = await fetch(`http://127.0.0.1:${target.port}/`, { headers: { connection: 'close' } });
    expect(await again.text()).toBe('ok');
    expect(target.accepted()).toBe(21);
  });

  it('is nothing for one descriptor, or a server not listening', async () => {
    const target = await listening();
    opened.push(target.server);
    expect(await ListeningDescriptors.open(target.server, 1)).toBeNull();
    expect(await ListeningDescriptors.open(http.createServer(), 8)).toBeNull();
  });
});
