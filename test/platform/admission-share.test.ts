import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Admission, HELD_FLOOR, SHARE_WINDOW_MS } from '../../src/platform/admission.js';
import { connectionsWithUnread } from '../../src/platform/unread-requests.js';

/** Keeps the event loop busy for `ms`, as work that takes the whole CPU does. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/** A window of the loop saturated, then one turn for the admission's timer to read it. */
async function saturatedWindow(): Promise<void> {
  busy(4 * SHARE_WINDOW_MS);
  await sleep(1);
}

/** Waits until `check` holds, letting the loop turn. */
async function until(check: () => boolean, ms = 5000): Promise<void> {
  const by = Date.now() + ms;
  while (!check() && Date.now() < by) await sleep(20);
}

/** How many of `n` new requests the admission takes in; each taken one stays in progress in `held`. */
function offer(a: Admission, n: number, held: (() => void)[]): number {
  let taken = 0;
  for (let i = 0; i < n; i++) {
    const release = a.admit();
    if (release) {
      taken += 1;
      held.push(release);
    }
  }
  return taken;
}

/**
 * A listening server that reads nothing from its connections, and clients that each sent it a request: what the
 * kernel holds unread while an event loop is too busy to read.
 */
describe('admission: the share taken in while the CPU is saturated', () => {
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

  afterEach(() => {
    stop();
    for (const release of held.splice(0)) release();
  });

  it('counts the connections whose requests wait unread, as the kernel does, and none on a port nobody reads', async () => {
    await until(() => connectionsWithUnread(port)! >= clients.length);
    expect(connectionsWithUnread(port)).toBe(clients.length);
    const quiet = createServer((socket) => socket.resume());
    await new Promise<void>((resolve) => quiet.listen(0, '127.0.0.1', resolve));
    const quietPort = (quiet.address() as AddressInfo).port;
    const sent = connect(quietPort, '127.0.0.1', () => sent.write('GET / HTTP/1.1\r\n\r\n'));
    await sleep(100);
    expect(connectionsWithUnread(quietPort)).toBe(0);
    sent.destroy();
    await new Promise((resolve) => quiet.close(resolve));
  });

  it('takes in a share of new requests while the loop is saturated with requests unread, then all once it has room', async () => {
    const a = new Admission(1000);
    stop = a.start();
    a.watchSockets(port);
    await saturatedWindow();
    expect(a.share).toBeCloseTo(0.7);
    // spread evenly: 7 of every 10
    expect(offer(a, 10, held)).toBe(7);
    await saturatedWindow();
    expect(a.share).toBeCloseTo(0.49);
    // the loop has room: 10 points back a window, up to all
    await until(() => a.share === 1);
    expect(a.share).toBe(1);
    expect(offer(a, 10, held)).toBe(10);
  });

  it('counts requests in progress as held: past the floor they are cut, within it the loop is at capacity', async () => {
    const a = new Admission(1000);
    stop = a.start();
    // what a closed set of clients keeps: a busy loop, every request taken in
    expect(offer(a, HELD_FLOOR - 1, held)).toBe(HELD_FLOOR - 1);
    await saturatedWindow();
    expect(a.share).toBe(1);
    expect(offer(a, 1, held)).toBe(1);
    await saturatedWindow();
    expect(a.share).toBeCloseTo(0.7);
    // answered (or their connections gone): the share comes back
    for (const release of held.splice(0)) release();
    await until(() => a.share === 1);
    expect(a.share).toBe(1);
  });

  it('takes everything with a bound of 0', async () => {
    const a = new Admission(0);
    stop = a.start();
    a.watchSockets(port);
    await saturatedWindow();
    expect(offer(a, 10, held)).toBe(10);
  });
});
