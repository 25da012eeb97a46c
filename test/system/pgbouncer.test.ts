import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { testKeyring } from '../engines/secrets-key.js';
import { startGateways, waitFor, type Gateways } from '../helpers/gateways.js';
import { startPgBouncer, type PgBouncer } from '../engines/pgbouncer.js';
import { generateApnsKey, randomApnsToken } from '../mocks/index.js';
import { freePort, freshDatabase, Proc, ROOT } from './proc.js';

const BUNDLE = 'com.example.bouncer';
const kidOf = (jwt: string): unknown => JSON.parse(Buffer.from(jwt.split('.')[0]!, 'base64url').toString()).kid;

/**
 * A compiled API process and a worker process whose pools go through a real PgBouncer in transaction mode, as big
 * deployments run them, with DATABASE_LISTEN_URL a session connection to PostgreSQL for LISTEN (and the PostgreSQL
 * queue backend). Both migrate through PgBouncer at once; a revoked key and rotated credentials apply within
 * moments, which they would only after the 60 s backstop if the changes were listened for through PgBouncer.
 */
describe('behind PgBouncer in transaction mode', () => {
  let bouncer: PgBouncer;
  let gw: Gateways;
  let database: Awaited<ReturnType<typeof freshDatabase>>;
  let direct: DatabaseHandle;
  const procs: Proc[] = [];
  let base: string;
  let app: { id: string };
  let keys: { read: string; write: string; sdk: string };

  beforeAll(async () => {
    bouncer = await startPgBouncer({ serverUrl: inject('adminDatabaseUrl') });
    gw = await startGateways();
    gw.apns.addTopic(BUNDLE);
    database = await freshDatabase();
    const port = await freePort();
    const env = {
      DATABASE_URL: bouncer.through(database.url),
      DATABASE_LISTEN_URL: database.url,
      // PgBouncer 1.18 (Debian 12) keeps no prepared statements in transaction mode
      DATABASE_PREPARE_THRESHOLD: '0',
      QUEUE_PREFIX: `bouncer${port}`,
      ...gw.env,
      NODE_EXTRA_CA_CERTS: path.join(ROOT, 'test/fixtures/tls/ca.pem'),
      RATE_LIMIT_PER_SECOND: '0',
      SCHEDULE_POLL_MS: '100',
    };
    const api = Proc.server({ ...env, ROLE: 'api', PORT: String(port), HOST: '127.0.0.1' });
    const worker = Proc.server({ ...env, ROLE: 'worker' });
    procs.push(api, worker);
    await Promise.all([api.waitForLog('listening'), worker.waitForLog('worker running')]);
    base = `http://127.0.0.1:${port}`;

    direct = openDatabase(database.url);
    ({ app, keys } = await new AppService({ db: direct.db, secrets: testKeyring(), repos: createRepositories() }).createApp(BUNDLE));
    await new AppService({ db: direct.db, secrets: testKeyring(), repos: createRepositories() }).setPushCredentials(
      app.id,
      'apns',
      gw.apnsKey.credentials,
    );
  }, 120_000);

  afterAll(async () => {
    for (const p of procs) await p.stop('SIGKILL');
    await direct?.close();
    await database?.drop();
    await gw?.close();
    await bouncer?.stop();
  });

  const call = (method: string, url: string, key: string, body?: unknown, headers: Record<string, string> = {}) =>
    fetch(`${base}${url}`, {
      method,
      headers: {
        authorization: `Basic ${Buffer.from(`:${key}`).toString('base64')}`,
        ...(body !== undefined && { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  it('answers 401 for a revoked key within seconds', async () => {
    // the key is read (and kept) by the API process
    expect((await call('GET', '/v6/notifications', keys.read)).status).toBe(200);
    expect((await call('GET', '/v6/notifications', keys.read)).status).toBe(200);
    await new AppService({ db: direct.db, secrets: testKeyring(), repos: createRepositories() }).revokeKey(keys.read);
    const revokedAt = Date.now();
    await waitFor('the revoked key to answer 401', async () => (await call('GET', '/v6/notifications', keys.read)).status === 401, 5000);
    expect(Date.now() - revokedAt).toBeLessThan(5000); // a kept copy would answer 200 for up to 60 s
  });

  it('delivers through the worker and the API, and both pick up rotated credentials within seconds', async () => {
    const token = randomApnsToken();
    const registered = await call('POST', '/v6/devices', keys.sdk, { device: { platform: 'ios', token } });
    expect(registered.status).toBe(201);
    const deviceId = ((await registered.json()) as { device: { id: string } }).device.id;
    const to = [{ name: 'device_id', criteria: [deviceId] }];
    let sends = 0;
    /** a notification to the device: sent by the worker (through the queue) with an Idempotency-Key, else by the API */
    const send = async (by: 'worker' | 'api') => {
      sends += 1;
      const res = await call(
        'POST',
        '/v6/notifications',
        keys.write,
        { notification: { to, payload: { alert: `push ${sends}` } } },
        by === 'worker' ? { 'idempotency-key': `bouncer-${sends}` } : {},
      );
      expect(res.status).toBe(201);
      const alert = `push ${sends}`;
      return waitFor(
        `${alert} (sent by the ${by})`,
        async () => gw.apns.pushes.find((p) => (p.payload.aps as { alert?: unknown }).alert === alert),
        10_000,
      );
    };

    for (const by of ['worker', 'api'] as const) expect(kidOf((await send(by)).jwt)).toBe(gw.apnsKey.credentials.keyId);

    const rotated = generateApnsKey({ teamId: gw.apnsKey.credentials.teamId });
    gw.apns.addKey(rotated);
    await new AppService({ db: direct.db, secrets: testKeyring(), repos: createRepositories() }).setPushCredentials(
      app.id,
      'apns',
      rotated.credentials,
    );
    const rotatedAt = Date.now();
    // both processes sign with the new key once they hear the change, within seconds (a kept copy would sign with
    // the old one for up to 60 s)
    for (const by of ['worker', 'api'] as const) {
      const rotatedKid = async () => kidOf((await send(by)).jwt) === rotated.credentials.keyId;
      await waitFor(`the ${by} to sign with the rotated key`, rotatedKid, 5000, 0);
    }
    expect(Date.now() - rotatedAt).toBeLessThan(5000);
  });
});
