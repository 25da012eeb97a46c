import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { engineDir, freePort, runAsPostgres, stopPid, untilPortAnswers, waitFor } from './engines.js';

export const PGBOUNCER = '/usr/sbin/pgbouncer';

export interface PgBouncer {
  port: number;
  pid: number;
  /** `url` (a URL of the server behind it) with its host and port replaced by PgBouncer's */
  through(url: string): string;
  stop(): Promise<void>;
}

/**
 * A real PgBouncer in transaction mode in front of the PostgreSQL at `serverUrl` (trust auth), on a free port:
 * every database name goes through to the server, and a server connection serves one transaction at a time, so
 * nothing a session sets (LISTEN, session locks, prepared statements) outlives the transaction that made it.
 */
export async function startPgBouncer(opts: { serverUrl: string; poolSize?: number; maxClients?: number }): Promise<PgBouncer> {
  const server = new URL(opts.serverUrl);
  const { dir, remove } = await engineDir('pushd-pgbouncer-');
  const port = await freePort();
  const ini = path.join(dir, 'pgbouncer.ini');
  const pidFile = path.join(dir, 'pgbouncer.pid');
  await writeFile(path.join(dir, 'userlist.txt'), '"postgres" ""\n', { mode: 0o644 });
  await writeFile(
    ini,
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      `unix_socket_dir = ${dir}`,
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      // fewer server connections than the processes' pools hold: their transactions share them
      `default_pool_size = ${opts.poolSize ?? 5}`,
      `max_client_conn = ${opts.maxClients ?? 500}`,
      `logfile = ${path.join(dir, 'pgbouncer.log')}`,
      `pidfile = ${pidFile}`,
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  await runAsPostgres(PGBOUNCER, ['-d', ini]);
  await untilPortAnswers(port, 'pgbouncer');
  // the daemon may write its pid file a moment after it listens
  const pid = Number(await waitFor('pgbouncer.pid', () => readFile(pidFile, 'utf8').catch(() => undefined), 10_000));
  return {
    port,
    pid,
    through(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    async stop() {
      await stopPid(pid);
      await remove();
    },
  };
}
