import { spawn } from 'node:child_process';
import net from 'node:net';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { eventLoop } from '../platform/loop-lateness.js';
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

/**
 * A sample of the loop (due every 10 ms) this late means turns of 20 ms or more: a connection a descriptor a turn is
 * then too few.
 */
const BUSY_LATE_MS = 10;
/** Samples late in a row that make a busy loop, not one pause (a full garbage collection). */
const BUSY_CHECKS = 3;
/** The extra descriptors stop being polled once the loop has been on time this long. */
const QUIET_MS = 5000;
/** A child that has not handed the socket back by then is stopped. */
const HAND_BACK_TIMEOUT_MS = 10_000;
/** After a failed fetch of descriptors, the next waits this long. */
const RETRY_MS = 30_000;

/** A raw libuv handle of a listening socket, as Node passes it between processes. */
type RawHandle = object & { close(): void };

/** The socket options of Node's HTTP server, which its own accepted connections get. */
type SocketOptions = Pick<net.ServerOpts, 'allowHalfOpen' | 'noDelay' | 'keepAlive' | 'keepAliveInitialDelay' | 'highWaterMark'>;

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
  private lastFailure = -Infinity;
  private polling: net.Server[] = [];
  private readonly taken = new Set<net.Socket>();
  private closed = false;
  private lastBusy = -Infinity;
  private lateInARow = 0;
  private stopSampling: (() => void) | null = null;

  constructor(
    private readonly server: net.Server,
    private readonly extra: number,
    private readonly log: FastifyBaseLogger,
  ) {}

  /** Connections open that the extra descriptors took in. */
  get takenIn(): number {
    return this.taken.size;
  }

  /** Whether an extra descriptor took `socket` in (while it is open). */
  took(socket: net.Socket): boolean {
    return this.taken.has(socket);
  }

  /** How many descriptors are polled now, the server's own included. */
  get polled(): number {
    return 1 + this.polling.length;
  }

  /** Fetches the extra descriptors; rejects when the child could not hand them all back. */
  acquire(): Promise<void> {
    const handle = (this.server as unknown as { _handle: object | null })._handle;
    if (!handle) return Promise.reject(new Error('the server is not listening'));
    if (!this.stopSampling && !this.closed) this.stopSampling = eventLoop.follow((now, lateMs) => this.check(now, lateMs));
    this.acquiring ??= descriptorsOf(handle, this.extra, (extra) => this.arrived(extra))
      .catch((err: unknown) => {
        this.lastFailure = performance.now();
        throw err;
      })
      .finally(() => (this.acquiring = null));
    return this.acquiring;
  }

  /** Polls every extra descriptor held now, as the loop falling behind does. */
  pollAll(): void {
    this.lastBusy = performance.now();
    for (const handle of this.reserve.splice(0)) this.poll(handle);
  }

  /** Stops polling the extra descriptors and closes them: no connection is taken in on them after. */
  stopTaking(): void {
    this.closed = true;
    this.stopSampling?.();
    this.stopSampling = null;
    this.stopPolling();
    for (const handle of this.reserve.splice(0)) handle.close();
  }

  /** Once the server has closed: waits until the connections taken in on the extra descriptors have ended too. */
  async drained(): Promise<void> {
    this.stopTaking();
    while (this.taken.size > 0) {
      // the server closes its idle connections once when it closes; these may have become idle since
      (this.server as Partial<{ closeIdleConnections(): void }>).closeIdleConnections?.();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await this.acquiring?.catch(() => undefined);
  }

  private arrived(handle: RawHandle): void {
    if (this.closed) handle.close();
    else if (performance.now() - this.lastBusy < QUIET_MS) this.poll(handle);
    else this.reserve.push(handle);
  }

  private poll(handle: RawHandle): void {
    const listener = new net.Server(socketOptionsOf(this.server));
    listener.on('connection', (socket: net.Socket) => {
      this.taken.add(socket);
      socket.once('close', () => this.taken.delete(socket));
      this.server.emit('connection', socket);
    });
    listener.on('error', (err) => {
      this.log.warn({ err }, 'an extra descriptor of the listening socket failed; it is closed');
      listener.close();
    });
    // listen() on a socket already listening keeps it so; it resets the backlog, which stays the server's
    listener.listen(handle, LISTEN_BACKLOG);
    this.polling.push(listener);
  }

  private check(now: number, lateMs: number): void {
    this.lateInARow = lateMs >= BUSY_LATE_MS ? this.lateInARow + 1 : 0;
    if (this.lateInARow >= BUSY_CHECKS) {
      this.pollAll();
      if (this.polling.length === 0 && !this.acquiring && now - this.lastFailure >= RETRY_MS) this.refetch();
    } else if (this.polling.length > 0 && now - this.lastBusy >= QUIET_MS) {
      this.stopPolling();
      this.refetch();
    }
  }

  private refetch(): void {
    this.acquire().catch((err: unknown) => this.log.warn({ err }, 'no extra descriptors of the listening socket for now'));
  }

  // close() stops the polling at once; its callback would wait for the connections, which are the server's to end
  private stopPolling(): void {
    for (const listener of this.polling.splice(0)) listener.close();
  }
}

/**
 * On an API server: the extra descriptors fetched once it listens (`count` in all, its own included), no longer
 * polled once it starts closing, and its close waiting for the connections they took in, as for its own.
 */
export function pollListeningSocketWhenBusy(app: FastifyInstance, count: number): ListeningDescriptors | null {
  if (count <= 1) return null;
  const descriptors = new ListeningDescriptors(app.server, count - 1, app.log);
  let opening: Promise<void> = Promise.resolve();
  app.addHook('onListen', async () => {
    opening = descriptors.acquire().catch((err: unknown) => {
      // without them the server still serves, only slower to take in connections past capacity
      app.log.warn({ err }, 'the listening socket is polled through one descriptor');
      descriptors.stopTaking();
    });
  });
  app.addHook('preClose', async () => descriptors.stopTaking());
  app.addHook('onClose', async () => {
    await opening;
    await descriptors.drained();
  });
  return descriptors;
}

function socketOptionsOf(server: net.Server): SocketOptions {
  const { allowHalfOpen, noDelay, keepAlive, keepAliveInitialDelay, highWaterMark } = server as net.Server & SocketOptions;
  return { allowHalfOpen, noDelay, keepAlive, keepAliveInitialDelay, highWaterMark };
}

/** `count` more descriptors of the socket behind `handle`, each given to `arrived`, from the child that hands it back. */
function descriptorsOf(handle: object, count: number, arrived: (extra: RawHandle) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    // the child runs no preloaded module of this process's (an agent, an inspector) that could keep it alive
    const child = spawn(process.execPath, ['-e', HAND_BACK], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    let received = 0;
    const timeout = setTimeout(() => child.kill('SIGKILL'), HAND_BACK_TIMEOUT_MS).unref();
    child.on('message', (_message, extra) => {
      if (!extra) return;
      arrived(extra as unknown as RawHandle);
      if (++received === count) resolve();
    });
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      clearTimeout(timeout);
      if (received < count) reject(new Error(`the listening socket came back ${received} times of ${count} (exit ${code ?? signal})`));
    });
    child.send(count, handle as net.Server);
  });
}
