import { readFile } from 'node:fs/promises';

/** Which table of the kernel's holds a listening socket's connections (IPv4 clients of an IPv6 socket included). */
export type SocketFamily = 'IPv4' | 'IPv6';

/** The kernel's tables of the TCP sockets of this process's network namespace (Linux). */
const SOCKET_TABLES: Record<SocketFamily, string> = { IPv4: '/proc/self/net/tcp', IPv6: '/proc/self/net/tcp6' };

/** A connection's state in those tables: established. */
const ESTABLISHED = '01';

/**
 * How many connections to `port` hold bytes this process has not read yet, as the kernel counts them, up to
 * `enough`: requests that wait unread while the event loop is busy, where no queue of the process sees them.
 * Undefined where the kernel does not tell (not Linux).
 */
export async function connectionsWithUnread(port: number, family: SocketFamily, enough = Infinity): Promise<number | undefined> {
  let text: string;
  try {
    text = await readFile(SOCKET_TABLES[family], 'latin1');
  } catch {
    return undefined;
  }
  const portHex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  let count = 0;
  for (const line of text.split('\n')) {
    if (count >= enough) break;
    if (!line.includes(portHex)) continue;
    // "sl local_address rem_address st tx_queue:rx_queue ...", addresses as hex "ADDR:PORT"
    const [, localAddress, , state, queues] = line.trim().split(/\s+/, 5);
    if (localAddress?.endsWith(portHex) && state === ESTABLISHED && !queues?.endsWith(':00000000')) count += 1;
  }
  return count;
}
