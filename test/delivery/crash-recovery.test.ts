import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createHarness, redisUrl, type Harness } from '../helpers/harness.js';
import { setCredentials, startGateways, storedNotification, waitFor, type Gateways } from '../helpers/gateways.js';
import { HmsMock } from '../mocks/hms-mock.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { TEST_SECRETS_KEY } from '../engines/secrets-key.js';

/**
 * A worker process is killed with SIGKILL in the middle of a fan-out; a new worker process takes the
 * stalled job over, resumes from the checkpoint, and every device gets its push (Huawei devices too, whose
 * batches the fan-out job sends itself). Runs the real server
 * (ROLE=worker) as a child process, on both queue backends.
 */
const DEVICES = 6_000;

const backends = [
  { name: 'postgres' as const, enabled: true },
  { name: 'redis' as const, enabled: redisUrl() !== null },
];

for (const backend of backends) {
  describe.skipIf(!backend.enabled)(`a killed worker on the ${backend.name} backend`, () => {
    let h: Harness;
    let gw: Gateways;
    const children: ChildProcess[] = [];

    beforeAll(async () => {
      gw = await startGateways();
      h = await createHarness({ queue: backend.name, env: gw.env });
    });
    afterAll(async () => {
      for (const c of children) c.kill('SIGKILL');
      await h?.close();
      await gw?.close();
    });

    /** The notification once a worker has sent it (its stored row). */
    const sentNotification = (id: string) =>
      waitFor(
        'the notification to be sent',
        async () => {
          const p = await storedNotification(h.db.db, id);
          return p.state === 'sent' ? p : null;
        },
        120_000,
        100,
      );

    const startWorker = (env: Record<string, string> = {}) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
        env: {
          ...process.env,
          ...gw.env,
          ROLE: 'worker',
          DATABASE_URL: h.databaseUrl,
          SECRETS_KEY: TEST_SECRETS_KEY,
          REDIS_URL: backend.name === 'redis' ? redisUrl()! : '',
          QUEUE_PREFIX: h.queuePrefix,
          DELIVERY_BATCH_SIZE: '40',
          FANOUT_PAGE_SIZE: '40', // many small pages, so the kill lands inside the fan-out
          JOB_LOCK_MS: '2000', // a dead worker's job is taken over after 2 s
          LOG_LEVEL: 'warn',
          ...env,
        },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      children.push(child);
      return child;
    };

    it('resumes the fan-out and delivers to every device, none skipped', async () => {
      const { app, keys } = await h.createApp();
      await setCredentials(h, app.id, gw);
      // Bulk-inserted (the device API is covered elsewhere): half iOS, half Android, unique tokens.
      await sql`
        insert into devices (app_id, platform, token)
        select ${app.id}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex')
        from generate_series(1, ${DEVICES}) as i`.execute(h.db.db);

      const res = await h.server.inject({
        method: 'POST',
        url: '/v6/notifications',
        headers: { authorization: basic(keys.write) },
        payload: { notification: { to: '*', payload: { alert: 'survive' } } },
      });
      expect(res.statusCode).toBe(201);
      const id = res.json().id as string;
      const progress = () => storedNotification(h.db.db, id);

      const first = startWorker();
      await waitFor(
        'the fan-out to be under way',
        async () => {
          const p = await progress();
          return p.fanout_seq > 10 && !p.fanout_done;
        },
        60_000,
        5,
      );
      first.kill('SIGKILL');
      const atKill = await progress();
      expect(atKill.fanout_done).toBe(false);

      startWorker();
      const done = await sentNotification(id);

      expect(done.devices_targeted).toBe(DEVICES);
      expect(done.pushes_succeeded).toBe(DEVICES);
      // no device was cut into two batches, none left out
      const cut = await sql<{ total: number; distinct: number }>`
        select count(*)::int as total, count(distinct d)::int as distinct
        from delivery_batches b, unnest(b.device_ids) d where b.notification_id = ${id}::uuid`.execute(h.db.db);
      expect(cut.rows[0]).toEqual({ total: DEVICES, distinct: DEVICES });
      // every device got the push; a batch in flight at the kill may have been sent twice (at-least-once)
      const received = new Set([...gw.apns.pushes, ...gw.fcm.pushes].map((p) => p.token));
      expect(received.size).toBe(DEVICES);
      const duplicates = gw.apns.pushes.length + gw.fcm.pushes.length - DEVICES;
      expect(duplicates).toBeLessThanOrEqual(8 * 40); // at most the batches in flight when the worker died
    });

    it('loses no Huawei push when the worker whose fan-out sends them is killed', async () => {
      // a Huawei broadcast's batches are sent by its fan-out job itself, not by delivery jobs; the workers of the
      // test before know no mock HMS
      for (const c of children) c.kill('SIGKILL');
      const hms = await HmsMock.start({ record: false });
      try {
        hms.addApp('10000003', 'hms-secret');
        const received = new Map<string, number>();
        hms.onAccept = (token) => received.set(token, (received.get(token) ?? 0) + 1);
        const { app, keys } = await h.createApp();
        await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setHms(app.id, {
          hmsAppId: '10000003',
          clientSecret: 'hms-secret',
        });
        await sql`
          insert into devices (app_id, platform, token)
          select ${app.id}::uuid, 'huawei', 'IQAAAACy0' || md5(i::text) || md5((-i)::text)
          from generate_series(1, ${DEVICES}) as i`.execute(h.db.db);
        hms.faults.sometimes(1, { type: 'delay', ms: 20 }); // the sends take a while, so the kill lands among them
        const res = await h.server.inject({
          method: 'POST',
          url: '/v6/notifications',
          headers: { authorization: basic(keys.write) },
          payload: { notification: { to: '*', payload: { alert: 'survive', title: 'pushd' } } },
        });
        expect(res.statusCode).toBe(201);
        const id = res.json().id as string;
        const progress = () => storedNotification(h.db.db, id);
        const env = { HMS_ORIGIN: hms.origin, HMS_TOKEN_URL: hms.tokenUrl };

        const first = startWorker(env);
        await waitFor('the fan-out to be under way', async () => received.size > 400 && !(await progress()).fanout_done, 60_000, 5);
        first.kill('SIGKILL');
        expect(received.size).toBeLessThan(DEVICES);

        startWorker(env);
        const done = await sentNotification(id);
        expect(done.devices_targeted).toBe(DEVICES);
        expect(done.pushes_succeeded).toBe(DEVICES);
        expect(received.size).toBe(DEVICES);
        // a batch sent and not yet recorded at the kill is sent again: at most DELIVERY_CONCURRENCY × 2 of them
        const twice = [...received.values()].filter((n) => n > 1).length;
        expect(twice).toBeLessThanOrEqual(16 * 40);
      } finally {
        await hms.close();
      }
    });

    if (backend.name === 'redis')
      it('loses no push when Redis loses its jobs (restart without persistence)', async () => {
        const { app, keys } = await h.createApp();
        await setCredentials(h, app.id, gw);
        await sql`insert into devices (app_id, platform, token) select ${app.id}::uuid, 'android', encode(sha256(int4send(-i)), 'hex') from generate_series(1, 50) as i`.execute(
          h.db.db,
        );
        gw.reset();
        const res = await h.server.inject({
          method: 'POST',
          url: '/v6/notifications',
          headers: { authorization: basic(keys.write) },
          payload: { notification: { to: '*', payload: { alert: 'after restart' } } },
        });
        const id = res.json().id as string;
        // The fan-out job is in Redis; wipe this deployment's keys as a Redis restart without persistence would.
        const redis = new Redis(redisUrl()!);
        const doomed = await redis.keys(`${h.queuePrefix}:*`);
        expect(doomed.length).toBeGreaterThan(0);
        await redis.del(...doomed);
        await redis.quit();

        startWorker({ SWEEP_AFTER_SECONDS: '1' });
        const done = await waitFor(
          'the swept notification to be sent',
          async () => {
            const n = await storedNotification(h.db.db, id);
            return n.state === 'sent' || n.state === 'failed' ? n : null;
          },
          30_000,
          100,
        );
        expect(done.state).toBe('sent');
        expect(done.pushes_succeeded).toBe(50);
        expect(new Set(gw.fcm.pushes.map((p) => p.token)).size).toBe(50);
      });
  });
}
