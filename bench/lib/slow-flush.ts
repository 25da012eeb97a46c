import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { PG_BIN } from '../../test/engines/pg-replica.js';
import { startPrivatePostgres, type RestartableService } from './private-services.js';

const run = promisify(execFile);

/**
 * A PostgreSQL of the benchmark's own whose WAL flush takes `delayMs` longer than this machine's disk makes it
 * (bench/lib/slow-flush.c, preloaded), as on a disk slow to flush or with a synchronous standby: the targets that
 * are read against `pgbench -N` were set on such a machine. The machine's PostgreSQL 15 binaries, default settings.
 */
async function startSlowFlushPostgres(delayMs: number): Promise<RestartableService> {
  // the library's directory is not the cluster's (startPrivatePostgres empties that), and every user may read it
  const libraryDir = mkdtempSync(path.join(tmpdir(), 'pushd-slow-flush-'));
  chmodSync(libraryDir, 0o755);
  const library = path.join(libraryDir, 'slow-flush.so');
  const source = fileURLToPath(new URL('./slow-flush.c', import.meta.url));
  await run('cc', ['-shared', '-fPIC', '-O2', '-o', library, source, '-ldl']);
  const server = await startPrivatePostgres(path.join(tmpdir(), `pushd-slow-flush-cluster-${process.pid}`), {
    binDir: PG_BIN,
    env: { LD_PRELOAD: library, SLOW_FLUSH_US: String(Math.round(delayMs * 1000)) },
  });
  try {
    await recycleWal(server.url, WAL_SEGMENTS_AHEAD);
  } catch (err) {
    await server.stop();
    rmSync(libraryDir, { recursive: true, force: true });
    throw err;
  }
  return {
    ...server,
    async stop() {
      await server.stop();
      rmSync(libraryDir, { recursive: true, force: true });
    },
  };
}

/**
 * `--flush-delay-ms`'s server for a benchmark: none at 0; else started, made the process's DATABASE_URL (every database
 * the benchmark makes, pgbench's too, lands on it) and killed when the process exits however it ends.
 */
export async function slowFlushDatabase(delayMs: number): Promise<RestartableService | null> {
  if (delayMs === 0) return null;
  const server = await startSlowFlushPostgres(delayMs);
  process.on('exit', () => server.kill());
  process.env.DATABASE_URL = server.url;
  return server;
}

/**
 * 16 MB segments: more than the largest `bench/unicast` configuration writes before its next checkpoint (~550 MB for
 * 62,000 devices registered and 60,000 notifications at --rate; ~250 MB for 23,000 and 3,000); each next configuration
 * drops the last one's database, which checkpoints and so recycles again.
 */
const WAL_SEGMENTS_AHEAD = 48;

/**
 * A new cluster has no WAL segments to reuse: each is zero-filled and synced when the WAL first reaches it, which
 * holds every commit for 50–80 ms on this disk, once every ~5,000 unicast notifications. A server that has run a
 * while reuses the segments its checkpoints no longer need, so those are made here and recycled by a checkpoint.
 */
async function recycleWal(url: string, segments: number): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('create table wal_fill (n int)');
    for (let i = 0; i < segments; i++) {
      // a switch with nothing written since the last one does not move to a new segment
      await client.query('insert into wal_fill values (1)');
      await client.query('select pg_switch_wal()');
    }
    await client.query('drop table wal_fill');
    await client.query('checkpoint');
  } finally {
    await client.end();
  }
}
