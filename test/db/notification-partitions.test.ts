import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createRepositories } from '../../src/services/deps.js';
import { FIRST_GENERATION, NotificationsRepository, type NewNotification } from '../../src/db/repositories/notifications.js';
import { PartitionsRepository } from '../../src/db/repositories/partitions.js';
import { loadConfig } from '../../src/platform/config.js';
import { createLogger } from '../../src/platform/logger.js';
import { Metrics } from '../../src/platform/metrics.js';
import { timeOrderedUuid } from '../../src/platform/random-id.js';
import { cutBatches } from '../../src/domain/batches.js';
import { maintainPartitions, retentionOf } from '../../src/delivery/retention.js';
import { useHarness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';

const DAY_MS = 86_400_000;
const RETENTION = retentionOf(loadConfig({}));
const dayOf = (at: number) => new Date(at).toISOString().slice(0, 10);
const compact = (day: string) => day.replaceAll('-', '');

/**
 * Notifications, delivery batches and fan-out ranges partitioned by the day of the notification's id (migration 037):
 * a collapse key still names one notification however many send with it at once, a day goes whole once past
 * RETENTION_NOTIFICATIONS_DAYS, and a notification re-sent since (its collapse key's) stays, readable, until it is not.
 */
describe('notifications kept by day', () => {
  const h = useHarness();
  const notifications = new NotificationsRepository();
  const repos = createRepositories();
  const partitions = new PartitionsRepository();
  const log = createLogger('silent');
  const push = (appId: string, collapseKey: string | null, id?: string): NewNotification => ({
    ...(id && { id }),
    appId,
    audienceId: null,
    request: { payload: { alert: collapseKey ?? 'once' } },
    payload: { alert: collapseKey ?? 'once' },
    collapseKey,
  });
  const located = async (table: string, column: string, ids: string[]) =>
    (
      await h.db.pool.query<{ id: string; partition: string }>(
        `SELECT ${column}::text AS id, tableoid::regclass::text AS partition FROM ${table} WHERE ${column} = ANY($1::uuid[]) ORDER BY 1, 2`,
        [ids],
      )
    ).rows;

  it('sends racing with one collapse_key are one notification: one id, each send a generation of it', async () => {
    const { app } = await h.createApp();
    const sends = 8;
    const rows = await Promise.all(Array.from({ length: sends }, () => notifications.insertOrCollapse(h.db.db, push(app.id, 'race'))));
    expect(new Set(rows.map((r) => r.id)).size).toBe(1);
    expect(rows.map((r) => r.generation).sort((a, b) => a - b)).toEqual(Array.from({ length: sends }, (_, i) => FIRST_GENERATION + i));
    const stored = await h.db.db.selectFrom('notifications').select(['id', 'generation']).where('app_id', '=', app.id).execute();
    expect(stored).toEqual([{ id: rows[0]!.id, generation: FIRST_GENERATION + sends - 1 }]);
    // another key, another notification; the same key in another app, another one too
    const other = await notifications.insertOrCollapse(h.db.db, push(app.id, 'other'));
    const { app: second } = await h.createApp();
    const elsewhere = await notifications.insertOrCollapse(h.db.db, push(second.id, 'race'));
    expect(new Set([rows[0]!.id, other.id, elsewhere.id]).size).toBe(3);
  });

  it('a transactional key names its notification: a new id when there is none, the same one after, a new one once it is gone', async () => {
    const { app } = await h.createApp();
    const db = h.db.db;
    const claim = (id: string) => db.transaction().execute((trx) => notifications.claimTransactional(trx, app.id, 'k', id));
    const named = async () =>
      (await h.db.pool.query(`SELECT notification_id FROM notification_transactional_keys WHERE app_id = $1`, [app.id])).rows;
    const stored = timeOrderedUuid();
    expect(await claim(stored)).toBeUndefined();
    await notifications.insertOrCollapse(db, { ...push(app.id, null, stored), transactionalKey: 'k' });
    expect(await claim(timeOrderedUuid())).toEqual({ id: stored, generation: FIRST_GENERATION });
    expect(await named()).toEqual([{ notification_id: stored }]);
    // its notification gone without its key (the maintenance deletes both): the key names the next one
    await db.deleteFrom('notifications').where('id', '=', stored).execute();
    const next = timeOrderedUuid();
    expect(await claim(next)).toBeUndefined();
    expect(await named()).toEqual([{ notification_id: next }]);
  });

  it('drops a day past retention with its batches, keeps a collapse_key notification re-sent since, then purges it', async () => {
    const { app, keys } = await h.createApp();
    const db = h.db.db;
    const now = Date.now();
    const past = now - 100 * DAY_MS;
    const pastDay = dayOf(past);
    // the maintenance of 100 days ago made that day's partitions, of the three tables
    const first = await maintainPartitions({ db, repos: { ...createRepositories(), partitions }, log }, RETENTION, new Date(past));
    expect(first.notifications.created).toContain(pastDay);
    // with the batches' storage options (migration 017's fillfactor, which a partitioned table holds per partition)
    const options = await h.db.pool.query(`SELECT reloptions FROM pg_class WHERE relname = $1`, [`delivery_batches_p${compact(pastDay)}`]);
    expect(options.rows).toEqual([{ reloptions: ['fillfactor=80'] }]);
    // and without statistics of its device lists (migration 018)
    const targets = await h.db.pool.query(
      `SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND attstattarget = 0 ORDER BY attname`,
      [`delivery_batches_p${compact(pastDay)}`],
    );
    expect(targets.rows).toEqual([{ attname: 'device_ids' }, { attname: 'pending_device_ids' }]);
    const device = await db
      .insertInto('devices')
      .values({ app_id: app.id, platform: 'ios', token: randomUUID().replace(/-/g, '') })
      .returning(['id', 'platform', 'development'])
      .executeTakeFirstOrThrow();
    // two notifications made that day, each with a batch and a fan-out range
    const done = await notifications.insertOrCollapse(db, push(app.id, null, timeOrderedUuid(past)));
    const collapsed = await notifications.insertOrCollapse(db, push(app.id, 'score', timeOrderedUuid(past + 1)));
    for (const n of [done, collapsed]) {
      const batches = cutBatches(n.id, FIRST_GENERATION, [device as { id: string; platform: 'ios'; development: boolean }], 0, 500);
      await db
        .transaction()
        .execute((trx) => repos.batches.insertBatches(trx, [{ notificationId: n.id, generation: FIRST_GENERATION, batches }]));
      await db
        .insertInto('fanout_ranges')
        .values({ notification_id: n.id, generation: FIRST_GENERATION, range_no: 0, cursor_id: randomUUID(), next_seq: 1, done: true })
        .execute();
    }
    const ids = [done.id, collapsed.id];
    // each had an A/B holdout (migration 039), and a transactional key naming it (migration 041): their rows go with
    // their notification, or stay with it
    for (const n of [done, collapsed]) {
      await h.db.pool.query(
        `INSERT INTO notification_transactional_keys (app_id, transactional_key, notification_id) VALUES ($1, $2, $3)`,
        [app.id, n.id, n.id],
      );
      await db
        .insertInto('ab_holdout_devices')
        .values({ notification_id: n.id, device_id: device.id, since: new Date(past) })
        .execute();
      await db
        .insertInto('ab_holdout_conversions')
        .values({ notification_id: n.id, device_id: device.id, source: 'app', name: 'purchase', count: 1 })
        .execute();
    }
    const keyedRows = async () =>
      (
        await h.db.pool.query<{ id: string }>(
          `SELECT notification_id::text AS id FROM ab_holdout_devices WHERE notification_id = ANY($1::uuid[])
           UNION ALL SELECT notification_id::text FROM ab_holdout_conversions WHERE notification_id = ANY($1::uuid[])
           UNION ALL SELECT notification_id::text FROM notification_transactional_keys WHERE notification_id = ANY($1::uuid[])
           UNION ALL SELECT notification_id::text FROM notification_collapse_keys WHERE notification_id = ANY($1::uuid[]) ORDER BY 1`,
          [ids],
        )
      ).rows.map((r) => r.id);
    for (const [table, column] of [
      ['notifications', 'id'],
      ['delivery_batches', 'notification_id'],
      ['fanout_ranges', 'notification_id'],
    ] as const)
      expect(await located(table, column, ids)).toEqual([...ids].sort().map((id) => ({ id, partition: `${table}_p${compact(pastDay)}` })));
    // both sent and finished that day; the collapse key's sent again today: the same notification, updated now
    await db
      .updateTable('notifications')
      .set({ state: 'sent', finished_at: new Date(past + 60_000), updated_at: new Date(past + 60_000) })
      .where('id', 'in', ids)
      .execute();
    const again = await notifications.insertOrCollapse(db, push(app.id, 'score'));
    expect(again).toMatchObject({ id: collapsed.id, generation: FIRST_GENERATION + 1 });

    // today, with 90 days of retention: the day of 100 days ago goes whole, but for the collapse key's notification
    const metrics = new Metrics();
    const result = await maintainPartitions({ db, repos: { ...createRepositories(), partitions }, log, metrics }, RETENTION, new Date(now));
    expect(result.notifications.dropped).toContain(pastDay);
    const gone = await h.db.pool.query(`SELECT relname FROM pg_class WHERE relname = ANY($1::text[])`, [
      ['notifications', 'delivery_batches', 'fanout_ranges'].map((t) => `${t}_p${compact(pastDay)}`),
    ]);
    expect(gone.rows).toEqual([]);
    expect(await located('notifications', 'id', ids)).toEqual([{ id: collapsed.id, partition: 'notifications_default' }]);
    expect(await located('delivery_batches', 'notification_id', ids)).toEqual([
      { id: collapsed.id, partition: 'delivery_batches_default' },
    ]);
    expect(await located('fanout_ranges', 'notification_id', ids)).toEqual([{ id: collapsed.id, partition: 'fanout_ranges_default' }]);
    // its holdout, its transactional key and its collapse key (migration 042)
    expect(await keyedRows()).toEqual([collapsed.id, collapsed.id, collapsed.id, collapsed.id]);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/pushd_partitions\{table="notifications"\} \d+/);
    expect(Number(/pushd_partition_dropped_bytes_total\{table="notifications"\} (\d+)/.exec(text)?.[1])).toBeGreaterThan(0);
    // read through the API: the one kept answers, the one dropped is unknown
    const kept = await call(h, 'GET', `/v6/notifications/${collapsed.id}`, keys.read);
    expect(kept.statusCode, kept.body).toBe(200);
    expect(kept.json()).toMatchObject({ id: collapsed.id });
    expect((await call(h, 'GET', `/v6/notifications/${done.id}`, keys.read)).statusCode).toBe(404);
    // the key still names it where it now is
    expect(await notifications.insertOrCollapse(db, push(app.id, 'score'))).toMatchObject({
      id: collapsed.id,
      generation: FIRST_GENERATION + 2,
    });

    // still scheduled: kept whatever its age, until it is sent
    await maintainPartitions({ db, repos: { ...createRepositories(), partitions }, log }, RETENTION, new Date(now + 91 * DAY_MS));
    expect(await located('notifications', 'id', ids)).toEqual([{ id: collapsed.id, partition: 'notifications_default' }]);
    await db.updateTable('notifications').set({ state: 'sent', finished_at: new Date() }).where('id', '=', collapsed.id).execute();
    // sent, and 91 days on nothing re-sent it: the default partition's purge deletes it with its batch and range
    await maintainPartitions({ db, repos: { ...createRepositories(), partitions }, log }, RETENTION, new Date(now + 91 * DAY_MS));
    for (const [table, column] of [
      ['notifications', 'id'],
      ['delivery_batches', 'notification_id'],
      ['fanout_ranges', 'notification_id'],
    ] as const)
      expect(await located(table, column, ids)).toEqual([]);
    expect(await keyedRows()).toEqual([]);
  });

  it("a send with a transactional key racing the drop of its notification's day neither deadlocks nor fails", async () => {
    const { app } = await h.createApp();
    const db = h.db.db;
    const now = Date.now();
    const past = now - 120 * DAY_MS;
    await maintainPartitions({ db, repos: { ...createRepositories(), partitions }, log }, RETENTION, new Date(past));
    const old = timeOrderedUuid(past);
    await db.transaction().execute(async (trx) => {
      await notifications.claimTransactional(trx, app.id, 'reset', old);
      await notifications.insertOrCollapse(trx, { ...push(app.id, null, old), transactionalKey: 'reset' });
    });
    await db
      .updateTable('notifications')
      .set({ state: 'sent', finished_at: new Date(past), updated_at: new Date(past) })
      .where('id', '=', old)
      .execute();
    // claimTransactional's order, split so the maintenance comes in between: the key's row, then its notification
    const send = h.db.pool.connect();
    const client = await send;
    let maintenance: ReturnType<typeof maintainPartitions> | undefined;
    try {
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO notification_transactional_keys (app_id, transactional_key, notification_id) VALUES ($1, 'reset', $2)
         ON CONFLICT (app_id, transactional_key) DO UPDATE SET notification_id = notification_transactional_keys.notification_id`,
        [app.id, timeOrderedUuid()],
      );
      maintenance = maintainPartitions({ db, repos: { ...createRepositories(), partitions }, log }, RETENTION, new Date(now));
      // until the maintenance waits on the send's locks
      for (let i = 0; i < 200; i++) {
        const { rows } = await h.db.pool.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        if (rows[0].n > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      const read = await client.query(`SELECT id FROM notifications WHERE id = $1 FOR UPDATE`, [old]);
      expect(read.rows).toEqual([{ id: old }]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const result = await maintenance!;
    expect(result.notifications.dropped).toContain(dayOf(past));
    // the key went with its notification's day: the next send with it starts a new one
    const left = await h.db.pool.query(`SELECT count(*)::int AS n FROM notification_transactional_keys WHERE app_id = $1`, [app.id]);
    expect(left.rows).toEqual([{ n: 0 }]);
  });
});
