import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { acceptOnMoreDescriptors } from '../../src/http/accept-handles.js';

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

describe('the listening socket polled through more descriptors', () => {
  const opened: { close(): void }[] = [];
  afterEach(() => {
    for (const o of opened.splice(0)) o.close();
  });

  it('lets a saturated event loop accept a connection a descriptor each turn, where one took one a turn', async () => {
    const one = await listening();
    const eight = await listening();
    opened.push(one.server, eight.server);
    await acceptOnMoreDescriptors(eight.server, 8);

    const load = { turns: 6, busyMs: 20, connections: 40 };
    const withOne = await acceptedPerTurn(one, load);
    const withEight = await acceptedPerTurn(eight, load);
    for (const s of [...withOne.sockets, ...withEight.sockets]) s.destroy();

    // one descriptor: a connection a turn (a turn may see it twice if it polled before the busy wait)
    expect(withOne.counts.at(-1)).toBeLessThanOrEqual(2 * load.turns);
    // eight: every client within the turns at eight a turn
    expect(withEight.counts.at(-1)).toBe(load.connections);
  });

  it('serves the connections the extra descriptors take, and stops taking them when told', async () => {
    const target = await listening();
    opened.push(target.server);
    const stop = await acceptOnMoreDescriptors(target.server, 4);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        fetch(`http://127.0.0.1:${target.port}/`, { headers: { connection: 'close' } }).then((r) => r.text()),
      ),
    );
    expect(answers).toEqual(Array(20).fill('ok'));

    await stop();
    // the server's own descriptor still serves: one more connection, answered
    const again = await fetch(`http://127.0.0.1:${target.port}/`, { headers: { connection: 'close' } });
    expect(await again.text()).toBe('ok');
    expect(target.accepted()).toBe(21);
  });

  it('is nothing for one descriptor, or a server not listening', async () => {
    const target = await listening();
    opened.push(target.server);
    const stop = await acceptOnMoreDescriptors(target.server, 1);
    await stop();
    const idle = http.createServer();
    await expect(acceptOnMoreDescriptors(idle, 8)).resolves.toBeTypeOf('function');
  });
});
