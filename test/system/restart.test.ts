import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, Proc } from './proc.js';

/**
 * `npm start` on a bare machine: no DATABASE_URL, so an embedded PostgreSQL under DATA_DIR. The CLI shares the
 * running cluster; a kill -9 of the server loses nothing; a restart on the same DATA_DIR finds everything.
 */
describe('embedded PostgreSQL: restart on the same DATA_DIR, also after kill -9', () => {
  let dataDir: string;
  let env: Record<string, string>;
  let base: string;
  const procs: Proc[] = [];
  const server = () => {
    const p = Proc.server(env);
    procs.push(p);
    return p;
  };

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'pushd-system-'));
    await chmod(dataDir, 0o755); // as root, PostgreSQL runs as the postgres user and must reach its directory
    const port = await freePort();
    env = {
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      EMBEDDED_PG_PORT: String(await freePort()),
      DATABASE_URL: '',
      REDIS_URL: '',
      SHUTDOWN_TIMEOUT_MS: '20000',
    };
    base = `http://127.0.0.1:${port}`;
  });

  afterAll(async () => {
    for (const p of procs) await p.stop('SIGKILL');
    // A PostgreSQL our server started and left behind (the test failed between kill -9 and restart).
    const pidFile = path.join(dataDir, 'postgres', 'postmaster.pid');
    if (existsSync(pidFile)) {
      const pid = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
      if (pid > 0 && (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim() === 'postgres') {
        process.kill(pid, 'SIGINT');
        for (let i = 0; i < 100 && existsSync(`/proc/${pid}`); i++) await new Promise((r) => setTimeout(r, 100));
      }
    }
    await rm(dataDir, { recursive: true, force: true });
  });

  it('keeps apps, notifications and audiences across kill -9 and a restart', async () => {
    // 1. first start initialises the cluster
    const first = server();
    await first.waitForLog('listening', 150_000);
    expect(existsSync(path.join(dataDir, 'postgres', 'PG_VERSION'))).toBe(true);
    expect((await fetch(`${base}/ready`)).status).toBe(200);

    // 2. the CLI, on the same DATA_DIR while the server runs, shares its cluster
    const cli = Proc.cli(['app', 'create', '--bundle-id', 'com.example.system', '--name', 'System'], env);
    procs.push(cli);
    const { code } = await cli.exited;
    expect(cli.stderr).toBe('');
    expect(code).toBe(0);
    const created = JSON.parse(cli.stdout) as { app: { id: string }; keys: { read: string; write: string } };
    expect(first.running).toBe(true); // the CLI did not stop the server's PostgreSQL
    const auth = (key: string) => ({ authorization: `Basic ${Buffer.from(`:${key}`).toString('base64')}` });

    // 3. a notification to an on-the-fly audience
    const to = [{ name: 'locale', criteria: ['fr_FR'] }];
    const post = await fetch(`${base}/v6/notifications`, {
      method: 'POST',
      headers: { ...auth(created.keys.write), 'content-type': 'application/json' },
      body: JSON.stringify({ notification: { to, payload: { alert: 'survives', custom: { k: 1 } } } }),
    });
    expect(post.status).toBe(201);
    const notification = (await post.json()) as { id: string; to: { id: string } };
    const readNotification = async () =>
      (await fetch(`${base}/v6/notifications/${notification.id}`, { headers: auth(created.keys.read) })).json();
    const readAudience = async () =>
      (await fetch(`${base}/v6/audiences/${notification.to.id}`, { headers: auth(created.keys.read) })).json();
    const notificationBefore = (await readNotification()) as Record<string, unknown>;
    const audienceBefore = (await readAudience()) as { audience: Record<string, unknown> };

    // 4. kill -9: no shutdown at all
    first.child.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');

    // 5. restart on the same DATA_DIR: everything is still there
    const second = server();
    await second.waitForLog('listening', 120_000);
    const notificationAfter = (await readNotification()) as Record<string, unknown>;
    expect(notificationAfter).toMatchObject({
      id: notification.id,
      created_at: notificationBefore.created_at,
      to: { id: notification.to.id, type: 'Audience' },
      notification: { to, payload: { alert: 'survives', custom: { k: 1 } } },
    });
    expect(await readAudience()).toEqual(audienceBefore);
    // the same spec still resolves to the same stored audience
    const again = await fetch(`${base}/v6/notifications`, {
      method: 'POST',
      headers: { ...auth(created.keys.write), 'content-type': 'application/json' },
      body: JSON.stringify({ notification: { to, payload: { alert: 'again' } } }),
    });
    expect(((await again.json()) as { to: { id: string } }).to.id).toBe(notification.to.id);

    // 6. a clean stop: exit 0, PostgreSQL stopped with it
    expect(await second.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);

    // 7. and once more after the clean stop
    const third = server();
    await third.waitForLog('listening', 120_000);
    expect(((await readNotification()) as { id: string }).id).toBe(notification.id);
    expect(await third.stop('SIGTERM')).toEqual({ code: 0, signal: null });
  }, 300_000);
});
