import { execFile } from 'node:child_process';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { portAnswers } from '../system/proc.js';

const run = promisify(execFile);

/**
 * Runs a database engine's command as the postgres user: PostgreSQL and PgBouncer refuse to run as root, and the
 * tests may run as root (CI containers).
 */
export function runAsPostgres(command: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  const asRoot = process.getuid?.() === 0;
  return asRoot ? run('runuser', ['-u', 'postgres', '--', command, ...args]) : run(command, args);
}

/** A temporary directory the postgres user owns, removed by the returned function. */
export async function engineDir(prefix: string): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  if (process.getuid?.() === 0) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    await chown(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

export async function untilPortAnswers(port: number, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await portAnswers(port))) {
    if (Date.now() > deadline) throw new Error(`${what} did not listen on port ${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Stops a daemon by its pid (SIGINT: PgBouncer's and PostgreSQL's fast shutdown) and waits until it is gone. */
export async function stopPid(pid: number, timeoutMs = 10_000): Promise<void> {
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (!alive()) return;
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + timeoutMs;
  while (alive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (alive()) process.kill(pid, 'SIGKILL');
}
