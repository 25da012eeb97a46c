import { spawn } from 'node:child_process';
import { existsSync, openSync, closeSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomApnsToken } from '../mocks/index.js';
import { startGateways, type Gateways } from '../helpers/gateways.js';
import { freePort, Proc, ROOT } from './proc.js';

/**
 * `pushd backup` beside a running embedded default while devices keep registering, `pushd restore` into a fresh
 * directory, and a server started there: it serves the devices and sends to them with the app's APNs key, which
 * opens with the key the backup carried (or, for a backup made --without-secrets-key, the key given at restore).
 */
describe('backup and restore of the embedded default', () => {
  let gw: Gateways;
  let dir: string;
  const procs: Proc[] = [];
  const dataDirs: string[] = [];
  /** the first test's DATA_DIR (its server stopped) and app, backed up again by the second */
  let source: Awaited<ReturnType<typeof embedded>>;
  let app: { id: string };
  let identitySecret: string;

  beforeAll(async () => {
    gw = await startGateways();
    dir = await mkdtemp(path.join(os.tmpdir(), 'pushd-backup-'));
    await chmod(dir, 0o755); // as root, PostgreSQL runs as the postgres user and must reach its directory
  });
  afterAll(async () => {
    for (const p of procs) await p.stop('SIGKILL');
    for (const dataDir of dataDirs) await stopLeftPostgres(dataDir);
    await gw?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const embedded = async (name: string) => {
    const dataDir = path.join(dir, name);
    dataDirs.push(dataDir);
    const port = await freePort();
    const env = {
      DATA_DIR: dataDir,
      DATABASE_URL: '',
      REDIS_URL: '',
      EMBEDDED_PG_PORT: String(await freePort()),
      PORT: String(port),
      HOST: '127.0.0.1',
      NODE_EXTRA_CA_CERTS: path.join(ROOT, 'test/fixtures/tls/ca.pem'),
      ...gw.env,
    };
    return { dataDir, env, base: `http://127.0.0.1:${port}` };
  };
  const cli = async (env: Record<string, string>, ...args: string[]) => {
    const p = Proc.cli(args, env);
    procs.push(p);
    const { code } = await p.exited;
    return { code, stdout: p.stdout, stderr: p.stderr };
  };
  const ok = (r: { code: number | null; stdout: string; stderr: string }) => {
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  };
  const server = async (env: Record<string, string>) => {
    const p = Proc.server(env);
    procs.push(p);
    await p.waitForLog('listening', 240_000);
    return p;
  };
  const call = (base: string, key: string, method: string, url: string, body?: unknown) =>
    fetch(`${base}${url}`, {
      method,
      headers: { authorization: `Basic ${Buffer.from(`:${key}`).toString('base64')}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  it('restores a backup taken while the server runs into a DATA_DIR a new server serves and sends from', async () => {
    source = await embedded('source');
    const first = await server(source.env);
    const created = ok(await cli(source.env, 'app', 'create', '--bundle-id', 'com.example.backup')) as {
      app: { id: string };
      keys: { read: string; write: string; sdk: string };
      identity_secret: string;
    };
    ({ app, identity_secret: identitySecret } = created);
    const { keys } = created;
    const keyFile = path.join(dir, 'AuthKey.p8');
    await writeFile(keyFile, gw.apnsKey.credentials.keyPem);
    const { keyId, teamId } = gw.apnsKey.credentials;
    ok(await cli(source.env, 'app', 'set-apns', '--app', app.id, '--key-file', keyFile, '--key-id', keyId, '--team-id', teamId));

    const register = async () => {
      const token = randomApnsToken();
      const res = await call(source.base, keys.sdk, 'POST', '/v6/devices', { device: { platform: 'ios', token } });
      expect(res.status).toBe(201);
      return { id: ((await res.json()) as { device: { id: string } }).device.id, token };
    };
    const before: { id: string; token: string }[] = [];
    for (let i = 0; i < 20; i++) before.push(await register());

    // devices keep registering while the backup is taken, beside the server
    const during: { id: string; token: string }[] = [];
    let writing = true;
    const writer = (async () => {
      // paced under the sdk key's rate limit: the point is writes during the copy, not a flood
      while (writing) {
        during.push(await register());
        await sleep(100);
      }
    })();
    const file = path.join(dir, 'pushd.backup');
    const made = ok(await cli(source.env, 'backup', '--out', file));
    writing = false;
    await writer;
    expect(made).toMatchObject({ out: file, postgres_version: '18', secrets_key_included: true });
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(first.running).toBe(true);
    expect((await call(source.base, keys.read, 'GET', `/v6/devices/${before[0]!.id}`)).status).toBe(200);
    expect(during.length).toBeGreaterThan(0);

    // restore refuses a directory that holds anything
    const busy = path.join(dir, 'busy');
    await mkdir(busy);
    await writeFile(path.join(busy, 'x'), '');
    const refused = await cli(source.env, 'restore', '--from', file, '--data-dir', busy);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`${busy} is not empty`);

    const target = await embedded('restored');
    expect(ok(await cli(target.env, 'restore', '--from', file, '--data-dir', target.dataDir))).toMatchObject({
      data_dir: target.dataDir,
      secrets_key_restored: true,
      checked: true, // opened once on a port of its own, beside the source's running server
      apps: 1,
    });
    await first.stop('SIGTERM'); // the source machine is gone
    const second = await server(target.env);
    for (const device of before) {
      const res = await call(target.base, keys.read, 'GET', `/v6/devices/${device.id}`);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { device: { token: string } }).device.token).toBe(device.token);
    }

    // a push to every device goes out with the APNs key sealed in the restored database
    const sent = await call(target.base, keys.write, 'POST', '/v6/notifications', {
      notification: { to: '*', payload: { alert: 'restored' } },
    });
    expect(sent.status).toBe(201);
    const { id } = (await sent.json()) as { id: string };
    let notification: Record<string, unknown> = {};
    for (let i = 0; i < 300 && notification.state !== 'sent'; i++) {
      await new Promise((r) => setTimeout(r, 200));
      notification = (await (await call(target.base, keys.read, 'GET', `/v6/notifications/${id}`)).json()) as Record<string, unknown>;
    }
    expect(notification.state).toBe('sent');
    const sentTo = new Set(gw.apns.pushes.map((p) => p.token));
    for (const device of before) expect(sentTo.has(device.token)).toBe(true);
    // what registered during the backup is there or not as a whole: nothing else, nothing half
    const known = new Set([...before, ...during].map((d) => d.token));
    expect([...sentTo].every((t) => known.has(t))).toBe(true);
    expect(notification.pushes_succeeded).toBe(sentTo.size);
    await second.stop('SIGTERM');
  }, 600_000);

  it('restores a backup made --without-secrets-key to stdout with the key given apart', async () => {
    // the first test's DATA_DIR, its server stopped: the backup starts its PostgreSQL for the copy
    const file = path.join(dir, 'keyless.backup');
    const answer = await backupToStdout(source.env, file);
    expect(answer).toMatchObject({ out: '-', secrets_key_included: false });
    expect((await readFile(file)).subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b])); // gzip, nothing before it

    const bare = await embedded('bare');
    expect(ok(await cli(bare.env, 'restore', '--from', file, '--data-dir', bare.dataDir))).toMatchObject({ checked: false });
    const refused = await cli(bare.env, 'app', 'list');
    expect(refused.code).toBe(2); // its secrets are sealed under a key this DATA_DIR lacks
    expect(existsSync(path.join(bare.dataDir, 'secrets.key'))).toBe(true); // the refused start made a new one

    const withKey = await embedded('with-key');
    const wrongKey = await cli(
      withKey.env,
      'restore',
      '--from',
      file,
      '--data-dir',
      withKey.dataDir,
      '--secrets-key-file',
      path.join(bare.dataDir, 'secrets.key'),
    );
    expect(wrongKey.code).toBe(2);
    expect(wrongKey.stderr).toContain('is not the one');
    const restored = ok(
      await cli(
        withKey.env,
        'restore',
        '--from',
        file,
        '--data-dir',
        withKey.dataDir,
        '--secrets-key-file',
        path.join(source.dataDir, 'secrets.key'),
      ),
    );
    expect(restored).toMatchObject({ secrets_key_restored: true, checked: true, apps: 1 });
    const on = ok(await cli(withKey.env, 'app', 'set-identity-verification', '--app', app.id, '--on'));
    expect(on.identity_secret).toBe(identitySecret);
  }, 600_000);
});

/** `pushd backup --out - --without-secrets-key > file`: the archive on stdout, the answer on stderr. */
async function backupToStdout(env: Record<string, string>, file: string): Promise<Record<string, unknown>> {
  const fd = openSync(file, 'w', 0o600);
  try {
    const child = spawn(process.execPath, ['bin/pushd.js', 'backup', '--out', '-', '--without-secrets-key'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
      stdio: ['ignore', fd, 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code, stderr).toBe(0);
    return JSON.parse(stderr) as Record<string, unknown>;
  } finally {
    closeSync(fd);
  }
}

/** A PostgreSQL a failed test left running on a data directory. */
async function stopLeftPostgres(dataDir: string): Promise<void> {
  const pidFile = path.join(dataDir, 'postgres', 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
  if (pid > 0 && (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim() === 'postgres') {
    process.kill(pid, 'SIGINT');
    for (let i = 0; i < 100 && existsSync(`/proc/${pid}`); i++) await new Promise((r) => setTimeout(r, 100));
  }
}
