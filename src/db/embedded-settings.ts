import { readFile, writeFile, appendFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** The file of the embedded cluster that holds the settings pushd sizes to the machine, rewritten at each start. */
export const SETTINGS_FILE = 'pushd.conf';
const INCLUDE_LINE = `include_if_exists = '${SETTINGS_FILE}'`;

const MB = 1024 * 1024;
const clamp = (v: number, min: number, max: number) => Math.min(max, Math.max(min, v));
const megabytes = (bytes: number) => `${Math.floor(bytes / MB)}MB`;

/**
 * The memory this process may use: the machine's, or the container's limit when one is set (a cgroup's limit is
 * reported by `process.constrainedMemory`; an unlimited one reads as a number beyond the machine's memory).
 */
export function memoryOfThisMachine(): number {
  const total = os.totalmem();
  const limit = process.constrainedMemory();
  return limit > 0 && limit < total ? limit : total;
}

/**
 * The settings of the embedded PostgreSQL for a machine of `memoryBytes`. initdb's defaults are sized for any
 * machine at all: 128 MB of shared buffers, so a push server's working set (devices, their indexes, the day's
 * notifications and batches) was evicted and written back by the backends themselves, and a checkpoint by
 * `max_wal_size` every 1 GB of WAL, each followed by full-page images of every page touched again. A quarter of the
 * memory for the buffers (at most 8 GB), half for the planner's view of the cache, and checkpoints at most every
 * 15 minutes or 4 GB of WAL are PostgreSQL's own tuning advice for a server that has the machine to itself.
 */
export function settingsFor(memoryBytes: number): Record<string, string> {
  return {
    shared_buffers: megabytes(clamp(memoryBytes / 4, 128 * MB, 8192 * MB)),
    effective_cache_size: megabytes(clamp(memoryBytes / 2, 512 * MB, 65536 * MB)),
    max_wal_size: '4GB',
    checkpoint_timeout: '15min',
  };
}

/**
 * Writes `settings` to the cluster's SETTINGS_FILE and includes it at the end of postgresql.conf (once), so they take
 * effect at this start and follow the machine when it changes. ALTER SYSTEM (postgresql.auto.conf, read after
 * postgresql.conf) still overrides any of them.
 */
export async function writeClusterSettings(clusterDir: string, settings: Record<string, string>): Promise<void> {
  const lines = Object.entries(settings).map(([name, value]) => `${name} = '${value}'`);
  const header = '# Written by pushd at each start of its embedded PostgreSQL, sized to this machine (docs/deploying.md).';
  await writeFile(path.join(clusterDir, SETTINGS_FILE), [header, ...lines, ''].join('\n'), { mode: 0o644 });
  const conf = path.join(clusterDir, 'postgresql.conf');
  const text = await readFile(conf, 'utf8');
  if (!text.split('\n').includes(INCLUDE_LINE)) await appendFile(conf, `${text.endsWith('\n') ? '' : '\n'}${INCLUDE_LINE}\n`);
}
