import { appendFile, readFile } from 'node:fs/promises';
import path from 'node:path';
import { engineDir, freePort, runAsPostgres } from './engines.js';

export const PG_BIN = '/usr/lib/postgresql/15/bin';

export interface PrimaryWithReplica {
  /** admin URLs (database `postgres`) of the primary and of its streaming replica */
  primaryUrl: string;
  replicaUrl: string;
  /** `url` (a database on the primary) as the replica serves it */
  onReplica(url: string): string;
  /** the postmasters' process ids (each server's other processes are their children) */
  pids(): Promise<{ primary: number; replica: number }>;
  /** Stops the replica at once (immediate mode), as a crash of its machine does; the primary runs on. */
  killReplica(): Promise<void>;
  stop(): Promise<void>;
}

/** Small and quick: no fsync, little memory; nothing here outlives the test. */
const SERVER_OPTIONS = '-c listen_addresses=127.0.0.1 -c fsync=off -c shared_buffers=16MB -c max_connections=60';

/**
 * A PostgreSQL 15 primary of its own (initdb into a temporary directory, wal_level=replica) and a streaming
 * replica of it made by pg_basebackup -R, each on a free port, run as the postgres user.
 */
export async function startPrimaryWithReplica(): Promise<PrimaryWithReplica> {
  const { dir, remove } = await engineDir('pushd-replica-');
  const primaryDir = path.join(dir, 'primary');
  const replicaDir = path.join(dir, 'replica');
  const primaryPort = await freePort();
  let replicaPort = await freePort();
  while (replicaPort === primaryPort) replicaPort = await freePort();
  const pgCtl = (dataDir: string, args: string[]) => runAsPostgres(path.join(PG_BIN, 'pg_ctl'), ['-D', dataDir, ...args]);
  const start = (dataDir: string, port: number, extra: string) =>
    pgCtl(dataDir, [
      '-o',
      `-p ${port} -c unix_socket_directories=${dir} ${SERVER_OPTIONS} ${extra}`,
      '-l',
      `${dataDir}.log`,
      '-w',
      'start',
    ]);
  const started: string[] = [];
  const stop = async () => {
    for (const d of started.reverse()) await pgCtl(d, ['-m', 'immediate', 'stop']).catch(() => undefined);
    await remove();
  };
  try {
    await runAsPostgres(path.join(PG_BIN, 'initdb'), ['-D', primaryDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
    await appendFile(path.join(primaryDir, 'pg_hba.conf'), 'host replication all 127.0.0.1/32 trust\n');
    await start(primaryDir, primaryPort, '-c wal_level=replica -c max_wal_senders=4');
    started.push(primaryDir);
    await runAsPostgres(path.join(PG_BIN, 'pg_basebackup'), [
      '-R',
      '-D',
      replicaDir,
      '-h',
      '127.0.0.1',
      '-p',
      String(primaryPort),
      '-U',
      'postgres',
      '--checkpoint=fast',
      '--no-sync',
    ]);
    await start(replicaDir, replicaPort, '-c hot_standby=on');
    started.push(replicaDir);
  } catch (err) {
    await stop();
    throw err;
  }
  const at = (port: number, url = 'postgres://postgres@127.0.0.1/postgres') => {
    const u = new URL(url);
    u.port = String(port);
    return u.toString();
  };
  return {
    primaryUrl: at(primaryPort),
    replicaUrl: at(replicaPort),
    onReplica: (url) => at(replicaPort, url),
    async pids() {
      // the first line of postmaster.pid is the postmaster's pid
      const pid = async (dataDir: string) => Number((await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
      return { primary: await pid(primaryDir), replica: await pid(replicaDir) };
    },
    async killReplica() {
      await pgCtl(replicaDir, ['-m', 'immediate', 'stop']);
      started.splice(started.indexOf(replicaDir), 1);
    },
    stop,
  };
}
