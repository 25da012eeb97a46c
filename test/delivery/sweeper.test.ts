import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { AudiencesRepository } from '../../src/db/repositories/audiences.js';
import { createRepositories } from '../../src/services/deps.js';
import { NotificationsRepository } from '../../src/db/repositories/notifications.js';
import { PartitionsRepository } from '../../src/db/repositories/partitions.js';
import { systemClock, type Clock } from '../../src/platform/clock.js';
import { createLogger } from '../../src/platform/logger.js';
import { jobSpecs, type NotificationScheduler } from '../../src/delivery/jobs.js';
import { JobQueues } from '../../src/delivery/queues.js';
import { maintainPartitions, retentionOf } from '../../src/delivery/retention.js';
import { startSweeper } from '../../src/delivery/sweeper.js';
import { basic, redisUrl, useHarness } from '../helpers/harness.js';
import { loadConfig } from '../../src/platform/config.js';

const RETENTION = retentionOf(loadConfig({}));

describe('the sweeper', () => {
  // No workers: a job added here stays waiting in the queue, as behind a long backlog.
  const h = useHarness();
  let queues: JobQueues | undefined;
  afterAll(async () => queues?.close());
  const queuesOfHarness = () =>
    (queues ??= new JobQueues({ kind: 'postgres', databaseUrl: h.databaseUrl, prefix: h.queuePrefix }, jobSpecs({ deliveryAttempts: 1 })));

  /** A broadcast as stored before its fan-out runs: no job in the queue unless the test adds one. */
  const insertBroadcast = (appId: string, audienceId: string) =>
    new NotificationsRepository().insertOrCollapse(h.db.db, {
      appId,
      audienceId,
      request: { to: '*', payload: { alert: 'x' } },
      payload: { alert: 'x' },
      collapseKey: null,
    });

  /** Lets a sweeper sweep every second for 2.5 seconds: two or three sweeps. */
  async function sweepAWhile(
    scheduled: string[] = [],
    clock: Clock = systemClock,
    queues: JobQueues = queuesOfHarness(),
    stalledPage?: number,
    partitions = new PartitionsRepository(),
    scheduler: NotificationScheduler = {
      schedule: async (id) => void scheduled.push(id),
      deliver: async () => undefined,
      decideWinner: async () => undefined,
    },
  ) {
    const sweeper = startSweeper({
      db: h.db.db,
      log: createLogger('silent'),
      ...createRepositories(),
      repos: { ...createRepositories(), partitions },
      retention: RETENTION,
      clock,
      queues,
      scheduler,
      afterSeconds: 2, // sweeps every second
      heldSeconds: 20,
      stalledPage,
    });
    try {
      await new Promise((r) => setTimeout(r, 2500));
    } finally {
      sweeper.stop();
    }
  }

  const onRedis = () =>
    new JobQueues(
      { kind: 'redis', redisUrl: redisUrl()!, databaseUrl: h.databaseUrl, prefix: `${h.queuePrefix}r` },
      jobSpecs({ deliveryAttempts: 1 }),
    );
  // the Redis case only where a Redis answers (the run says so when none does)
  it.each([{ queue: 'PostgreSQL', open: () => queuesOfHarness() }, ...(redisUrl() ? [{ queue: 'Redis', open: onRedis }] : [])])(
    're-enqueues a stalled notification that has no job, and leaves one whose job is waiting in the queue ($queue)',
    async ({ open }) => {
      const queues = open();
      const { app } = await h.createApp();
      const audience = await new AudiencesRepository().upsertAllDevices(h.db.db, app.id);
      const insert = () => insertBroadcast(app.id, audience.id);
      const waiting = await insert();
      const lost = await insert();
      await queues.add('fanout', { notificationId: waiting.id, generation: waiting.generation });
      await h.db.db
        .updateTable('notifications')
        .set({ updated_at: new Date(Date.now() - 60_000) })
        .where('id', 'in', [waiting.id, lost.id])
        .execute();

      const scheduled: string[] = [];
      try {
        await sweepAWhile(scheduled, systemClock, queues);
      } finally {
        if (queues !== queuesOfHarness()) await queues.close();
      }
      // once: the sweep touches what it re-enqueued, so the next sweeps leave it alone for a while
      expect(scheduled).toEqual([lost.id]);
      await h.db.db.updateTable('notifications').set({ state: 'sent' }).where('app_id', '=', app.id).execute();
    },
  );

  it('goes on past notifications still waiting in the queue: one lost behind a full page of them is re-enqueued', async () => {
    const queues = queuesOfHarness();
    // only this test's notifications are open
    await h.db.db.updateTable('notifications').set({ state: 'sent' }).where('state', 'in', ['scheduled', 'sending']).execute();
    const { app } = await h.createApp();
    const audience = await new AudiencesRepository().upsertAllDevices(h.db.db, app.id);
    const insert = () => insertBroadcast(app.id, audience.id);
    const waiting = [await insert(), await insert(), await insert()];
    const lost = await insert();
    for (const n of waiting) await queues.add('fanout', { notificationId: n.id, generation: n.generation });
    // the waiting ones stalled first: a page of two holds only them
    for (const [k, n] of [...waiting, lost].entries())
      await h.db.db
        .updateTable('notifications')
        .set({ updated_at: new Date(Date.now() - 60_000 + k * 1000) })
        .where('id', '=', n.id)
        .execute();

    const scheduled: string[] = [];
    await sweepAWhile(scheduled, systemClock, queues, 2);
    expect(scheduled).toEqual([lost.id]);
    await h.db.db.updateTable('notifications').set({ state: 'sent' }).where('app_id', '=', app.id).execute();
  });

  it('re-sends the lost test-share batches of an A/B test waiting for its winner, and nothing else of it', async () => {
    const queues = queuesOfHarness();
    const { app } = await h.createApp();
    const audience = await new AudiencesRepository().upsertAllDevices(h.db.db, app.id);
    const request = { to: '*', variants: [{ payload: { alert: 'A' } }, { payload: { alert: 'B' } }], test_fraction: 0.5, winner: 'manual' };
    /** A test waiting for a manual pick (for ever), its test share cut into one batch, `pending` or sent. */
    const waitingTest = async (pending: boolean) => {
      const n = await new NotificationsRepository().insertOrCollapse(h.db.db, {
        appId: app.id,
        audienceId: audience.id,
        request,
        payload: { alert: 'A' },
        collapseKey: null,
      });
      await sql`
        insert into delivery_batches (notification_id, generation, seq, platform, development, device_ids, pending_device_ids, variant, state)
        values (${n.id}::uuid, ${n.generation}::int, 1, 'ios', false, '{}', '{}', 0, ${pending ? 'pending' : 'done'})`.execute(h.db.db);
      await h.db.db
        .updateTable('notifications')
        .set({
          state: 'sending',
          ab_stage: 'waiting',
          next_due_at: sql<Date>`'infinity'::timestamptz`,
          updated_at: new Date(Date.now() - 60_000),
        })
        .where('id', '=', n.id)
        .execute();
      return n;
    };
    const lost = await waitingTest(true);
    const queued = await waitingTest(true);
    const sent = await waitingTest(false);
    await queues.add('delivery', { batches: [{ notificationId: queued.id, batchId: `${queued.id}-g${queued.generation}-b1` }] });

    const calls: string[] = [];
    await sweepAWhile([], systemClock, queues, undefined, undefined, {
      schedule: async (id) => void calls.push(`schedule ${id}`),
      deliver: async (batches, delay) => void calls.push(`deliver ${batches.map((b) => b.batchId).join()} in ${delay ?? 0}`),
      decideWinner: async (id) => void calls.push(`decideWinner ${id}`),
    });
    // once (the sweep touches it); no fan-out of the rest, no winner: the test still waits
    expect(calls).toEqual([`deliver ${lost.id}-g${lost.generation}-b1 in 0`]);
    expect(calls.join()).not.toContain(sent.id);
    await h.db.db.updateTable('notifications').set({ state: 'sent' }).where('app_id', '=', app.id).execute();
  });

  /**
   * No progress for a minute; `abandoned` also created 30 s ago, past the 20 s (`heldSeconds`) the process that
   * created a notification may hold it, `createdNow` created just now.
   */
  const stallHeld = async ({ createdNow, abandoned }: { createdNow: string[]; abandoned: string[] }) => {
    const stalledSince = new Date(Date.now() - 60_000);
    await h.db.db.updateTable('notifications').set({ updated_at: stalledSince }).where('id', 'in', createdNow).execute();
    await h.db.db
      .updateTable('notifications')
      .set({ updated_at: stalledSince, created_at: new Date(Date.now() - 30_000) })
      .where('id', 'in', abandoned)
      .execute();
  };

  it('leaves a transactional send to its request until that must have answered, then re-enqueues it', async () => {
    const { app } = await h.createApp();
    const insert = () =>
      new NotificationsRepository().insertOrCollapse(h.db.db, {
        appId: app.id,
        audienceId: null,
        request: { to: { field: 'device_id', value: 'd' }, group: 'receipts' },
        payload: { alert: 'x' },
        collapseKey: null,
        group: 'receipts',
      });
    const sending = await insert();
    const abandoned = await insert();
    await stallHeld({ createdNow: [sending.id], abandoned: [abandoned.id] });

    const scheduled: string[] = [];
    await sweepAWhile(scheduled);
    expect(scheduled).toContain(abandoned.id);
    expect(scheduled).not.toContain(sending.id);
    // done with: the next tests' sweeps must not find these stalled
    await h.db.db.updateTable('notifications').set({ state: 'sent' }).where('app_id', '=', app.id).execute();
  });

  it('leaves a small audience cut at creation to the process that sends it until that must have finished, then re-enqueues it', async () => {
    const { app } = await h.createApp();
    const audience = await new AudiencesRepository().upsertAllDevices(h.db.db, app.id);
    const insert = (cut: boolean) =>
      new NotificationsRepository().insertOrCollapse(h.db.db, {
        appId: app.id,
        audienceId: audience.id,
        request: { to: '*', payload: { alert: 'x' } },
        payload: { alert: 'x' },
        collapseKey: null,
        ...(cut && { cut: { batches: 1, targeted: 1 } }),
      });
    const sending = await insert(true);
    const abandoned = await insert(true);
    const fannedOut = await insert(false);
    await stallHeld({ createdNow: [sending.id, fannedOut.id], abandoned: [abandoned.id] });

    const scheduled: string[] = [];
    await sweepAWhile(scheduled);
    expect(scheduled).toEqual(expect.arrayContaining([abandoned.id, fannedOut.id]));
    expect(scheduled).not.toContain(sending.id);
    await h.db.db.updateTable('notifications').set({ state: 'sent' }).where('app_id', '=', app.id).execute();
  });

  it('leaves the notifications whose batches wait in the one job they were stored with, and re-enqueues those whose job is lost or no longer carries them', async () => {
    const queues = queuesOfHarness();
    const { app } = await h.createApp();
    const audience = await new AudiencesRepository().upsertAllDevices(h.db.db, app.id);
    const notifications = new NotificationsRepository();
    const repos = createRepositories();
    /** Notifications stored together, as a group of unicast creations is, each with one batch. */
    const storeGroup = async (size: number) => {
      const stored = await Promise.all(
        Array.from({ length: size }, () =>
          notifications.insertOrCollapse(h.db.db, {
            appId: app.id,
            audienceId: audience.id,
            request: { to: '*', payload: { alert: 'x' } },
            payload: { alert: 'x' },
            collapseKey: null,
          }),
        ),
      );
      const batches = stored.map((n) => ({ notificationId: n.id, batchId: `${n.id}-g${n.generation}-b0` }));
      await h.db.db.transaction().execute((trx) =>
        repos.batches.insertBatches(
          trx,
          stored.map((n, k) => ({
            notificationId: n.id,
            generation: n.generation,
            batches: [{ id: batches[k]!.batchId, seq: 0, platform: 'ios' as const, development: false, deviceIds: [] }],
          })),
        ),
      );
      return { ids: stored.map((n) => n.id), batches };
    };
    const waiting = await storeGroup(3);
    const lost = await storeGroup(2);
    // the first of this group went on in a job of its own, under the name the group's rows give: the other's is lost
    const split = await storeGroup(2);
    await queues.add('delivery', { batches: waiting.batches });
    await queues.add('delivery', { batches: [split.batches[0]!] });
    await h.db.db
      .updateTable('notifications')
      .set({ updated_at: new Date(Date.now() - 60_000) })
      .where('id', 'in', [...waiting.ids, ...lost.ids, ...split.ids])
      .execute();

    const scheduled: string[] = [];
    await sweepAWhile(scheduled);
    expect(scheduled).toEqual(expect.arrayContaining([...lost.ids, split.ids[1]]));
    expect(scheduled.filter((id) => waiting.ids.includes(id) || id === split.ids[0])).toEqual([]);
    // done with: the next tests' sweeps must not find these stalled
    await h.db.db.updateTable('notifications').set({ state: 'sent' }).where('app_id', '=', app.id).execute();
  });

  it("leaves a notification whose batch finished between its read and the queue's answer", async () => {
    const { app } = await h.createApp();
    const audience = await new AudiencesRepository().upsertAllDevices(h.db.db, app.id);
    const n = await new NotificationsRepository().insertOrCollapse(h.db.db, {
      appId: app.id,
      audienceId: audience.id,
      request: { to: '*', payload: { alert: 'x' } },
      payload: { alert: 'x' },
      collapseKey: null,
    });
    await h.db.db
      .insertInto('delivery_batches')
      .values({
        notification_id: n.id,
        generation: n.generation,
        seq: 0,
        platform: 'ios',
        development: false,
        device_ids: [],
        pending_device_ids: [],
      })
      .execute();
    await h.db.db
      .updateTable('notifications')
      .set({ updated_at: new Date(Date.now() - 60_000) })
      .where('id', '=', n.id)
      .execute();
    // The queue answers after the batch's job was recorded and removed, as a worker does while the sweep looks.
    const real = queuesOfHarness();
    const racing = Object.create(real) as JobQueues;
    racing.batchesOf = async (jobId) => {
      await h.db.db
        .updateTable('delivery_batches')
        .set({ state: 'done' })
        .where('notification_id', '=', n.id)
        .where('seq', '=', 0)
        .execute();
      await h.db.db.updateTable('notifications').set({ state: 'sent' }).where('id', '=', n.id).execute();
      return real.batchesOf(jobId);
    };

    const scheduled: string[] = [];
    await sweepAWhile(scheduled, systemClock, racing);
    expect(scheduled).not.toContain(n.id);
  });

  it('drops the day partitions of idempotency keys whose every key is past its 24 hours, and keeps the live keys', async () => {
    const { app } = await h.createApp();
    const row = (key: string, hoursAgo: number) => ({
      app_id: app.id,
      key,
      request_hash: Buffer.alloc(32),
      status: 201,
      body: '{}',
      created_at: new Date(Date.now() - hoursAgo * 3_600_000),
    });
    // a day goes whole once its last key is past 24 hours: a key 49 hours old is in a day past it, whatever the hour
    await h.db.db
      .insertInto('idempotency_keys')
      .values([row('old', 49), row('older', 72), row('fresh', 23)])
      .execute();
    await sweepAWhile();
    const left = await h.db.db.selectFrom('idempotency_keys').select('key').where('app_id', '=', app.id).execute();
    expect(left).toEqual([{ key: 'fresh' }]);
    const days = await new PartitionsRepository().list(h.db.db, 'idempotency_keys');
    const cutoff = new Date(Date.now() - 24 * 3_600_000).toISOString().slice(0, 10);
    expect(days.length).toBeGreaterThanOrEqual(4);
    // no day before the one 24 hours ago is kept; today's and the next three days' are there
    expect(days[0]!.day >= cutoff, days[0]!.day).toBe(true);
    expect(days.map((d) => d.day)).toContain(new Date(Date.now() + 3 * 86_400_000).toISOString().slice(0, 10));
  });

  it('drops push receipts past the conversion window plus 7 days of late events, and active devices of days no report may name', async () => {
    const { app } = await h.createApp();
    const hoursAgo = (n: number) => new Date(Date.now() - n * 3_600_000);
    const day = (daysAgo: number) => new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10);
    const [stale, recent] = [randomUUID(), randomUUID()];
    await h.db.db
      .insertInto('device_pushes')
      .values([
        // a day partition goes whole once its last hour is past retention: rows stay up to a day longer
        { device_id: stale, notification_id: randomUUID(), received_at: hoursAgo(24 + 7 * 24 + 25) },
        { device_id: recent, notification_id: randomUUID(), received_at: hoursAgo(24 + 7 * 24 - 1) },
      ])
      .execute();
    await h.db.db
      .insertInto('app_active_devices')
      .values([
        { app_id: app.id, day: day(9), device_id: stale },
        { app_id: app.id, day: day(8), device_id: recent },
      ])
      .execute();
    await sweepAWhile();
    const receipts = await h.db.db.selectFrom('device_pushes').select('device_id').where('device_id', 'in', [stale, recent]).execute();
    expect(receipts).toEqual([{ device_id: recent }]);
    const active = await h.db.db.selectFrom('app_active_devices').select('device_id').where('app_id', '=', app.id).execute();
    expect(active).toEqual([{ device_id: recent }]);
  });

  describe('messages past their retention', () => {
    const DAY = 86_400_000;
    /** An app with `devices` devices that have read their stream, and a message to all of them. */
    async function messageInStreams(devices: number) {
      const { keys } = await h.createApp();
      const inject = async (method: 'GET' | 'POST', url: string, key: string, payload?: Record<string, unknown>) =>
        (await h.server.inject({ method, url, headers: { authorization: basic(key) }, ...(payload ? { payload } : {}) })).json();
      const { id } = await inject('POST', '/v6/messages', keys.write, { message: { to: '*', title: 'old news' } });
      for (let i = 0; i < devices; i++) {
        const { device } = await inject('POST', '/v6/devices', keys.sdk, { device: { platform: 'android' } });
        await inject('GET', `/v6/devices/${device.id}/messages`, keys.sdk);
      }
      return id as string;
    }
    const rowsOf = async (id: string) =>
      (await h.db.db.selectFrom('device_messages').select('device_id').where('message_id', '=', id).execute()).length;
    const exists = async (id: string) => (await h.db.db.selectFrom('messages').select('id').where('id', '=', id).execute()).length > 0;

    it('go with their day in the sweep, with their stream rows; younger ones stay', async () => {
      const old = await messageInStreams(3);
      const young = await messageInStreams(1);
      // published ten days later: kept longer, its stream row in a later day (the default partition, none made yet)
      await h.db.db
        .updateTable('messages')
        .set({ publish_at: new Date(Date.now() + 10 * DAY), expires_at: new Date(Date.now() + 100 * DAY) })
        .where('id', '=', young)
        .execute();
      await h.db.db
        .updateTable('device_messages')
        .set({ retention_from: new Date(Date.now() + 10 * DAY) })
        .where('message_id', '=', young)
        .execute();
      // a clock 91 days ahead: the first message's retention (90 days from its publication) is over
      await sweepAWhile([], { now: () => new Date(Date.now() + 91 * DAY) });
      // a sweep that creates and drops partitions of every table can outlast the while on a busy machine
      await vi.waitFor(async () => expect(await exists(old)).toBe(false), { timeout: 15_000, interval: 200 });
      expect(await rowsOf(old)).toBe(0);
      expect(await exists(young)).toBe(true);
      expect(await rowsOf(young)).toBe(1);
    });

    it('stay while the partition maintenance fails (a lock it waited for too long), and go with the next one', async () => {
      const old = await messageInStreams(1);
      const failing = Object.assign(new PartitionsRepository(), {
        claim: async () => {
          throw new Error('canceling statement due to lock timeout');
        },
      });
      const later = { now: () => new Date(Date.now() + 91 * DAY) };
      await sweepAWhile([], later, undefined, undefined, failing);
      expect(await exists(old)).toBe(true);
      expect(await rowsOf(old)).toBe(1);
      await sweepAWhile([], later);
      await vi.waitFor(async () => expect(await exists(old)).toBe(false), { timeout: 15_000, interval: 200 });
      expect(await rowsOf(old)).toBe(0);
    });

    it('go whole with their day once it is over, with their stream rows, never row by row', async () => {
      const ids = [await messageInStreams(2), await messageInStreams(1)];
      const expiresAt = (await h.db.db.selectFrom('messages').select('expires_at').where('id', '=', ids[0]!).executeTakeFirstOrThrow())
        .expires_at;
      const day = expiresAt.toISOString().slice(0, 10);
      const maintain = (at: Date) =>
        maintainPartitions({ db: h.db.db, repos: createRepositories(), log: createLogger('silent') }, RETENTION, at);
      const partitionsOf = async () =>
        (
          await h.db.pool.query<{ p: string }>(`SELECT tableoid::regclass::text AS p FROM messages WHERE id = ANY($1::uuid[])`, [ids])
        ).rows.map((r) => r.p);
      // on the day their retention ends (their id's day), each message is in that day's partition
      await maintain(expiresAt);
      expect(await partitionsOf()).toEqual(ids.map(() => `messages_p${day.replaceAll('-', '')}`));
      // the day not over yet: nothing goes
      const dayEnd = Date.parse(`${day}T00:00:00Z`) + DAY;
      expect((await maintain(new Date(dayEnd - 1))).messages.dropped).toEqual([]);
      expect(await Promise.all(ids.map(exists))).toEqual([true, true]);
      expect(await Promise.all(ids.map(rowsOf))).toEqual([2, 1]);
      // over: the day's partition is dropped whole, and the stream rows' day with it
      const over = await maintain(new Date(dayEnd));
      expect(over.messages.dropped).toEqual([day]);
      expect(await Promise.all(ids.map(exists))).toEqual([false, false]);
      expect(await Promise.all(ids.map(rowsOf))).toEqual([0, 0]);
    });
  });
});
