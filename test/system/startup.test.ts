import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { redisUrl } from '../helpers/harness.js';
import { freePort, freshDatabase, portAnswers, Proc } from './proc.js';

/** The server process as `npm start` runs it: configuration errors, secrets in logs, ROLE=api|worker|all. */

describe('a bad configuration value stops start-up naming the variable', () => {
  it.concurrent.each([
    [{ PORT: 'abc' }, 'PORT'],
    [{ ROLE: 'foo' }, 'ROLE'],
    [{ LOG_LEVEL: 'verbose' }, 'LOG_LEVEL'],
    [{ DATABASE_URL: 'not-a-url' }, 'DATABASE_URL'],
    [{ EMBEDDED_PG_PORT: '99999' }, 'EMBEDDED_PG_PORT'],
  ])('%j', async (env, name) => {
    const p = Proc.server(env);
    const { code } = await p.exited;
    expect(code).toBe(2);
    expect(p.stderr).toMatch(new RegExp(`^invalid configuration: .*\\b${name}: `));
    expect(p.stdout).toBe(''); // nothing started, nothing logged
  });
});

describe('server roles', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  beforeAll(async () => {
    db = await freshDatabase();
  });
  afterAll(async () => db?.drop());

  it('ROLE=api serves HTTP, masks the database password in its start-up line, stops cleanly on SIGTERM', async () => {
    const port = await freePort();
    // A password the log must never show. With trust auth (local/CI) any password connects;
    // with the embedded test cluster the URL already carries its real password.
    const url = new URL(db.url);
    if (!url.password) url.password = 'not-a-real-secret-Qx7';
    const secret = decodeURIComponent(url.password);
    const p = Proc.server({
      DATABASE_URL: url.toString(),
      REDIS_URL: '',
      ROLE: 'api',
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'debug',
    });
    try {
      const starting = await p.waitForLog('starting');
      const listening = await p.waitForLog('listening');
      expect(listening).toMatchObject({ role: 'api', queue: 'postgres' });
      const logged = (starting.config as { DATABASE_URL: string }).DATABASE_URL;
      expect(logged).toBe(url.toString().replace(`:${url.password}@`, ':***@'));

      const health = await fetch(`http://127.0.0.1:${port}/health`);
      expect(health.status).toBe(200);
      // LISTEN_DESCRIPTORS' default: the listening socket held as 64 descriptors, fetched once it listens
      await vi.waitFor(() => expect(listeningDescriptors(p.child.pid!, port)).toBe(64), { timeout: 10_000, interval: 100 });
      const ready = await fetch(`http://127.0.0.1:${port}/ready`);
      expect(await ready.json()).toEqual({ status: 'ok', checks: { database: 'ok', queue: 'ok' } });
      // a request with a credential, logged at debug: the credential stays out of the log
      const credential = Buffer.from(':some-api-key-value-123').toString('base64');
      const denied = await fetch(`http://127.0.0.1:${port}/v6/notifications/x`, { headers: { authorization: `Basic ${credential}` } });
      expect(denied.status).toBe(401);

      expect(await p.stop('SIGTERM'), p.output).toEqual({ code: 0, signal: null });
      await expect(p.waitForLog('stopped', 1000)).resolves.toBeDefined();
      expect(p.output).not.toContain(secret);
      expect(p.output).not.toContain(encodeURIComponent(secret));
      expect(p.output).not.toContain(credential);
      expect(p.output).not.toContain('some-api-key-value-123');
    } finally {
      await p.stop('SIGKILL');
    }
  });

  it('ROLE=worker runs without an HTTP port and stops cleanly on SIGTERM', async () => {
    const port = await freePort();
    const p = Proc.server({ DATABASE_URL: db.url, REDIS_URL: '', ROLE: 'worker', PORT: String(port), HOST: '127.0.0.1' });
    try {
      expect(await p.waitForLog('worker running')).toMatchObject({ role: 'worker', queue: 'postgres' });
      expect(await portAnswers(port)).toBe(false);
      expect(p.output).not.toMatch(/"msg":"listening"/);
      expect(await p.stop('SIGTERM'), p.output).toEqual({ code: 0, signal: null });
    } finally {
      await p.stop('SIGKILL');
    }
  });

  it.runIf(redisUrl())('ROLE=all with REDIS_URL queues on Redis and serves HTTP', async () => {
    const port = await freePort();
    const p = Proc.server({
      DATABASE_URL: db.url,
      REDIS_URL: redisUrl()!,
      QUEUE_PREFIX: `sys_${port}`,
      ROLE: 'all',
      PORT: String(port),
      HOST: '127.0.0.1',
    });
    try {
      expect(await p.waitForLog('listening')).toMatchObject({ role: 'all', queue: 'redis' });
      const ready = await fetch(`http://127.0.0.1:${port}/ready`);
      expect(await ready.json()).toEqual({ status: 'ok', checks: { database: 'ok', queue: 'ok' } });
      expect(await p.stop('SIGTERM'), p.output).toEqual({ code: 0, signal: null });
    } finally {
      await p.stop('SIGKILL');
    }
  });
});

/** How many descriptors process `pid` holds of the socket listening on `port` (the socket's inode, from /proc). */
function listeningDescriptors(pid: number, port: number): number {
  const localPort = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const inodes = ['/proc/net/tcp', '/proc/net/tcp6']
    .flatMap((table) => readFileSync(table, 'utf8').split('\n').slice(1))
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields[1]?.endsWith(localPort) && fields[3] === '0A')
    .map((fields) => `socket:[${fields[9]}]`);
  const targets = readdirSync(`/proc/${pid}/fd`).map((fd) => {
    try {
      return readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      return '';
    }
  });
  return targets.filter((target) => inodes.includes(target)).length;
}
