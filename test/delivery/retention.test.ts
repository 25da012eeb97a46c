import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.js';
import { AudiencesRepository } from '../../src/db/repositories/audiences.js';
import { MessagePartitionsRepository } from '../../src/db/repositories/message-partitions.js';
import { MessagesRepository } from '../../src/db/repositories/messages.js';
import { PartitionsRepository } from '../../src/db/repositories/partitions.js';
import { createLogger } from '../../src/platform/logger.js';
import { Metrics } from '../../src/platform/metrics.js';
import { maintainPartitions, retentionOf } from '../../src/delivery/retention.js';
import { createHarness, ManualClock, useHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { call } from '../http/device-support.js';
import type { AppWithKeys } from '../http/support.js';
import { loadConfig } from '../../src/platform/config.js';
import { createMessage, insertMessage } from '../http/message-support.js';
import { timeOrderedUuid } from '../../src/platform/random-id.js';
import { createRepositories } from '../../src/services/deps.js';

const DAY_MS = 86_400_000;
const dayOf = (at: Date | number) => new Date(at).toISOString().slice(0, 10);
const compact = (day: string) => day.replaceAll('-', '');
const RETENTION = retentionOf(loadConfig({}));

/**
 * The maintenance of the time-partitioned tables with a clock moved by hand: partitions created ahead, those past
 * retention dropped whole, receipts of real pushes in their day's partition, and many workers at once.
 */
describe('partitions kept by time', () => {
  const start = new Date();
  const clock = new ManualClock(start);
  let h: Harness;
  let gw: Gateways;
  let app: AppWithKeys;
  let device: RegisteredDevice;
  const partitions = new PartitionsRepository();
  const messagePartitions = new MessagePartitionsRepository();
  const log = createLogger('silent');

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ env: { ...gw.env, CONVERSION_WINDOW_HOURS: '24' }, clock });
    app = await h.createApp();
    await setCredentials(h, app.app.id, gw);
    device = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  /** The partitions of a table from the catalog, by name (the default one included). */
  const catalog = async (table: string) =>
    (
      await h.db.pool.query<{ name: string }>(
        `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = $1::regclass ORDER BY c.relname::text COLLATE "C"`,
        [table],
      )
    ).rows.map((r) => r.name);
  const dayPartitions = (table: string, first: number, count: number) =>
    Array.from({ length: count }, (_, i) => `${table}_p${compact(dayOf(clock.now().getTime() + (first + i) * DAY_MS))}`);
  const pushTo = async (collapseKey?: string) => {
    const res = await call(h, 'POST', '/v6/transactional/notifications', app.keys.write, {
      to: { field: 'device_id', value: device.id },
      group: 'retention-test',
      notification: { payload: { alert: 'Hi', ...(collapseKey && { collapse_key: collapseKey }) } },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().results.success).toBe(1);
    return res.json().id as string;
  };
  const receiptsOf = async (notificationId: string) =>
    (
      await h.db.pool.query<{ received_at: Date; partition: string }>(
        `SELECT received_at, tableoid::regclass::text AS partition FROM device_pushes WHERE notification_id = $1 ORDER BY received_at`,
        [notificationId],
      )
    ).rows;

  it('a push re-sent with its collapse_key has a receipt per send, and an event counts once for it', async () => {
    const id = await pushTo('order-1');
    clock.advance(60_000);
    expect(await pushTo('order-1')).toBe(id);
    const receipts = await receiptsOf(id);
    expect(receipts.map((r) => r.received_at)).toEqual([start, new Date(start.getTime() + 60_000)]);
    // after both sends, within the window of each
    const res = await call(h, 'POST', `/v6/devices/${device.id}/events`, app.keys.sdk, {
      events: [{ name: 'purchase', date: new Date(start.getTime() + 120_000).toISOString() }],
    });
    expect(res.statusCode, res.body).toBe(202);
    const stats = await call(h, 'GET', `/v6/stats/notifications/${id}/events`, app.keys.read);
    expect(stats.json().event_conversions).toEqual({ purchase: 1 });
  });

  it('creates partitions ahead, drops those past retention whole, keeps the rows within it, and files new receipts by day', async () => {
    clock.set(start);
    // the migration made today's and the next three days' partitions
    expect(await catalog('device_pushes')).toEqual(['device_pushes_default', ...dayPartitions('device_pushes', 0, 4)]);
    const early = await pushTo();
    const [earlyReceipt] = await receiptsOf(early);
    expect(earlyReceipt!.partition).toBe(`device_pushes_p${compact(dayOf(start))}`);
    // a receipt of three days on, within retention after the move below
    const later = { device_id: randomUUID(), notification_id: randomUUID(), received_at: new Date(start.getTime() + 3 * DAY_MS) };
    await h.db.db.insertInto('device_pushes').values(later).execute();
    await h.db.db
      .insertInto('app_active_devices')
      .values([
        { app_id: app.app.id, day: dayOf(start), device_id: device.id },
        { app_id: app.app.id, day: dayOf(start.getTime() + 3 * DAY_MS), device_id: device.id },
      ])
      .execute();

    // ten days on: start's day and the next are past 8 days of retention; the day after ends after the cutoff
    clock.set(new Date(start.getTime() + 10 * DAY_MS));
    const metrics = new Metrics();
    const result = await maintainPartitions(
      { db: h.db.db, repos: { ...createRepositories(), partitions }, log, metrics },
      RETENTION,
      clock.now(),
    );
    expect(result.device_pushes).toEqual({
      ran: true,
      created: [0, 1, 2, 3].map((i) => dayOf(clock.now().getTime() + i * DAY_MS)),
      dropped: [-10, -9].map((i) => dayOf(clock.now().getTime() + i * DAY_MS)),
    });
    expect(await catalog('device_pushes')).toEqual([
      'device_pushes_default',
      ...dayPartitions('device_pushes', -8, 2),
      ...dayPartitions('device_pushes', 0, 4),
    ]);
    // active devices keep 8 whole days before today: start's day (10 days back) and the next go
    expect(await catalog('app_active_devices')).toEqual([
      'app_active_devices_default',
      ...dayPartitions('app_active_devices', -8, 2),
      ...dayPartitions('app_active_devices', 0, 4),
    ]);
    expect(await receiptsOf(early)).toEqual([]);
    expect(await receiptsOf(later.notification_id)).toEqual([
      { received_at: later.received_at, partition: `device_pushes_p${compact(dayOf(later.received_at))}` },
    ]);
    const active = await h.db.db.selectFrom('app_active_devices').select('day').where('app_id', '=', app.app.id).execute();
    expect(active.map((r) => dayOf(r.day))).toEqual([dayOf(start.getTime() + 3 * DAY_MS)]);

    // a push sent now is received now, in today's new partition
    const now = await pushTo();
    expect(await receiptsOf(now)).toEqual([{ received_at: clock.now(), partition: `device_pushes_p${compact(dayOf(clock.now()))}` }]);

    // what /metrics shows: partitions per table, the oldest kept, the bytes dropped
    const text = await metrics.registry.metrics();
    expect(text).toContain('pushd_partitions{table="device_pushes"} 6');
    const oldestKept = Date.parse(`${dayOf(clock.now().getTime() - 8 * DAY_MS)}T00:00:00Z`) / 1000;
    expect(text).toContain(`pushd_partition_oldest_kept_seconds{table="device_pushes"} ${oldestKept}`);
    const dropped = Number(/pushd_partition_dropped_bytes_total\{table="device_pushes"\} (\d+)/.exec(text)?.[1]);
    expect(dropped).toBeGreaterThan(0);

    // run again: nothing to do
    expect(
      (await maintainPartitions({ db: h.db.db, repos: { ...createRepositories(), partitions }, log }, RETENTION, clock.now()))
        .device_pushes,
    ).toEqual({
      ran: true,
      created: [],
      dropped: [],
    });
  });

  it('a write no partition covers falls back to the default one, and the maintenance moves it into its own day', async () => {
    clock.set(new Date(start.getTime() + 20 * DAY_MS)); // a clock moved past the partitions made ahead
    const id = await pushTo();
    expect(await receiptsOf(id)).toEqual([{ received_at: clock.now(), partition: 'device_pushes_default' }]);
    // a row past retention in the default partition is deleted, not given a partition
    const stale = { device_id: randomUUID(), notification_id: randomUUID(), received_at: new Date(start.getTime() - 30 * DAY_MS) };
    await h.db.db.insertInto('device_pushes').values(stale).execute();

    await maintainPartitions({ db: h.db.db, repos: { ...createRepositories(), partitions }, log }, RETENTION, clock.now());
    expect(await receiptsOf(id)).toEqual([{ received_at: clock.now(), partition: `device_pushes_p${compact(dayOf(clock.now()))}` }]);
    expect(await receiptsOf(stale.notification_id)).toEqual([]);
    expect((await h.db.pool.query('SELECT count(*)::int AS n FROM device_pushes_default')).rows).toEqual([{ n: 0 }]);
  });

  it('many workers at once: one runs the maintenance, another skips it while the first holds it, and none conflicts', async () => {
    clock.set(new Date(start.getTime() + 40 * DAY_MS));
    const others = [openDatabase(h.databaseUrl, 2, 0), openDatabase(h.databaseUrl, 2, 0)];
    try {
      // one worker inside its maintenance transaction: the others find it held and do nothing
      const held = await h.db.db.transaction().execute(async (trx) => {
        expect(await partitions.claim(trx)).toBe(true);
        return maintainPartitions({ db: others[0]!.db, repos: { ...createRepositories(), partitions }, log }, RETENTION, clock.now());
      });
      expect(held.device_pushes).toEqual({ ran: false, created: [], dropped: [] });
      expect(held.app_active_devices).toEqual({ ran: false, created: [], dropped: [] });

      // both at once, on connections of their own: each day created once, each partition dropped once
      const before = await catalog('device_pushes');
      const runs = await Promise.all(
        others.map((o) => maintainPartitions({ db: o.db, repos: { ...createRepositories(), partitions }, log }, RETENTION, clock.now())),
      );
      const created = runs.flatMap((r) => r.device_pushes.created);
      const dropped = runs.flatMap((r) => r.device_pushes.dropped);
      expect(created.sort()).toEqual([0, 1, 2, 3].map((i) => dayOf(clock.now().getTime() + i * DAY_MS)));
      expect(new Set(dropped).size).toBe(dropped.length);
      expect(dropped.length).toBe(before.length - 1);
      expect(await catalog('device_pushes')).toEqual(['device_pushes_default', ...dayPartitions('device_pushes', 0, 4)]);
    } finally {
      await Promise.all(others.map((o) => o.close()));
    }
  });

  it('keeps sessions, opens, conversions and message streams each by its own retention, dropping their days whole', async () => {
    const now = start.getTime() + 50 * DAY_MS;
    clock.set(new Date(now));
    const at = (days: number) => new Date(now - days * DAY_MS);
    const notificationId = await pushTo();
    // each table: a row just past its retention at `now`, and one just within it
    const sessions = [9, 7].map((days) => ({ device_id: device.id, id: randomUUID(), app_id: app.app.id, started_at: at(days) }));
    await h.db.db.insertInto('app_sessions').values(sessions).execute();
    const opens = [91, 89].map((days, i) => ({
      notification_id: notificationId,
      kind: i ? ('indirect' as const) : ('direct' as const),
      device_id: device.id,
      app_id: app.app.id,
      opened_at: at(days),
    }));
    await h.db.db.insertInto('push_opens').values(opens).execute();
    const conversionDays = [91, 89].map((days) => dayOf(at(days)));
    await h.db.db
      .insertInto('notification_conversions')
      .values(
        conversionDays.map((day) => ({ notification_id: notificationId, source: '', name: 'buy', device_id: device.id, day, count: 1 })),
      )
      .execute();
    const messages = new MessagesRepository();
    const streamRows = [];
    for (const days of [95, 80]) {
      const published = at(days);
      const audience = await new AudiencesRepository().upsertAllDevices(h.db.db, app.app.id);
      const m = await insertMessage(h.db.db, { appId: app.app.id, audienceId: audience.id, published, resolved: true });
      await messages.addToStreams(h.db.db, m.id, [device.id]);
      streamRows.push({ message: m.id, day: dayOf(published) });
    }
    // a maintenance of the day of the oldest row gives each row's day its partition
    await maintainPartitions({ db: h.db.db, repos: { ...createRepositories(), partitions }, log }, RETENTION, at(95));
    // the partitions holding this test's rows (the first test converted an event of its own)
    const where = async (table: 'app_sessions' | 'push_opens' | 'notification_conversions' | 'device_messages') =>
      (
        await h.db.pool.query<{ p: string }>(
          `SELECT tableoid::regclass::text AS p FROM ${table} WHERE ${table === 'notification_conversions' ? `name = 'buy'` : 'true'} ORDER BY 1`,
        )
      ).rows.map((r) => r.p);
    const partitionsOf = (table: string, days: string[]) => days.map((day) => `${table}_p${compact(day)}`);
    expect(await where('app_sessions')).toEqual(
      partitionsOf(
        'app_sessions',
        [9, 7].map((d) => dayOf(at(d))),
      ),
    );
    expect(await where('push_opens')).toEqual(
      partitionsOf(
        'push_opens',
        [91, 89].map((d) => dayOf(at(d))),
      ),
    );
    expect(await where('notification_conversions')).toEqual(partitionsOf('notification_conversions', conversionDays));
    expect(await where('device_messages')).toEqual(
      partitionsOf(
        'device_messages',
        streamRows.map((r) => r.day),
      ),
    );

    const result = await maintainPartitions({ db: h.db.db, repos: { ...createRepositories(), partitions }, log }, RETENTION, clock.now());
    expect(result.app_sessions.dropped).toContain(dayOf(at(9)));
    expect(result.app_sessions.dropped).not.toContain(dayOf(at(7)));
    expect(result.push_opens.dropped).toContain(dayOf(at(91)));
    expect(result.notification_conversions.dropped).toContain(conversionDays[0]);
    expect(result.device_messages.dropped).toContain(streamRows[0]!.day);
    expect(await where('app_sessions')).toEqual(partitionsOf('app_sessions', [dayOf(at(7))]));
    expect(await where('push_opens')).toEqual(partitionsOf('push_opens', [dayOf(at(89))]));
    expect(await where('notification_conversions')).toEqual(partitionsOf('notification_conversions', [conversionDays[1]!]));
    expect(await where('device_messages')).toEqual(partitionsOf('device_messages', [streamRows[1]!.day]));
    // the expired message went (with the default partition's rows past retention: no day of it was made, 31 a run);
    // the other one is in the day its retention ends on
    expect((await h.db.pool.query(`SELECT id, tableoid::regclass::text AS p FROM messages WHERE app_id = $1`, [app.app.id])).rows).toEqual([
      { id: streamRows[1]!.message, p: `messages_p${compact(dayOf(at(80).getTime() + 90 * DAY_MS))}` },
    ]);
  });

  it('keeps messages by the day their retention ends: made ahead, dropped whole once over, those still in use kept', async () => {
    const now = start.getTime() + 200 * DAY_MS;
    clock.set(new Date(now));
    const metrics = new Metrics();
    const maintain = async (at: number) =>
      (await maintainPartitions({ db: h.db.db, repos: { ...createRepositories(), partitions }, log, metrics }, RETENTION, new Date(at)))
        .messages;
    const kept = async () => (await messagePartitions.list(h.db.db)).map((p) => p.day);
    const located = async (id: string) =>
      (await h.db.pool.query<{ p: string }>(`SELECT tableoid::regclass::text AS p FROM messages WHERE id = $1`, [id])).rows[0]?.p;
    const state = async (id: string) => {
      const res = await call(h, 'GET', `/v6/messages/${id}`, app.keys.read);
      return res.statusCode === 200 ? (res.json().state as string) : res.statusCode;
    };
    const days = (from: number, count: number) => Array.from({ length: count }, (_, i) => dayOf(from + i * DAY_MS));

    // where a message made now expires (90 days ahead, and 3 more), not the 90 days before it, which none goes to
    expect((await maintain(now)).created).toEqual(days(now + 90 * DAY_MS, 4));
    expect(await kept()).toEqual(days(now + 90 * DAY_MS, 4));

    // a message in its expiry day; a scheduled one and one shown 200 days, later than the days made, in the default
    const plain = await createMessage(h, app.keys.write, { to: '*', title: 'plain' });
    const scheduled = await createMessage(h, app.keys.write, {
      to: '*',
      title: 'later',
      send_at: new Date(now + 20 * DAY_MS).toISOString(),
    });
    const long = await createMessage(h, app.keys.write, {
      to: '*',
      title: 'long',
      unpublish_at: new Date(now + 200 * DAY_MS).toISOString(),
    });
    expect(await located(plain.id)).toBe(`messages_p${compact(dayOf(now + 90 * DAY_MS))}`);
    expect(await located(scheduled.id)).toBe('messages_default');
    expect(await located(long.id)).toBe('messages_default');
    // a message from before migration 040, its id made when it was created: of today, in use 90 days
    const audience = await new AudiencesRepository().upsertAllDevices(h.db.db, app.app.id);
    const { id: legacy } = await h.db.db
      .insertInto('messages')
      .values({
        id: timeOrderedUuid(now),
        app_id: app.app.id,
        audience_id: audience.id,
        request: '{}',
        title: 'from before',
        type: 'default',
        custom: {},
        publish_at: new Date(now),
        expires_at: new Date(now + 90 * DAY_MS),
        created_at: new Date(now),
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    // which the next maintenance moves into a partition of its day
    expect(await located(legacy)).toBe('messages_default');
    expect((await maintain(now)).created).toEqual([dayOf(now)]);
    expect(await located(legacy)).toBe(`messages_p${compact(dayOf(now))}`);

    // a day on: today's partition goes whole, but the message in use is kept in the default one, and read as before
    const tomorrow = now + DAY_MS;
    clock.set(new Date(tomorrow));
    expect((await maintain(tomorrow)).dropped).toEqual([dayOf(now)]);
    expect(await located(legacy)).toBe('messages_default');
    expect(await state(legacy)).toBe('published');

    // past the end of the plain message's day: its partition goes whole, the scheduled one moves into its day
    const plainOver = Date.parse(`${dayOf(now + 90 * DAY_MS)}T00:00:00Z`) + DAY_MS;
    clock.set(new Date(plainOver - 1));
    expect(await state(plain.id)).toBe('unpublished');
    expect((await maintain(plainOver - 1)).dropped).not.toContain(dayOf(now + 90 * DAY_MS));
    clock.set(new Date(plainOver));
    const over = await maintain(plainOver);
    expect(over.dropped).toContain(dayOf(now + 90 * DAY_MS));
    expect(await located(plain.id)).toBeUndefined();
    expect(await state(plain.id)).toBe(404);
    expect(await located(scheduled.id)).toBe(`messages_p${compact(dayOf(now + 110 * DAY_MS))}`);
    expect(await state(scheduled.id)).toBe('published');
    expect(await located(long.id)).toBe('messages_default');
    expect(await state(long.id)).toBe('published');
    // the message from before is past retention since its day ended; the default partition is made again without it
    // once it is a day past
    expect(await state(legacy)).toBe(404);
    expect(await located(legacy)).toBe('messages_default');
    await maintain(plainOver + DAY_MS);
    expect(await located(legacy)).toBeUndefined();
    expect(await located(long.id)).toBe('messages_default');

    // what /metrics shows for messages, as for the other tables
    const text = await metrics.registry.metrics();
    expect(text).toContain(`pushd_partitions{table="messages"} ${(await kept()).length}`);
    const oldestKept = Date.parse(`${(await kept())[0]!}T00:00:00Z`) / 1000;
    expect(text).toContain(`pushd_partition_oldest_kept_seconds{table="messages"} ${oldestKept}`);
    expect(Number(/pushd_partition_dropped_bytes_total\{table="messages"\} (\d+)/.exec(text)?.[1])).toBeGreaterThan(0);

    // the long one goes at the end of the day its retention ends on, 90 days after it is unpublished
    const longOver = Date.parse(`${dayOf(now + 290 * DAY_MS)}T00:00:00Z`) + DAY_MS;
    for (let run = 0; run < 4; run++) await maintain(longOver - DAY_MS);
    expect(await located(long.id)).toBe(`messages_p${compact(dayOf(now + 290 * DAY_MS))}`);
    expect((await maintain(longOver)).dropped).toContain(dayOf(now + 290 * DAY_MS));
    expect(await located(long.id)).toBeUndefined();
  });
});

/**
 * Idempotency keys (migration 034) with the maintenance run at moved times: a day of keys goes whole once its last key
 * is past its 24 hours, the live ones stay in their day, and /metrics shows the table.
 */
describe('idempotency keys kept by day', () => {
  const h = useHarness();
  const partitions = new PartitionsRepository();
  const log = createLogger('silent');

  it('moves keys into their days, drops each day whole once its every key is past 24 hours, and keeps the live ones', async () => {
    const { app } = await h.createApp();
    // days no partition was made for (the migration made those around the real today): the keys go to the default one
    const at = new Date(Date.parse(`${dayOf(Date.now() + 40 * DAY_MS)}T06:00:00Z`));
    const hoursBefore = (n: number) => new Date(at.getTime() - n * 3_600_000);
    const keys = { stale: hoursBefore(50), live: hoursBefore(23), fresh: hoursBefore(1) };
    await h.db.db
      .insertInto('idempotency_keys')
      .values(Object.entries(keys).map(([key, created_at]) => ({ app_id: app.id, key, request_hash: Buffer.alloc(32), created_at })))
      .execute();
    const located = async () =>
      (
        await h.db.pool.query<{ key: string; partition: string }>(
          `SELECT key, tableoid::regclass::text AS partition FROM idempotency_keys WHERE app_id = $1 ORDER BY created_at`,
          [app.id],
        )
      ).rows;
    expect(await located()).toEqual(Object.keys(keys).map((key) => ({ key, partition: 'idempotency_keys_default' })));

    const metrics = new Metrics();
    const first = await maintainPartitions({ db: h.db.db, repos: { ...createRepositories(), partitions }, log, metrics }, RETENTION, at);
    // the key of 50 hours before is past its day's end + 24 hours: deleted from the default partition, no day made for it
    expect(first.idempotency_keys.created).toEqual(
      [...new Set([dayOf(keys.live), dayOf(keys.fresh), ...[0, 1, 2, 3].map((i) => dayOf(at.getTime() + i * DAY_MS))])].sort(),
    );
    expect(await located()).toEqual([
      { key: 'live', partition: `idempotency_keys_p${compact(dayOf(keys.live))}` },
      { key: 'fresh', partition: `idempotency_keys_p${compact(dayOf(keys.fresh))}` },
    ]);
    const text = await metrics.registry.metrics();
    const kept = (await partitions.list(h.db.db, 'idempotency_keys')).filter((p) => p.day >= dayOf(keys.live));
    expect(kept.map((p) => p.day)).toEqual(first.idempotency_keys.created);
    expect(text).toMatch(/pushd_partitions\{table="idempotency_keys"\} \d+/);

    // two days on, every key of those days is past 24 hours: their partitions go whole, today's and the next are made
    const later = new Date(at.getTime() + 2 * DAY_MS);
    const second = await maintainPartitions(
      { db: h.db.db, repos: { ...createRepositories(), partitions }, log, metrics },
      RETENTION,
      later,
    );
    expect(second.idempotency_keys.dropped).toEqual(expect.arrayContaining([...new Set([dayOf(keys.live), dayOf(keys.fresh)])]));
    expect(second.idempotency_keys.created).toEqual([4, 5].map((i) => dayOf(at.getTime() + i * DAY_MS)));
    expect(await located()).toEqual([]);
    const left = (await partitions.list(h.db.db, 'idempotency_keys')).map((p) => p.day);
    expect(left[0]! >= dayOf(later.getTime() - DAY_MS)).toBe(true);
    expect(
      Number(/pushd_partition_dropped_bytes_total\{table="idempotency_keys"\} (\d+)/.exec(await metrics.registry.metrics())?.[1]),
    ).toBeGreaterThan(0);
  });
});
