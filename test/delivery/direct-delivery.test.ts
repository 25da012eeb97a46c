import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, storedNotification, waitFor, type Gateways } from '../helpers/gateways.js';
import { freePort } from '../system/proc.js';
import { TEST_SECRETS_KEY } from '../engines/secrets-key.js';

/**
 * A notification whose audience is cut when it is created (a device, a user's devices) is sent by the process
 * that created it, without a trip through the queue. The harness here is an API process with no worker: what
 * arrives was sent by it, and what it leaves to the queue waits for a worker process started by the test.
 */
describe('unicast notifications sent by the process that created them', () => {
  let h: Harness;
  let gw: Gateways;
  let keys: { read: string; write: string; sdk: string };
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    gw = await startGateways();
    // the sweep's wait is also what a slow direct send marks progress against (a third of it)
    h = await createHarness({ env: { ...gw.env, SWEEP_AFTER_SECONDS: '1' } });
    const created = await h.createApp('com.example.direct');
    keys = created.keys;
    await setCredentials(h, created.app.id, gw);
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await h?.close();
    await gw?.close();
  });
  beforeEach(() => gw.reset());

  /** A process of the server (from the sources) on the harness's database and queue; `running` once it logged that. */
  const startProcess = (env: Record<string, string>) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: {
        ...process.env,
        ...gw.env,
        DATABASE_URL: h.databaseUrl,
        SECRETS_KEY: TEST_SECRETS_KEY,
        REDIS_URL: '',
        QUEUE_PREFIX: h.queuePrefix,
        LOG_LEVEL: 'info',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const running = new Promise<void>((resolve) => {
      let out = '';
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (/"msg":"(worker running|listening)/.test(out)) resolve();
      });
    });
    return { child, exited, running };
  };
  /** An API process of its own, listening; answers its base URL. */
  const startApi = async () => {
    const port = await freePort();
    const api = startProcess({ ROLE: 'api', PORT: String(port), HOST: '127.0.0.1' });
    const base = `http://127.0.0.1:${port}`;
    await waitFor('the API process to listen', async () => (await fetch(`${base}/health`).catch(() => null))?.ok, 30_000, 50);
    return { ...api, base };
  };
  const body = (to: unknown, alert: string) => ({ notification: { to, payload: { alert } } });
  const post = async (to: unknown, alert: string) => {
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      payload: body(to, alert),
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };
  /** The same, to a process started by the test. */
  const postTo = async (base: string, to: unknown, alert: string) => {
    const res = await fetch(`${base}/v6/notifications`, {
      method: 'POST',
      headers: { authorization: basic(keys.write), 'content-type': 'application/json' },
      body: JSON.stringify(body(to, alert)),
    });
    expect(res.status).toBe(201);
    return ((await res.json()) as { id: string }).id;
  };
  const stored = async (id: string) => {
    const { state, devices_targeted, pushes_succeeded, pushes_failed } = await storedNotification(h.db.db, id);
    return { state, devices_targeted, pushes_succeeded, pushes_failed };
  };
  const finished = (id: string) =>
    waitFor(`notification ${id} to finish`, async () => {
      const n = await stored(id);
      return n.state === 'sent' || n.state === 'failed' ? n : null;
    });
  const batchesOf = (id: string) =>
    h.db.db.selectFrom('delivery_batches').select(['state', 'attempts']).where('notification_id', '=', id).execute();
  const answered = (token: string) => gw.fcm.answers.filter((a) => a.token === token).map((a) => a.status);

  it('sends a notification to one device with no worker running', async () => {
    const device = await registerDevice(h, keys.sdk, { platform: 'android' });
    const id = await post([{ name: 'device_id', criteria: [device.id] }], 'direct');
    expect(await finished(id)).toEqual({ state: 'sent', devices_targeted: 1, pushes_succeeded: 1, pushes_failed: 0 });
    expect(gw.fcm.pushes.map((p) => p.token)).toEqual([device.token]);
    expect(await batchesOf(id)).toEqual([{ state: 'done', attempts: 1 }]);
  });

  it('sends one created alone (with an Idempotency-Key) with no worker running, as a group does', async () => {
    const device = await registerDevice(h, keys.sdk, { platform: 'android' });
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write), 'idempotency-key': `direct-alone-${device.id}` },
      payload: body([{ name: 'device_id', criteria: [device.id] }], 'alone'),
    });
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().id as string;
    expect(await finished(id)).toEqual({ state: 'sent', devices_targeted: 1, pushes_succeeded: 1, pushes_failed: 0 });
    expect(gw.fcm.pushes.map((p) => p.token)).toEqual([device.token]);
  });

  it("sends to each of a user's devices once, one batch a platform", async () => {
    const user = 'direct-user';
    const ios = await registerDevice(h, keys.sdk, { platform: 'ios', user_id: user });
    const android = await registerDevice(h, keys.sdk, { platform: 'android', user_id: user });
    const id = await post([{ name: 'user_id', criteria: [user] }], 'to both');
    expect(await finished(id)).toEqual({ state: 'sent', devices_targeted: 2, pushes_succeeded: 2, pushes_failed: 0 });
    expect(gw.apns.pushes.map((p) => p.token)).toEqual([ios.token]);
    expect(gw.fcm.pushes.map((p) => p.token)).toEqual([android.token]);
  });

  it('leaves a push the gateway asks to retry to the queue, where a worker sends it once', async () => {
    const device = await registerDevice(h, keys.sdk, { platform: 'android' });
    gw.fcm.faults.forToken(device.token, { type: 'status', status: 503, reason: 'UNAVAILABLE' }, 1);
    const id = await post([{ name: 'device_id', criteria: [device.id] }], 'retried');
    // the first attempt is recorded; with no worker nothing more happens
    await waitFor('the first attempt to be recorded', async () => (await batchesOf(id))[0]?.attempts === 1);
    await new Promise((r) => setTimeout(r, 300));
    expect(await batchesOf(id)).toEqual([{ state: 'pending', attempts: 1 }]);
    expect(answered(device.token)).toEqual([503]);

    const worker = startProcess({ ROLE: 'worker', RETRY_BASE_MS: '40' });
    expect(await finished(id)).toMatchObject({ state: 'sent', pushes_succeeded: 1 });
    expect(answered(device.token)).toEqual([503, 200]);
    expect(await batchesOf(id)).toEqual([{ state: 'done', attempts: 2 }]);
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  });

  it('finishes its sends in flight when stopped (SIGTERM)', async () => {
    const device = await registerDevice(h, keys.sdk, { platform: 'android' });
    gw.fcm.faults.forToken(device.token, { type: 'delay', ms: 1500 }, 1); // the gateway takes its time to answer
    const api = await startApi();
    const id = await postTo(api.base, [{ name: 'device_id', criteria: [device.id] }], 'before the stop');
    await waitFor('the push in flight', async () => gw.fcm.requestCount >= 1, 10_000, 10);
    expect(gw.fcm.pushes).toHaveLength(0); // not answered yet
    api.child.kill('SIGTERM');

    expect(await api.exited).toBe(0);
    expect(gw.fcm.pushes.map((p) => p.token)).toEqual([device.token]);
    expect(await stored(id)).toMatchObject({ state: 'sent', pushes_succeeded: 1 });
  });

  it('keeps a send slower than the sweep from the sweeper while it runs: pushed once', async () => {
    const worker = startProcess({ ROLE: 'worker', SWEEP_AFTER_SECONDS: '1' });
    await worker.running;
    const device = await registerDevice(h, keys.sdk, { platform: 'android' });
    gw.fcm.faults.forToken(device.token, { type: 'delay', ms: 3000 }, 1);
    const id = await post([{ name: 'device_id', criteria: [device.id] }], 'slow');
    // past the time a process that created it may hold it: only the send's marks of progress keep the sweeper off
    await h.db.db
      .updateTable('notifications')
      .set({ created_at: new Date(Date.now() - 60_000) })
      .where('id', '=', id)
      .execute();
    expect(await finished(id)).toMatchObject({ state: 'sent', pushes_succeeded: 1 });
    await new Promise((r) => setTimeout(r, 1500)); // a second send would arrive now
    expect(answered(device.token)).toEqual([200]);
    expect(await batchesOf(id)).toEqual([{ state: 'done', attempts: 1 }]);
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  });

  it('a push whose process is killed mid-send is sent by the sweeper of a worker', async () => {
    const device = await registerDevice(h, keys.sdk, { platform: 'android' });
    gw.fcm.faults.forToken(device.token, { type: 'delay', ms: 5000 }, 1);
    const api = await startApi();
    const id = await postTo(api.base, [{ name: 'device_id', criteria: [device.id] }], 'survives a kill');
    await waitFor('the push in flight', async () => gw.fcm.requestCount >= 1, 10_000, 10);
    api.child.kill('SIGKILL');
    await api.exited;
    expect(await batchesOf(id)).toEqual([{ state: 'pending', attempts: 0 }]);
    // the sweeper leaves it to its process while that may still be sending it: as if that time had passed
    await h.db.db
      .updateTable('notifications')
      .set({ created_at: new Date(Date.now() - 60_000) })
      .where('id', '=', id)
      .execute();

    const worker = startProcess({ ROLE: 'worker', SWEEP_AFTER_SECONDS: '1' });
    expect(await finished(id)).toMatchObject({ state: 'sent', pushes_succeeded: 1 });
    expect(gw.fcm.pushes.map((p) => p.token)).toContain(device.token);
    expect(await batchesOf(id)).toEqual([{ state: 'done', attempts: 1 }]);
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  });
});
