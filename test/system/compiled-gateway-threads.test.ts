import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomApnsToken, randomFcmToken } from '../mocks/index.js';
import { startGateways, type Gateways } from '../helpers/gateways.js';
import { freePort, freshDatabase, Proc, ROOT } from './proc.js';

/**
 * GATEWAY_THREADS=1 as production runs it: the compiled server starts its gateway thread from the compiled
 * thread-main.js (the suite's other threaded tests load the TypeScript through a test shim). Set up as a new
 * user would: credentials stored with the CLI, devices registered with the sdk key, a notification to all.
 */
describe('the compiled server with its gateways in a worker thread', () => {
  let gw: Gateways;
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let dir: string;
  const procs: Proc[] = [];
  beforeAll(async () => {
    gw = await startGateways();
    db = await freshDatabase();
    dir = await mkdtemp(path.join(os.tmpdir(), 'pushd-threads-'));
  });
  afterAll(async () => {
    for (const p of procs) await p.stop('SIGKILL');
    await gw?.close();
    await db?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  const cli = async (...args: string[]) => {
    const p = Proc.cli(args, { DATABASE_URL: db.url });
    procs.push(p);
    const { code } = await p.exited;
    expect(code, p.output).toBe(0);
    return JSON.parse(p.stdout) as Record<string, unknown>;
  };

  it('delivers to APNs and FCM and stops cleanly', async () => {
    const { app, keys } = (await cli('app', 'create', '--bundle-id', 'com.example.threads')) as {
      app: { id: string };
      keys: { write: string; read: string; sdk: string };
    };
    const keyFile = path.join(dir, 'AuthKey.p8');
    const accountFile = path.join(dir, 'service-account.json');
    await writeFile(keyFile, gw.apnsKey.credentials.keyPem);
    await writeFile(accountFile, JSON.stringify(gw.serviceAccount.json));
    const { keyId, teamId } = gw.apnsKey.credentials;
    await cli('app', 'set-apns', '--app', app.id, '--key-file', keyFile, '--key-id', keyId, '--team-id', teamId);
    await cli('app', 'set-fcm', '--app', app.id, '--service-account', accountFile);

    const port = await freePort();
    const server = Proc.server({
      DATABASE_URL: db.url,
      REDIS_URL: '',
      PORT: String(port),
      HOST: '127.0.0.1',
      GATEWAY_THREADS: '1',
      NODE_EXTRA_CA_CERTS: path.join(ROOT, 'test/fixtures/tls/ca.pem'),
      ...gw.env,
    });
    procs.push(server);
    await server.waitForLog('listening');
    const base = `http://127.0.0.1:${port}`;
    const call = (key: string, method: string, url: string, body?: unknown) =>
      fetch(`${base}${url}`, {
        method,
        headers: { authorization: `Basic ${Buffer.from(`:${key}`).toString('base64')}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });

    for (const device of [
      { platform: 'ios', token: randomApnsToken() },
      { platform: 'android', token: randomFcmToken() },
    ]) {
      expect((await call(keys.sdk, 'POST', '/v6/devices', { device })).status).toBe(201);
    }
    const created = await call(keys.write, 'POST', '/v6/notifications', { notification: { to: '*', payload: { alert: 'threads' } } });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };

    let notification: Record<string, unknown> = {};
    for (let i = 0; i < 150 && notification.state !== 'sent'; i++) {
      await new Promise((r) => setTimeout(r, 200));
      notification = (await (await call(keys.read, 'GET', `/v6/notifications/${id}`)).json()) as Record<string, unknown>;
    }
    expect(notification).toMatchObject({ state: 'sent', pushes_succeeded: 2 });
    expect(gw.apns.pushes).toHaveLength(1);
    expect(gw.fcm.pushes).toHaveLength(1);

    const { code } = await server.stop('SIGTERM');
    expect(code, server.output).toBe(0);
    expect(server.output).toContain('"msg":"stopped"');
  });
});
