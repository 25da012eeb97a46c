import pg from 'pg';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, basic, metricsAuth, TEST_METRICS_TOKEN, type Harness } from '../helpers/harness.js';
import { registerDevice, waitFor } from '../helpers/gateways.js';
import { startPrimaryWithReplica, type PrimaryWithReplica } from '../engines/pg-replica.js';

const filters = [{ name: 'locale', criteria: ['fr_FR'] }];

/**
 * DATABASE_READ_URL against a real streaming replica of a primary the file starts: counts, audience device pages
 * and lists are read there while it keeps up (shown by pausing its replay: they miss a write the primary serves),
 * and from the primary once its lag passes READ_MAX_LAG_SECONDS; /metrics reports the lag.
 */
describe('read replica', () => {
  let engines: PrimaryWithReplica;
  let replica: pg.Client;
  /** READ_MAX_LAG_SECONDS large enough to keep reading from a paused replica */
  let patient: Harness;
  /** READ_MAX_LAG_SECONDS=1 */
  let strict: Harness;

  beforeAll(async () => {
    engines = await startPrimaryWithReplica();
    replica = new pg.Client({ connectionString: engines.replicaUrl });
    await replica.connect();
    const harness = (maxLag: string) =>
      createHarness({
        adminDatabaseUrl: engines.primaryUrl,
        env: (databaseUrl) => ({
          DATABASE_READ_URL: engines.onReplica(databaseUrl),
          READ_MAX_LAG_SECONDS: maxLag,
          METRICS_TOKEN: TEST_METRICS_TOKEN,
        }),
      });
    patient = await harness('3600');
    strict = await harness('1');
  }, 60_000);
  afterEach(async () => {
    await replica.query('select pg_wal_replay_resume()');
  });
  afterAll(async () => {
    await patient?.close();
    await strict?.close();
    await replica?.end();
    await engines?.stop();
  });

  const call = (h: Harness, method: 'GET' | 'POST', url: string, key: string, body?: unknown) =>
    h.server.inject({ method, url, headers: { authorization: basic(key) }, ...(body !== undefined && { payload: body as object }) });
  const count = async (h: Harness, key: string) => (await call(h, 'POST', '/v6/audiences/count', key, { filters })).json().device_count;
  const metric = async (h: Harness, name: string) => {
    const text = (await h.server.inject({ method: 'GET', url: '/metrics', headers: metricsAuth })).body;
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    return line === undefined ? undefined : Number(line.slice(name.length + 1));
  };
  /** Waits until the replica has replayed everything the primary wrote so far. */
  const caughtUp = async (h: Harness) => {
    const { rows } = await sql<{ lsn: string }>`select pg_current_wal_lsn()::text as lsn`.execute(h.db.db);
    await waitFor('the replica to catch up', async () => {
      const r = await replica.query('select pg_last_wal_replay_lsn() >= $1::pg_lsn as done', [rows[0]!.lsn]);
      return r.rows[0].done as boolean;
    });
  };
  const register = async (h: Harness, sdk: string) => registerDevice(h, sdk, { platform: 'ios', locale: 'fr_FR' });
  const notify = async (h: Harness, write: string) => {
    const res = await call(h, 'POST', '/v6/notifications', write, { notification: { to: filters, payload: { alert: 'x' } } });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; to: { id: string } };
  };
  const listedIds = async (h: Harness, read: string) =>
    ((await call(h, 'GET', '/v6/notifications?per=50', read)).json() as { notifications: { id: string }[] }).notifications.map((n) => n.id);

  it('serves counts, audience pages and the notification list from the replica; a notification read by id from the primary', async () => {
    const { keys } = await patient.createApp();
    for (let i = 0; i < 3; i++) await register(patient, keys.sdk);
    const first = await notify(patient, keys.write);
    await caughtUp(patient);
    expect(await metric(patient, 'pushd_read_replica_in_use')).toBe(1);
    // read at the next check (the last one may have caught the replay mid-way)
    await waitFor('no lag reported', async () => (await metric(patient, 'pushd_read_replica_lag_seconds')) === 0, 3000);

    await replica.query('select pg_wal_replay_pause()');
    await register(patient, keys.sdk);
    const second = await notify(patient, keys.write);
    // the caller's own write, read by id, comes from the primary
    expect((await call(patient, 'GET', `/v6/notifications/${second.id}`, keys.read)).statusCode).toBe(200);
    // what the replica serves has not replayed it
    expect(await count(patient, keys.read)).toBe(3);
    const audience = await call(patient, 'GET', `/v6/audiences/${first.to.id}`, keys.read);
    expect(audience.json().audience.device_count).toBe(3);
    const page = await call(patient, 'GET', `/v6/audiences/${first.to.id}/devices?per=10`, keys.read);
    expect([page.json().meta.total, page.json().devices.length]).toEqual([3, 3]);
    const listed = await listedIds(patient, keys.read);
    expect(listed).toContain(first.id);
    expect(listed).not.toContain(second.id);
    expect(await metric(patient, 'pushd_read_replica_in_use')).toBe(1);

    await replica.query('select pg_wal_replay_resume()');
    await caughtUp(patient);
    expect(await count(patient, keys.read)).toBe(4);
    expect(await listedIds(patient, keys.read)).toContain(second.id);
  });

  it('reads from the primary while the replica lags past READ_MAX_LAG_SECONDS, and from the replica again once it catches up', async () => {
    const { keys } = await strict.createApp();
    for (let i = 0; i < 2; i++) await register(strict, keys.sdk);
    await caughtUp(strict);
    await waitFor('the replica in use', async () => (await metric(strict, 'pushd_read_replica_in_use')) === 1, 5000);

    await replica.query('select pg_wal_replay_pause()');
    await register(strict, keys.sdk);
    await waitFor('the replica bypassed', async () => (await metric(strict, 'pushd_read_replica_in_use')) === 0, 5000);
    expect(await metric(strict, 'pushd_read_replica_lag_seconds')).toBeGreaterThan(1);
    // a fresh count sees the write the replica has not replayed
    expect(await count(strict, keys.read)).toBe(3);

    await replica.query('select pg_wal_replay_resume()');
    await waitFor('the replica in use again', async () => (await metric(strict, 'pushd_read_replica_in_use')) === 1, 5000);
    expect(await metric(strict, 'pushd_read_replica_lag_seconds')).toBeLessThanOrEqual(1);
    expect(await count(strict, keys.read)).toBe(3);
  });
});
