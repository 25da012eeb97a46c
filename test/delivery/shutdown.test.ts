import { spawn } from 'node:child_process';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { setCredentials, startGateways, storedNotification, waitFor, type Gateways } from '../helpers/gateways.js';
import { TEST_SECRETS_KEY } from '../engines/secrets-key.js';

/** SIGTERM to a worker with pushes in flight: it finishes and records the batch, then exits 0. */
describe('graceful shutdown of a worker', () => {
  let h: Harness;
  let gw: Gateways;

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ env: gw.env });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  it('finishes in-flight batches before exiting', async () => {
    const { app, keys } = await h.createApp();
    await setCredentials(h, app.id, gw);
    await sql`insert into devices (app_id, platform, token) select ${app.id}::uuid, 'ios', encode(sha256(int4send(i)), 'hex') from generate_series(1, 20) as i`.execute(
      h.db.db,
    );
    gw.apns.faults.next(20, { type: 'delay', ms: 1500 }); // the gateway takes its time to answer

    const worker = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: {
        ...process.env,
        ...gw.env,
        ROLE: 'worker',
        DATABASE_URL: h.databaseUrl,
        SECRETS_KEY: TEST_SECRETS_KEY,
        REDIS_URL: '',
        QUEUE_PREFIX: h.queuePrefix,
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const exited = new Promise<number | null>((resolve) => worker.on('exit', (code) => resolve(code)));

    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      payload: { notification: { to: '*', payload: { alert: 'bye' } } },
    });
    const id = res.json().id as string;
    await waitFor('pushes in flight', async () => gw.apns.requestCount >= 20, 30_000, 10);
    expect(gw.apns.accepted).toBe(0); // nothing answered yet
    worker.kill('SIGTERM');

    expect(await exited).toBe(0);
    expect(gw.apns.accepted).toBe(20);
    const n = await storedNotification(h.db.db, id);
    expect({ state: n.state, pushes_succeeded: n.pushes_succeeded }).toEqual({ state: 'sent', pushes_succeeded: 20 });
  });
});
