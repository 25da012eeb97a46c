import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { AudiencesRepository } from '../../src/db/repositories/audiences.js';
import { NotificationsRepository } from '../../src/db/repositories/notifications.js';
import type { Db } from '../../src/db/database.js';
import { audienceSpec } from '../../src/domain/audience-spec.js';
import type { Filter } from '../../src/domain/filters.js';
import { createLogger } from '../../src/platform/logger.js';
import { AUDIENCE_RETIRED_GRACE_MS, maintainPartitions, retentionOf, sweepAudiences } from '../../src/delivery/retention.js';
import { loadConfig } from '../../src/platform/config.js';
import { useHarness } from '../helpers/harness.js';
import { insertMessage } from '../http/message-support.js';
import { createRepositories } from '../../src/services/deps.js';

const DAY_MS = 86_400_000;
const RETENTION_DAYS = 30;

/**
 * The on-the-fly audiences' retention (sweepAudiences): an old audience nothing names is retired, then deleted a grace
 * later; one a kept notification or message names, and the app's all-devices audience, stay; a notification that
 * found an audience just before it was retired keeps it.
 */
describe('audiences kept while something names them', () => {
  const h = useHarness();
  const audiences = new AudiencesRepository();
  const notifications = new NotificationsRepository();
  const log = createLogger('silent');
  const now = new Date();
  const later = (ms: number) => new Date(now.getTime() + ms);
  let app: string;
  const user = (id: string): Filter[] => [{ name: 'user_id', criteria: [id] }];
  const sweep = (at: Date) => sweepAudiences({ db: h.db.db, repos: createRepositories(), log }, RETENTION_DAYS, at);
  /** the audience of this user's spec, created `daysAgo` days before `now` */
  const oldAudience = async (userId: string, daysAgo = RETENTION_DAYS + 10) => {
    const { key, canonical } = audienceSpec(user(userId));
    const audience = await audiences.upsertFilters(h.db.db, app, key, canonical);
    await backdate(audience.id, daysAgo);
    return audience.id;
  };
  const backdate = (id: string, daysAgo: number) =>
    h.db.db
      .updateTable('audiences')
      .set({ created_at: new Date(now.getTime() - daysAgo * DAY_MS) })
      .where('id', '=', id)
      .execute();
  /** a notification naming the audience, as a send by stored audience inserts it */
  const notify = (audienceId: string, db: Db = h.db.db) =>
    notifications.insertCut(
      db,
      [
        {
          id: randomUUID(),
          appId: app,
          audienceId,
          request: { to: { audience: audienceId }, payload: {} },
          payload: {},
          collapseKey: null,
        },
      ],
      null,
    );
  const row = (id: string) => h.db.db.selectFrom('audiences').selectAll().where('id', '=', id).executeTakeFirst();

  beforeAll(async () => {
    app = (await h.createApp()).app.id;
  });

  it('retires an old audience nothing names, deletes it a grace later; keeps the named, the new and the all-devices one', async () => {
    const orphan = await oldAudience('orphan');
    const named = await oldAudience('named');
    const [notification] = await notify(named);
    const fresh = await oldAudience('fresh', RETENTION_DAYS - 1);
    const all = (await audiences.upsertAllDevices(h.db.db, app)).id;
    await backdate(all, 400);
    const messaged = await oldAudience('messaged');
    await insertMessage(h.db.db, { appId: app, audienceId: messaged, published: new Date(now.getTime() - 40 * DAY_MS), resolved: false });

    await sweep(now);
    expect(await row(orphan)).toMatchObject({ retired_at: now, spec_key: null });
    for (const kept of [named, fresh, all, messaged]) expect((await row(kept))!.retired_at).toBeNull();
    // an equal spec now makes a new audience: the retired one is found by no spec
    const { key, canonical } = audienceSpec(user('orphan'));
    const again = await audiences.upsertFilters(h.db.db, app, key, canonical);
    expect(again.id).not.toBe(orphan);

    // within the grace it stays; past it, it goes
    await sweep(later(AUDIENCE_RETIRED_GRACE_MS / 2));
    expect(await row(orphan)).toBeDefined();
    await sweep(later(AUDIENCE_RETIRED_GRACE_MS * 2));
    expect(await row(orphan)).toBeUndefined();
    for (const kept of [named, fresh, all, messaged, again.id]) expect(await row(kept)).toBeDefined();

    // once its notification is gone (its day dropped), the named one goes the same way
    await h.db.db.deleteFrom('notifications').where('id', '=', notification!.id).execute();
    await sweep(later(AUDIENCE_RETIRED_GRACE_MS * 3));
    expect((await row(named))!.retired_at).toEqual(later(AUDIENCE_RETIRED_GRACE_MS * 3));
    await sweep(later(AUDIENCE_RETIRED_GRACE_MS * 5));
    expect(await row(named)).toBeUndefined();
    expect(await row(messaged)).toBeDefined();
  });

  it('keeps an audience a notification found by its spec just before it was retired, and named after', async () => {
    const raced = await oldAudience('raced-spec');
    const { key, canonical } = audienceSpec(user('raced-spec'));
    await h.db.db.transaction().execute(async (trx) => {
      // the send finds the stored audience by its spec (as its transaction does), nothing names it yet ...
      expect((await audiences.upsertFilters(trx, app, key, canonical)).id).toBe(raced);
      // ... the sweep retires it meanwhile, on its own connection ...
      await sweep(now);
      expect((await row(raced))!.retired_at).toEqual(now);
      // ... a sweep within the grace leaves it, though nothing committed names it yet ...
      expect(await sweep(later(AUDIENCE_RETIRED_GRACE_MS / 2))).toMatchObject({ deleted: 0 });
      expect(await row(raced)).toBeDefined();
      // ... and the send's notification names it, committed well within the grace
      await notify(raced, trx);
    });
    await sweep(later(AUDIENCE_RETIRED_GRACE_MS * 2));
    expect(await row(raced)).toBeDefined();
  });

  it('keeps an audience a unicast statement found by its spec from a snapshot taken before it was retired', async () => {
    const raced = await oldAudience('raced-statement');
    const spec = { appId: app, ...audienceSpec(user('raced-statement')) };
    // a repeatable-read transaction reads from one snapshot, as the one statement of a unicast group does
    await h.db.db
      .transaction()
      .setIsolationLevel('repeatable read')
      .execute(async (trx) => {
        await sql`select 1`.execute(trx); // its snapshot, before the retirement
        await sweep(now);
        expect((await row(raced))!.spec_key).toBeNull();
        const [inserted] = await notifications.insertCut(
          trx,
          [{ id: randomUUID(), appId: app, audienceId: null, audienceSpecKey: spec.key, request: {}, payload: {}, collapseKey: null }],
          null,
          audiences.specAudiences([spec]),
        );
        expect(inserted!.audience_id).toBe(raced);
      });
    await sweep(later(AUDIENCE_RETIRED_GRACE_MS * 2));
    expect(await row(raced)).toBeDefined();
  });

  it('a retired audience named by id is taken back: a sweep deleting it meanwhile waits and keeps it', async () => {
    const target = await oldAudience('by-id');
    await sweep(now);
    expect((await row(target))!.retired_at).toEqual(now);
    let sweeping: Promise<unknown> | undefined;
    await h.db.db.transaction().execute(async (trx) => {
      expect((await audiences.claimForTarget(trx, app, target))!.retired_at).toBeNull();
      // the sweep's delete finds the row locked by this transaction and waits for it
      sweeping = sweep(later(AUDIENCE_RETIRED_GRACE_MS * 2));
      await waitForALockWait();
      await notify(target, trx);
    });
    expect(await sweeping).toMatchObject({ deleted: 0 });
    expect(await row(target)).toMatchObject({ retired_at: null });
  });

  it('a retired audience deleted before a notification names it by id is not found', async () => {
    const target = await oldAudience('gone');
    await sweep(now);
    await sweep(later(AUDIENCE_RETIRED_GRACE_MS * 2));
    expect(await h.db.db.transaction().execute((trx) => audiences.claimForTarget(trx, app, target))).toBeUndefined();
  });

  it('runs when the maintenance drops a day of notifications', async () => {
    const orphan = await oldAudience('maintained');
    // 40 days on, today's notifications are past retention: their day goes, and the audiences are swept
    const at = later(40 * DAY_MS);
    const retention = { ...retentionOf(loadConfig({})), notifications: RETENTION_DAYS };
    const results = await maintainPartitions({ db: h.db.db, repos: createRepositories(), log }, retention, at);
    expect(results.notifications.dropped).toContain(now.toISOString().slice(0, 10));
    expect((await row(orphan))!.retired_at).toEqual(at);
  });

  /** Resolves once some backend of this database waits for a row lock (the sweep behind the transaction). */
  async function waitForALockWait(): Promise<void> {
    for (let i = 0; i < 200; i++) {
      const { rows } = await sql<{ n: number }>`
        select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock'`.execute(h.db.db);
      if (rows[0]!.n > 0) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error('the sweep never waited for the lock');
  }
});
