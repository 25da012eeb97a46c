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

/**
 * Polls the listening socket of `server` through `count` descriptors instead of one, so that a busy event loop
 * accepts up to `count` connections a turn. libuv accepts one connection each time a listening descriptor is polled
 * readable (libuv#3696), and the turn of a saturated loop lasts 40–130 ms: connections opened during an overload
 * waited seconds in the kernel's queue, where admission control cannot answer them. Node 20 has no SO_REUSEPORT, so
 * the extra descriptors of the same socket come from a short-lived child process that is given it and hands it back.
 * Connections accepted on them are the server's own ('connection'). Answers a function that stops them polling.
 */
export async function acceptOnMoreDescriptors(server: net.Server, count: number): Promise<() => Promise<void>> {
  const handle = (server as unknown as { _handle: object | null })._handle;
  if (count <= 1 || !handle) return async () => {};
  const extras = await descriptorsOf(handle, count - 1);
  const listeners = extras.map((extra) => {
    const listener = new net.Server();
    listener.on('connection', (socket) => server.emit('connection', socket));
    // listen() on a socket already listening keeps it so; it resets the backlog, which stays the server's
    listener.listen(extra, LISTEN_BACKLOG);
    return listener;
  });
  // close() stops the polling at once; its callback would wait for the connections, which are the server's to end
  return async () => listeners.forEach((listener) => listener.close());
}

/** `count` more descriptors of the socket behind `handle`, by way of the child that hands it back. */
function descriptorsOf(handle: object, count: number): Promise<object[]> {
  const child = spawn(process.execPath, ['-e', HAND_BACK], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    const received: object[] = [];
    child.on('message', (_message, extra) => {
      if (extra) received.push(extra);
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      if (received.length === count) resolve(received);
      else reject(new Error(`the listening socket came back ${received.length} times of ${count} (exit ${code})`));
    });
    child.send(count, handle as net.Server);
  });
}
