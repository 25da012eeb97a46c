import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { loadConfig } from '../../src/platform/config.js';
import { openDatabaseRuntime } from '../../src/app/runtime.js';
import { createLogger } from '../../src/platform/logger.js';
import { ensureDatabase } from '../../src/db/embedded.js';
import { withTestSecretsKey } from '../../test/engines/secrets-key.js';

export const CA_PATH = path.resolve('test/fixtures/tls/ca.pem');

export function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

/** A database for a benchmark: on DATABASE_URL's server, or the embedded PostgreSQL under .bench-data. */
export async function benchDatabase(benchName: string): Promise<{ url: string; close(): Promise<void> }> {
  // BENCH_DB_SUFFIX keeps the databases of runs side by side on one server (two checkouts) apart
  const name = `${benchName}${process.env.BENCH_DB_SUFFIX ?? ''}`;
  const log = createLogger('warn');
  const config = loadConfig({ ...process.env, DATA_DIR: process.env.DATA_DIR ?? '.bench-data', LOG_LEVEL: 'warn' });
  const runtime = await openDatabaseRuntime(config, log, { migrate: false });
  const admin = new URL(runtime.url);
  admin.pathname = '/postgres';
  const c = new pg.Client({ connectionString: admin.toString() });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await c.end();
  await ensureDatabase(admin.toString(), name);
  const url = new URL(runtime.url);
  url.pathname = `/${name}`;
  await runtime.handle.close();
  return { url: url.toString(), close: () => runtime.embedded?.stop() ?? Promise.resolve() };
}

export { freePort } from '../../test/engines/engines.js';

/** The node flags production uses: scripts/node-flags, read by `npm start` and the Docker image too. */
export const PRODUCTION_NODE_ARGS = readFileSync(new URL('../../scripts/node-flags', import.meta.url), 'utf8')
  .split('\n')
  .map((line) => line.trim())
  .filter((line) => line && !line.startsWith('#'));

/** Starts the real service, compiled (dist/, built by bench/index.ts), as its own process, as production runs it. */

/** `stdout`: where its log lines go (a file's descriptor, as a log collector reads them), else this terminal. */
export function startService(
  env: Record<string, string>,
  nodeArgs: string[] = PRODUCTION_NODE_ARGS,
  stdout: number | 'inherit' = 'inherit',
): ChildProcess {
  return spawn(process.execPath, [...nodeArgs, 'dist/src/main.js'], {
    env: withTestSecretsKey({ ...process.env, NODE_EXTRA_CA_CERTS: CA_PATH, LOG_LEVEL: 'warn', ...env }),
    stdio: ['ignore', stdout, 'inherit'],
  });
}

export async function waitReady(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} not ready`);
}

/** Peak resident set size of a process (VmHWM), in MB. */
export function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
  return Math.round(kb / 1024);
}

/**
 * /proc/<pid>/stat as numbers, from the field after the parenthesised name: [1] the parent, [11] utime, [12] stime,
 * [13] cutime, [14] cstime (the exited children's, once waited for); times in clock ticks.
 */
function procStat(pid: number | string): number[] {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ').map(Number);
}
const CLOCK_TICKS_PER_SECOND = 100; // sysconf(_SC_CLK_TCK) on Linux

/** CPU time (user + system, all threads: GC helpers included) a process has used so far, in ms. */
export function cpuMs(pid: number): number {
  const stat = procStat(pid);
  return ((stat[11]! + stat[12]!) * 1000) / CLOCK_TICKS_PER_SECOND;
}

/**
 * A server's CPU time, ms, on this machine: its main process, its live children, and its children that have
 * exited (a backend whose connection closed); `pid` is the main process.
 */
export function serverCpuMs(pid: number): number {
  const main = procStat(pid);
  let ticks = main[11]! + main[12]! + main[13]! + main[14]!;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const child = procStat(entry);
      if (child[1] === pid) ticks += child[11]! + child[12]!;
    } catch {
      // exited meanwhile: its time is in its parent's cutime
    }
  }
  return (ticks * 1000) / CLOCK_TICKS_PER_SECOND;
}

/** The parent process of `pid` (the postmaster of a PostgreSQL backend). */
export function parentPid(pid: number): number {
  return procStat(pid)[1]!;
}

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function printTable(rows: [string, string][]): void {
  const w = Math.max(...rows.map((r) => r[0].length));
  console.log(`| ${'measure'.padEnd(w)} | value |`);
  console.log(`|${'-'.repeat(w + 2)}|-------|`);
  for (const [k, v] of rows) console.log(`| ${k.padEnd(w)} | ${v} |`);
}

/** A Markdown table: the first column left-aligned, the others right-aligned. */
export function printRows(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  console.log(line(header));
  console.log(`|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`);
  for (const r of rows) console.log(line(r));
}

/**
 * Runs a benchmark's client in a process of its own (as the worker is), so it does not share a core with the mock
 * gateways: `node --import tsx <script> <json spec>`, whose last line of output is its JSON result. `nodeArgsEnv`
 * names an environment variable of node flags for it (space-separated: --cpu-prof, --trace-gc).
 */
export function runBenchChild<T>(script: string, spec: object, nodeArgsEnv: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const nodeArgs = process.env[nodeArgsEnv]?.split(' ').filter(Boolean) ?? [];
    const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script, JSON.stringify(spec)], {
      env: { ...process.env, NODE_EXTRA_CA_CERTS: CA_PATH },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${script} exited ${code}`));
      // the last line is the result; anything before it is what the node flags made node print (--trace-gc)
      const lines = out.trim().split('\n');
      if (lines.length > 1) process.stderr.write(lines.slice(0, -1).join('\n') + '\n');
      resolve(JSON.parse(lines.at(-1)!) as T);
    });
  });
}
