import { readFileSync } from 'node:fs';

/** The kernel's tables of the TCP sockets of this process's network namespace (Linux), IPv4 and IPv6. */
const SOCKET_TABLES = ['/proc/self/net/tcp', '/proc/self/net/tcp6'];

/** A connection's state in those tables: established. */
const ESTABLISHED = '01';

/**
 * How many connections to `port` hold bytes this process has not read yet, as the kernel counts them: requests
 * that wait unread while the event loop is busy, where no queue of the process sees them. Undefined where the kernel
 * does not tell (not Linux).
 */
export function connectionsWithUnread(port: number): number | undefined {
  const portHex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  let told = false;
  let count = 0;
  for (const table of SOCKET_TABLES) {
    let text: string;
    try {
      text = readFileSync(table, 'latin1');
    } catch {
      continue;
    }
    told = true;
    for (const line of text.split('\n')) {
      if (!line.includes(portHex)) continue;
      // "sl local_address rem_address st tx_queue:rx_queue ...", addresses as hex "ADDR:PORT"
      const [, localAddress, , state, queues] = line.trim().split(/\s+/, 5);
      if (localAddress?.endsWith(portHex) && state === ESTABLISHED && !queues?.endsWith(':00000000')) count += 1;
    }
  }
  return told ? count : undefined;
}
