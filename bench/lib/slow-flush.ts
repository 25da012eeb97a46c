import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { PG_BIN } from '../../test/engines/pg-replica.js';
import { startPrivatePostgres, type RestartableService } from './private-services.js';

const run = promisify(execFile);

/**
 * A PostgreSQL of the benchmark's own whose WAL flush takes `delayMs` longer than this machine's disk makes it
 * (bench/lib/slow-flush.c, preloaded), as on a disk slow to flush or with a synchronous standby: the targets that
 * are read against `pgbench -N` were set on such a machine. The machine's PostgreSQL 15 binaries, default settings.
 */
export async function startSlowFlushPostgres(delayMs: number): Promise<RestartableService> {
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
  return {
    ...server,
    async stop() {
      await server.stop();
      rmSync(libraryDir, { recursive: true, force: true });
    },
  };
}
