/**
 * WAL bytes one database's work wrote between two positions, told apart from other databases' on a shared server:
 * pg_waldump over the range, each record counted when it names a relation of the database or belongs to a
 * transaction that did (its commit record too). Needs pg_waldump and the server's pg_wal readable (a local server
 * run by the same machine's superuser); null when either is not there.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { sql } from 'kysely';
import type { DatabaseHandle } from '../../src/db/database.js';
import { cpuMs } from './setup.js';

export interface WalMark {
  lsn: string;
  walDir: string | null;
  databaseOid: string;
}

/** The current WAL position, and where the server keeps its WAL (null when this process cannot read it). */
export async function walMark(db: DatabaseHandle): Promise<WalMark> {
  const { rows } = await sql<{ lsn: string; dir: string | null; oid: string }>`
    select pg_current_wal_lsn()::text as lsn,
           (select setting from pg_settings where name = 'data_directory') as dir,
           (select oid::text from pg_database where datname = current_database()) as oid`.execute(db.db);
  const row = rows[0]!;
  return { lsn: row.lsn, walDir: row.dir && path.join(row.dir, 'pg_wal'), databaseOid: row.oid };
}

/** The WAL bytes the database of `from` wrote from `from` to now (null when pg_waldump cannot read them). */
export async function databaseWalSince(db: DatabaseHandle, from: WalMark): Promise<number | null> {
  if (!from.walDir) return null;
  const to = await walMark(db);
  let out: string;
  try {
    out = execFileSync(waldump(), ['-p', from.walDir, '-s', from.lsn, '-e', to.lsn], {
      encoding: 'utf8',
      maxBuffer: 1 << 30,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
  } catch (err) {
    // pg_waldump exits non-zero at the end of the range it could read; what it printed counts
    out = (err as { stdout?: string }).stdout ?? '';
    if (!out) return null;
  }
  return sumOfDatabase(out, from.databaseOid);
}

/**
 * The WAL bytes the whole server wrote from `from` to now: what stands for the database's on a server of the bench's
 * own (the embedded one) when pg_waldump cannot read its WAL (Debian's is PostgreSQL 15's; the embedded is 18).
 */
export async function serverWalSince(db: DatabaseHandle, from: WalMark): Promise<number> {
  const { rows } = await sql<{ bytes: string }>`
    select pg_wal_lsn_diff(pg_current_wal_lsn(), ${from.lsn}::pg_lsn)::text as bytes`.execute(db.db);
  return Number(rows[0]!.bytes);
}

/** pg_waldump: on the PATH, else in PostgreSQL's bindir (Debian's packages keep it there). */
function waldump(): string {
  try {
    return path.join(execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim(), 'pg_waldump');
  } catch {
    return 'pg_waldump';
  }
}

const RECORD = /len \(rec\/tot\):\s*\d+\/\s*(\d+), tx:\s*(\d+)/;

function sumOfDatabase(dump: string, oid: string): number {
  const ours = ` rel 1663/${oid}/`;
  const records = dump.split('\n').flatMap((line) => {
    const m = RECORD.exec(line);
    return m ? [{ bytes: Number(m[1]), tx: m[2]!, ours: line.includes(ours) }] : [];
  });
  const transactions = new Set(records.filter((r) => r.ours && r.tx !== '0').map((r) => r.tx));
  return records.reduce((sum, r) => sum + (r.ours || transactions.has(r.tx) ? r.bytes : 0), 0);
}

/**
 * The CPU ms the backends connected to the database have used so far, by pid: on a server other benches share, the
 * postmaster's children are theirs too.
 */
export async function databaseBackendsCpu(db: DatabaseHandle): Promise<Map<number, number>> {
  const { rows } = await sql<{ pid: number }>`
    select pid from pg_stat_activity where datname = current_database()`.execute(db.db);
  const cpu = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      cpu.set(pid, cpuMs(pid));
    } catch {
      // exited meanwhile
    }
  }
  return cpu;
}

/**
 * The CPU ms the database's backends used since `before` (databaseBackendsCpu): a backend started since counts whole,
 * one that exited meanwhile loses its time (the pools keep theirs).
 */
export async function backendsCpuSince(db: DatabaseHandle, before: Map<number, number>): Promise<number> {
  let ms = 0;
  for (const [pid, now] of await databaseBackendsCpu(db)) ms += now - (before.get(pid) ?? 0);
  return ms;
}
