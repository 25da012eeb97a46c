import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../src/db/embedded.js';
import { createLogger } from '../../src/platform/logger.js';
import { freePort, Proc } from './proc.js';

/**
 * Clean stops and lost connections, on processes of the test's own: an embedded PostgreSQL and a redis-server
 * that the test may stop and start (never the machine's shared ones).
 */
const log = createLogger('silent');
const procs: Proc[] = [];
const dirs: string[] = [];
const clusters: EmbeddedDatabase[] = [];

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pushd-stops-'));
  await chmod(dir, 0o755); // as root, PostgreSQL runs as the postgres user and must reach its directory
  dirs.push(dir);
  return dir;
}

function server(env: Record<string, string>, opts: { group?: boolean } = {}): Proc {
  const p = Proc.server({ HOST: '127.0.0.1', SHUTDOWN_TIMEOUT_MS: '20000', ...env }, opts);
  procs.push(p);
  return p;
}

async function status(url: string): Promise<number> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(5000) })).status;
  } catch {
    return 0;
  }
}

async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`not within ${timeoutMs} ms: ${what}`);
}

afterAll(async () => {
  for (const p of procs) await p.stop('SIGKILL');
  for (const c of clusters) await c.stop().catch(() => undefined);
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('Ctrl-C in a terminal (SIGINT to the whole process group)', () => {
  it('stops the server in order, its embedded PostgreSQL last, and leaves no owner or pid file behind', async () => {
    const dataDir = await tempDir();
    const port = await freePort();
    const env = { DATA_DIR: dataDir, PORT: String(port), EMBEDDED_PG_PORT: String(await freePort()), DATABASE_URL: '', REDIS_URL: '' };
    const p = server(env, { group: true });
    await p.waitForLog('listening', 150_000);
    expect(existsSync(path.join(dataDir, 'postgres.owner'))).toBe(true);

    await keepBusy(env, port); // fan-outs queued and running, as when an operator presses Ctrl-C on a busy server

    const { code } = await p.interrupt();
    expect(code, p.output).toBe(0);
    expect(p.output).toContain('"msg":"stopped"');
    expect(p.output).not.toMatch(/"level":50/); // nothing logged as an error on the way down
    expect(existsSync(path.join(dataDir, 'postgres.owner'))).toBe(false);
    expect(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);
  });
});

describe('the CLI after a crashed server', () => {
  it('prints exactly one JSON document on stdout while it stops the PostgreSQL the crash left running', async () => {
    const dataDir = await tempDir();
    const env = {
      DATA_DIR: dataDir,
      PORT: String(await freePort()),
      EMBEDDED_PG_PORT: String(await freePort()),
      DATABASE_URL: '',
      REDIS_URL: '',
    };
    const p = server(env);
    await p.waitForLog('listening', 150_000);
    await p.stop('SIGKILL'); // its PostgreSQL, in a session of its own, keeps running

    const cli = Proc.cli(['app', 'list'], env);
    procs.push(cli);
    expect((await cli.exited).code, cli.output).toBe(0);
    expect(cli.stdout.trim().split('\n')).toHaveLength(1);
    expect(JSON.parse(cli.stdout)).toEqual({ apps: [] });
    expect(cli.stderr).toContain('stopping a PostgreSQL left running by an earlier crash');
  });
});

describe('a postmaster.pid left behind', () => {
  it('is removed, not acted on, when its pid is a postgres of another cluster', async () => {
    const other = await startEmbeddedPostgres(await tempDir(), await freePort(), log);
    clusters.push(other);
    const otherDir = dirs.at(-1)!;
    const otherPid = Number((await readFile(path.join(otherDir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n')[0]);

    const dataDir = await tempDir();
    await mkdir(path.join(dataDir, 'postgres'), { recursive: true });
    await writeFile(path.join(dataDir, 'postgres', 'postmaster.pid'), `${otherPid}\n${otherDir}/postgres\n`);
    const port = await freePort();
    const p = server({
      DATA_DIR: dataDir,
      PORT: String(port),
      EMBEDDED_PG_PORT: String(await freePort()),
      DATABASE_URL: '',
      REDIS_URL: '',
    });
    await p.waitForLog('listening', 150_000);
    expect(existsSync(`/proc/${otherPid}`)).toBe(true); // the other cluster still runs
    expect(p.output).toContain('removing a stale postmaster.pid');
    expect((await p.stop()).code).toBe(0);
  });
});

describe('PostgreSQL restarted under a running server', () => {
  let dataDir: string;
  let pgPort: number;
  let url: string;
  beforeAll(async () => {
    dataDir = await tempDir();
    pgPort = await freePort();
    const db = await startEmbeddedPostgres(dataDir, pgPort, log);
    clusters.push(db);
    url = db.url;
  });

  it.each(['postgres', 'redis'] as const)('queue on %s: /ready answers 503 meanwhile, the process survives, then 200', async (queue) => {
    const redis = queue === 'redis' ? await startRedis() : undefined;
    const port = await freePort();
    const env = { DATABASE_URL: url, REDIS_URL: redis?.url ?? '', PORT: String(port), QUEUE_PREFIX: `stops${queue}` };
    const p = server(env);
    await p.waitForLog('listening', 60_000);
    const ready = `http://127.0.0.1:${port}/ready`;
    expect(await status(ready)).toBe(200);
    await keepBusy(env, port);

    await clusters.pop()!.stop();
    await eventually('/ready answers 503', async () => (await status(ready)) === 503 || !p.running);
    expect(p.running, p.output).toBe(true);
    await new Promise((r) => setTimeout(r, 2000)); // the dropped connections' errors arrive
    expect(p.running, p.output).toBe(true);

    clusters.push(await startEmbeddedPostgres(dataDir, pgPort, log));
    await eventually('/ready answers 200 again', async () => (await status(ready)) === 200, 60_000);
    expect(p.running).toBe(true);
    expect((await p.stop()).code, p.output).toBe(0);
    await redis?.stop();
  });
});

describe('Redis restarted under a running server', () => {
  it('/ready answers 503 meanwhile, the process survives, then 200', async () => {
    const redis = await startRedis();
    const port = await freePort();
    const dataDir = await tempDir();
    const db = await startEmbeddedPostgres(dataDir, await freePort(), log);
    clusters.push(db);
    const env = { DATABASE_URL: db.url, REDIS_URL: redis.url, PORT: String(port), QUEUE_PREFIX: 'stopsredis' };
    const p = server(env);
    await p.waitForLog('listening', 60_000);
    const ready = `http://127.0.0.1:${port}/ready`;
    expect(await status(ready)).toBe(200);
    await keepBusy(env, port);

    await redis.stop();
    await eventually('/ready answers 503', async () => (await status(ready)) === 503 || !p.running);
    expect(p.running, p.output).toBe(true);
    await new Promise((r) => setTimeout(r, 2000));
    expect(p.running, p.output).toBe(true);

    await redis.start();
    await eventually('/ready answers 200 again', async () => (await status(ready)) === 200, 60_000);
    expect(p.running).toBe(true);
    expect((await p.stop()).code, p.output).toBe(0);
    await redis.stop();
  });
});

/** An app with devices and 30 notifications to all of them: fan-outs queued and running on the server. */
async function keepBusy(env: Record<string, string>, port: number): Promise<void> {
  const cli = Proc.cli(['app', 'create', '--bundle-id', `com.example.stops${Date.now()}`], env);
  procs.push(cli);
  expect((await cli.exited).code, cli.output).toBe(0);
  const { keys } = JSON.parse(cli.stdout) as { keys: { write: string } };
  const base = `http://127.0.0.1:${port}`;
  const headers = { authorization: `Basic ${Buffer.from(`:${keys.write}`).toString('base64')}`, 'content-type': 'application/json' };
  for (let i = 0; i < 20; i++) {
    const device = { device: { platform: i % 2 ? 'ios' : 'android', token: `${i}`.padStart(64, 'a') } };
    expect((await fetch(`${base}/v6/devices`, { method: 'POST', headers, body: JSON.stringify(device) })).status).toBe(201);
  }
  const notify = () =>
    fetch(`${base}/v6/notifications`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ notification: { to: '*', payload: { alert: 'x' } } }),
    });
  for (const res of await Promise.all(Array.from({ length: 30 }, notify))) expect(res.status).toBe(201);
}

/** A redis-server of the test's own on a free port, that keeps nothing on disk. */
async function startRedis(): Promise<{ url: string; start(): Promise<void>; stop(): Promise<void> }> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    await eventually('redis-server answers', async () => {
      const net = await import('node:net');
      return new Promise((resolve) => {
        const s = net.connect({ host: '127.0.0.1', port }, () => {
          s.destroy();
          resolve(true);
        });
        s.once('error', () => resolve(false));
      });
    });
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    start,
    async stop() {
      if (!child || child.exitCode !== null) return;
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    },
  };
}
