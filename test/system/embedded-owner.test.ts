import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../src/db/embedded.js';
import { memoryOfThisMachine, settingsFor, SETTINGS_FILE } from '../../src/db/embedded-settings.js';
import { createLogger } from '../../src/platform/logger.js';
import { randomApnsToken } from '../mocks/index.js';
import { startGateways, type Gateways } from '../helpers/gateways.js';
import { freePort, Proc, ROOT } from './proc.js';

/**
 * Who stops the embedded PostgreSQL of a DATA_DIR. One cluster for the file: started here first (as a running
 * server would), used by the CLI on other ports, then stopped and started again by a compiled server whose
 * shutdown times out.
 */
const log = createLogger('silent');
const procs: Proc[] = [];
const dirs: string[] = [];
let dataDir: string;
let pgPort: number;
let db: EmbeddedDatabase | undefined;

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pushd-owner-'));
  await chmod(dir, 0o755); // as root, PostgreSQL runs as the postgres user and must reach its directory
  dirs.push(dir);
  return dir;
}

const pidFile = () => path.join(dataDir, 'postgres', 'postmaster.pid');
const postmasterPid = async () => Number((await readFile(pidFile(), 'utf8')).split('\n')[0]);
const alive = (pid: number) => existsSync(`/proc/${pid}`);

async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    return (await client.query('SELECT 1 AS one')).rows[0]?.one === 1;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function cli(args: string[], env: Record<string, string>): Promise<Proc> {
  const p = Proc.cli(args, { DATA_DIR: dataDir, DATABASE_URL: '', ...env });
  procs.push(p);
  await p.exited;
  return p;
}

beforeAll(async () => {
  dataDir = await tempDir();
  pgPort = await freePort();
  db = await startEmbeddedPostgres(dataDir, pgPort, log);
}, 150_000);

afterAll(async () => {
  for (const p of procs) await p.stop('SIGKILL');
  await db?.stop().catch(() => undefined);
  if (existsSync(pidFile())) {
    const pid = await postmasterPid();
    if (alive(pid)) process.kill(pid, 'SIGINT');
    for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
  }
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('the CLI next to a running embedded PostgreSQL', () => {
  it.each([
    ['another EMBEDDED_PG_PORT', async () => ({ EMBEDDED_PG_PORT: String(await freePort()) })],
    ['EMBEDDED_PG_PORT unset', async () => ({})],
  ])('with %s: uses it on its own port and leaves it running', async (_what, env) => {
    const pid = await postmasterPid();
    const created = await cli(['app', 'create', '--bundle-id', `com.example.owner${Date.now()}`], await env());
    expect((await created.exited).code, created.output).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ app: { id: expect.any(String) } });
    expect(created.stderr).not.toMatch(/stopping/);

    expect(await postmasterPid()).toBe(pid);
    expect(alive(pid)).toBe(true);
    expect(await answers(db!.url)).toBe(true);
    // and the app the CLI created is in it
    const listed = await cli(['app', 'list'], {});
    expect(JSON.parse(listed.stdout).apps.map((a: { id: string }) => a.id)).toContain(JSON.parse(created.stdout).app.id);
  });
});

describe("the embedded PostgreSQL's settings", () => {
  async function settings(names: string[]): Promise<Record<string, string>> {
    const client = new pg.Client({ connectionString: db!.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ name: string; value: string }>(
        'SELECT name, current_setting(name) AS value FROM unnest($1::text[]) AS name',
        [names],
      );
      return Object.fromEntries(rows.map((r) => [r.name, r.value]));
    } finally {
      await client.end();
    }
  }
  const bytes = async (size: string) => {
    const client = new pg.Client({ connectionString: db!.url });
    await client.connect();
    try {
      return Number((await client.query<{ b: string }>('SELECT pg_size_bytes($1) AS b', [size])).rows[0]!.b);
    } finally {
      await client.end();
    }
  };

  it('are sized to this machine, included once in postgresql.conf', async () => {
    const wanted = settingsFor(memoryOfThisMachine());
    const running = await settings(['shared_buffers', 'effective_cache_size', 'max_wal_size', 'checkpoint_timeout']);
    expect(await bytes(running.shared_buffers!)).toBe(await bytes(wanted.shared_buffers!));
    expect(await bytes(running.effective_cache_size!)).toBe(await bytes(wanted.effective_cache_size!));
    expect(await bytes(running.max_wal_size!)).toBe(await bytes('4GB'));
    expect(running.checkpoint_timeout).toBe('15min');
    const conf = await readFile(path.join(dataDir, 'postgres', 'postgresql.conf'), 'utf8');
    expect(conf.split('\n').filter((l) => l === `include_if_exists = '${SETTINGS_FILE}'`)).toHaveLength(1);
  });

  it('give way to ALTER SYSTEM', async () => {
    const client = new pg.Client({ connectionString: db!.url });
    await client.connect();
    try {
      await client.query("ALTER SYSTEM SET checkpoint_timeout = '20min'");
      await client.query('SELECT pg_reload_conf()');
      await new Promise((r) => setTimeout(r, 500));
      expect((await settings(['checkpoint_timeout'])).checkpoint_timeout).toBe('20min');
    } finally {
      await client.query('ALTER SYSTEM RESET checkpoint_timeout');
      await client.query('SELECT pg_reload_conf()');
      await client.end();
    }
  });
});

describe('an EMBEDDED_PG_PORT taken by another program', () => {
  it('is an error naming the port and EMBEDDED_PG_PORT', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      const p = Proc.cli(['app', 'list'], { DATA_DIR: await tempDir(), DATABASE_URL: '', EMBEDDED_PG_PORT: String(port) });
      procs.push(p);
      const { code } = await p.exited;
      expect(code, p.output).toBe(1);
      const { error } = JSON.parse(p.stdout) as { error: string };
      expect(error).toContain(`port ${port}`);
      expect(error).toContain('EMBEDDED_PG_PORT');
      expect(p.stderr).toContain(error);
    } finally {
      taken.close();
    }
  }, 60_000);
});

describe('every way out of the server stops the embedded PostgreSQL it started', () => {
  let gw: Gateways;
  beforeAll(async () => {
    gw = await startGateways();
    await db!.stop(); // from here the servers start it themselves: each is its owner
    db = undefined;
    expect(existsSync(pidFile())).toBe(false);
  });
  afterAll(async () => gw?.close());

  async function serverEnv(env: Record<string, string> = {}): Promise<Record<string, string>> {
    return {
      DATA_DIR: dataDir,
      DATABASE_URL: '',
      REDIS_URL: '',
      EMBEDDED_PG_PORT: String(pgPort),
      PORT: String(await freePort()),
      HOST: '127.0.0.1',
      NODE_EXTRA_CA_CERTS: path.join(ROOT, 'test/fixtures/tls/ca.pem'),
      ...gw.env,
      ...env,
    };
  }

  /** A server mid-broadcast: APNs takes every push and never answers, so a worker waits in its batch. */
  async function busyServer(env: Record<string, string>): Promise<{ server: Proc; postgresPid: number }> {
    const server = Proc.server(env);
    procs.push(server);
    await server.waitForLog('listening', 60_000);
    const created = await cli(['app', 'create', '--bundle-id', `com.example.slow${Date.now()}`], env);
    const { app, keys } = JSON.parse(created.stdout) as { app: { id: string }; keys: { sdk: string; write: string } };
    const keyFile = path.join(dataDir, 'AuthKey.p8');
    await writeFile(keyFile, gw.apnsKey.credentials.keyPem);
    const { keyId, teamId } = gw.apnsKey.credentials;
    const set = await cli(['app', 'set-apns', '--app', app.id, '--key-file', keyFile, '--key-id', keyId, '--team-id', teamId], env);
    expect(set.stdout).toContain(keyId);
    const call = (key: string, url: string, body: unknown) =>
      fetch(`http://127.0.0.1:${env.PORT}${url}`, {
        method: 'POST',
        headers: { authorization: `Basic ${Buffer.from(`:${key}`).toString('base64')}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    for (let i = 0; i < 3; i++) {
      expect((await call(keys.sdk, '/v6/devices', { device: { platform: 'ios', token: randomApnsToken() } })).status).toBe(201);
    }
    gw.reset();
    gw.apns.faults.sometimes(1, { type: 'delay', ms: 120_000 });
    expect((await call(keys.write, '/v6/notifications', { notification: { to: '*', payload: { alert: 'slow' } } })).status).toBe(201);
    for (let i = 0; i < 150 && gw.apns.requestCount === 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(gw.apns.requestCount).toBeGreaterThan(0);
    return { server, postgresPid: await postmasterPid() };
  }

  /** The server exits 1 saying why, and the PostgreSQL it ran is gone with its pid file. */
  async function exitedWithoutPostgres(server: Proc, postgresPid: number, why: string | RegExp): Promise<void> {
    const { code } = await server.exited;
    if (typeof why === 'string') expect(server.output).toContain(why);
    else expect(server.output).toMatch(why);
    expect(code).toBe(1);
    expect(alive(postgresPid)).toBe(false);
    expect(existsSync(pidFile())).toBe(false);
  }

  it('a shutdown that times out: SIGINT mid-broadcast, the gateway never answering', async () => {
    const { server, postgresPid } = await busyServer(await serverEnv({ SHUTDOWN_TIMEOUT_MS: '1000' }));
    server.child.kill('SIGINT');
    await exitedWithoutPostgres(server, postgresPid, 'shutdown timed out; exiting');
  }, 120_000);

  it('a second Ctrl-C while the shutdown waits', async () => {
    const { server, postgresPid } = await busyServer(await serverEnv({ SHUTDOWN_TIMEOUT_MS: '60000' }));
    // twice at once: the same Ctrl-C delivered by the terminal and by npm, not a second one (sent back to back, as
    // waiting for the log line first could take a loaded machine past the 500 ms that tell them apart)
    server.child.kill('SIGINT');
    server.child.kill('SIGINT');
    await server.waitForLog('shutting down');
    await new Promise((r) => setTimeout(r, 1000));
    expect(server.running).toBe(true);
    server.child.kill('SIGINT');
    await exitedWithoutPostgres(server, postgresPid, 'SIGINT again while shutting down; exiting');
  }, 120_000);

  it('a start-up that fails after the database started (PORT taken)', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const server = Proc.server(await serverEnv({ PORT: String((taken.address() as net.AddressInfo).port) }));
      procs.push(server);
      const { postgresPid } = (await server.waitForLog('embedded PostgreSQL is up', 60_000)) as { postgresPid: number };
      expect(postgresPid).toBeGreaterThan(0);
      await exitedWithoutPostgres(server, postgresPid, /^fatal: .*EADDRINUSE/m);
    } finally {
      taken.close();
    }
  }, 120_000);
});
