import { spawn } from 'node:child_process';
import net from 'node:net';
import { LISTEN_BACKLOG } from './overload.js';

/**
 * The child that hands the listening socket back: each message carrying it is answered with the same handle, which
 * the kernel gives this process as a new descriptor of the same socket (a raw handle stays open in its sender).
 */
const HAND_BACK = `
process.on('message', (count, handle) => {
  let left = count;
  const next = () => (left-- > 0 ? process.send('socket', handle, next) : process.disconnect());
  next();
});`;

/** How often the event loop's lateness is read: shorter than the turns it tells apart, which it cannot see below. */
const CHECK_MS = 10;
/** A check this late means turns of the loop of 20 ms or more: a connection a descriptor a turn is then too few. */
const BUSY_LATE_MS = 10;
/** Checks late in a row that make a busy loop, not one pause (a full garbage collection). */
const BUSY_CHECKS = 3;
/** The extra descriptors stop being polled once the loop has been on time this long. */
const QUIET_MS = 5000;

/** A raw libuv handle of a listening socket, as Node passes it between processes. */
type RawHandle = object & { close(): void };

/**
 * Polls the listening socket of `server` through `count` descriptors instead of one while the event loop is busy,
 * so that a saturated process accepts up to `count` connections a turn. libuv accepts one connection each time a
 * listening descriptor is polled readable (libuv#3696), and the turn of a saturated loop lasts 40–130 ms: clients
 * that connected during an overload waited seconds in the kernel's queue, where admission control cannot answer them.
 * Node 20 has no SO_REUSEPORT, so the extra descriptors of the same socket come from a short-lived child process that
 * is given it and hands it back. They are held unpolled while the loop is on time: each one polled costs every new
 * connection a failed `accept` (about 3 µs). Connections accepted on them are the server's own ('connection').
 */
export class ListeningDescriptors {
  private reserve: RawHandle[] = [];
  private acquiring: Promise<void> | null = null;
  private polling: net.Server[] = [];
  private lastBusy = 0;
  private lateInARow = 0;
  private expected = performance.now() + CHECK_MS;
  private readonly timer: NodeJS.Timeout;

  private constructor(
    private readonly server: net.Server,
    private readonly handle: object,
    private readonly extra: number,
  ) {
    this.timer = setInterval(() => this.check(), CHECK_MS).unref();
  }

  /** Descriptors for `server` (listening), `count` in all; one is its own, and with one nothing is added. */
  static async open(server: net.Server, count: number): Promise<ListeningDescriptors | null> {
    const handle = (server as unknown as { _handle: object | null })._handle;
    if (count <= 1 || !handle) return null;
    const descriptors = new ListeningDescriptors(server, handle, count - 1);
    await descriptors.acquire();
    return descriptors;
  }

  /** How many descriptors are polled now, the server's own included. */
  get polled(): number {
    return 1 + this.polling.length;
  }

  /** Polls every extra descriptor now, as the loop falling behind does. */
  pollAll(): void {
    this.lastBusy = performance.now();
    for (const handle of this.reserve.splice(0)) {
      const listener = new net.Server();
      listener.on('connection', (socket) => this.server.emit('connection', socket));
      // listen() on a socket already listening keeps it so; it resets the backlog, which stays the server's
      listener.listen(handle, LISTEN_BACKLOG);
      this.polling.push(listener);
    }
  }

  /** Stops polling the extra descriptors and closes them; the server's own is the server's to close. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.acquiring?.catch(() => undefined);
    this.stopPolling();
    for (const handle of this.reserve.splice(0)) handle.close();
  }

  private check(): void {
    const now = performance.now();
    const late = now - this.expected;
    this.expected = now + CHECK_MS;
    this.lateInARow = late >= BUSY_LATE_MS ? this.lateInARow + 1 : 0;
    if (this.lateInARow >= BUSY_CHECKS) this.pollAll();
    else if (this.polling.length > 0 && now - this.lastBusy >= QUIET_MS) {
      this.stopPolling();
      void this.acquire().catch(() => undefined);
    }
  }

  // close() stops the polling at once; its callback would wait for the connections, which are the server's to end
  private stopPolling(): void {
    for (const listener of this.polling.splice(0)) listener.close();
  }

  private acquire(): Promise<void> {
    this.acquiring ??= descriptorsOf(this.handle, this.extra)
      .then((handles) => void this.reserve.push(...handles))
      .finally(() => (this.acquiring = null));
    return this.acquiring;
  }
}

/** `count` more descriptors of the socket behind `handle`, by way of the child that hands it back. */
function descriptorsOf(handle: object, count: number): Promise<RawHandle[]> {
  const child = spawn(process.execPath, ['-e', HAND_BACK], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    const received: RawHandle[] = [];
    child.on('message', (_message, extra) => {
      if (extra) received.push(extra as unknown as RawHandle);
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      if (received.length === count) resolve(received);
      else {
        for (const h of received) h.close();
        reject(new Error(`the listening socket came back ${received.length} times of ${count} (exit ${code})`));
      }
    });
    child.send(count, handle as net.Server);
  });
}
