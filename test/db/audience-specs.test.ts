import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { AudiencesRepository } from '../../src/db/repositories/audiences.js';
import { NotificationsRepository } from '../../src/db/repositories/notifications.js';
import { audienceSpec } from '../../src/domain/audience-spec.js';
import type { Filter } from '../../src/domain/filters.js';
import type { Db } from '../../src/db/database.js';
import { useHarness } from '../helpers/harness.js';

/**
 * The audiences of a group of notifications being created, upserted by the statement that inserts them: one
 * stored audience per app and canonical spec, found when it exists (without writing it again), inserted when not,
 * and the same row when another statement inserted it in between.
 */
describe('the stored audiences of many specs at once', () => {
  const h = useHarness();
  const audiences = new AudiencesRepository();
  const notifications = new NotificationsRepository();
  let app: string;
  let other: string;
  const spec = (appId: string, filters: Filter[]) => ({ appId, ...audienceSpec(filters) });
  const user = (id: string): Filter[] => [{ name: 'user_id', criteria: [id] }];
  /** the row's version: a write of any kind (an update to the same values included) changes it */
  const versionOf = async (id: string) =>
    (await sql<{ xmin: string }>`select xmin::text from audiences where id = ${id}::uuid`.execute(h.db.db)).rows[0]!.xmin;
  /** inserts a notification naming each spec, with the audiences, as a group is created; answers their audience ids */
  const insertNaming = async (specs: ReturnType<typeof spec>[], db: Db = h.db.db) => {
    const inserted = await notifications.insertCut(
      db,
      specs.map((s) => ({
        id: randomUUID(),
        appId: s.appId,
        audienceId: null,
        audienceSpecKey: s.key,
        request: { to: s.canonical, payload: {} },
        payload: {},
        collapseKey: null,
      })),
      null,
      audiences.specAudiences(specs),
    );
    return inserted.map((n) => n.audience_id!);
  };
  const countOf = async (appId: string) =>
    (
      await h.db.db
        .selectFrom('audiences')
        .select(sql<number>`count(*)::int`.as('n'))
        .where('app_id', '=', appId)
        .executeTakeFirstOrThrow()
    ).n;

  beforeAll(async () => {
    app = (await h.createApp()).app.id;
    other = (await h.createApp()).app.id;
  });

  it('inserts new specs once each, per app, and finds them again without writing', async () => {
    const specs = [spec(app, user('ann')), spec(app, user('bo')), spec(app, user('ann')), spec(other, user('ann'))];
    const first = await insertNaming(specs);
    expect(first[2]).toBe(first[0]);
    expect(new Set(first).size).toBe(3);
    const ann = first[0]!;
    const stored = await h.db.db.selectFrom('audiences').selectAll().where('id', '=', ann).executeTakeFirstOrThrow();
    expect(stored).toMatchObject({ app_id: app, kind: 'filters', filters: user('ann'), spec_key: specs[0]!.key });
    expect(stored.name).toMatch(/^api_audience_/);
    expect(await h.db.db.selectFrom('audiences').select('app_id').where('id', '=', first[3]!).executeTakeFirstOrThrow()).toEqual({
      app_id: other,
    });

    const version = await versionOf(ann);
    const again = await insertNaming([spec(app, user('ann')), spec(app, user('cy'))]);
    expect(again[0]).toBe(ann);
    expect(await versionOf(ann)).toBe(version);
    expect(await countOf(app)).toBe(3);
  });

  it('writes no audience when the insert fails: they are one statement', async () => {
    const [ivy] = await insertNaming([spec(app, user('ivy'))]);
    const taken = (await h.db.db.selectFrom('notifications').select('id').where('audience_id', '=', ivy!).executeTakeFirstOrThrow()).id;
    const before = await countOf(app);
    const lost = spec(app, user('gus'));
    // the row's id is taken: the statement fails, and its new audience with it
    const failing = notifications.insertCut(
      h.db.db,
      [{ id: taken, appId: app, audienceId: null, audienceSpecKey: lost.key, request: {}, payload: {}, collapseKey: null }],
      null,
      audiences.specAudiences([lost]),
    );
    await expect(failing).rejects.toThrow(/duplicate key/);
    expect(await countOf(app)).toBe(before);
    expect(await insertNaming([lost])).toEqual([expect.any(String)]);
    expect(await countOf(app)).toBe(before + 1);
  });

  it('one spec at a time (in a create with an Idempotency-Key): the same row, not written again', async () => {
    const { key, canonical } = audienceSpec(user('flo'));
    const first = await audiences.upsertFilters(h.db.db, app, key, canonical);
    const version = await versionOf(first.id);
    expect(await audiences.upsertFilters(h.db.db, app, key, canonical)).toEqual(first);
    expect(await versionOf(first.id)).toBe(version);
    const all = await audiences.upsertAllDevices(h.db.db, app);
    expect(await audiences.upsertAllDevices(h.db.db, app)).toEqual(all);
  });

  it('answers the row another transaction inserted while the statement ran', async () => {
    const raced = spec(app, user('dee'));
    const client = await h.db.pool.connect();
    try {
      await client.query('begin');
      const { rows } = await client.query<{ id: string }>(
        `insert into audiences (app_id, spec_key, kind, filters, name) values ($1, $2, 'filters', $3, 'raced') returning id`,
        [app, raced.key, JSON.stringify(raced.canonical)],
      );
      // the statement does not see the uncommitted row, so it inserts too, and waits on the other's commit
      const upserting = insertNaming([raced, spec(app, user('ed'))]);
      await new Promise((resolve) => setTimeout(resolve, 200));
      await client.query('commit');
      const ids = await upserting;
      expect(ids[0]).toBe(rows[0]!.id);
      expect(ids[1]).toEqual(expect.any(String));
      expect(ids[1]).not.toBe(ids[0]);
    } finally {
      client.release();
    }
  });

  it('takes a spec another statement inserted without holding up a message that names it', async () => {
    const raced = spec(app, user('jo'));
    const inserting = await h.db.pool.connect();
    const elsewhere = await h.db.pool.connect();
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let group: Promise<void> = Promise.resolve();
    try {
      await inserting.query('begin');
      const { rows } = await inserting.query<{ id: string }>(
        `insert into audiences (app_id, spec_key, kind, filters, name) values ($1, $2, 'filters', $3, 'raced') returning id`,
        [app, raced.key, JSON.stringify(raced.canonical)],
      );
      let taken = (_id: string) => {};
      const takenId = new Promise<string>((resolve) => (taken = resolve));
      // a group's statement takes the spec once the other insert commits, and its transaction stays open
      group = h.db.db.transaction().execute(async (trx) => {
        taken((await insertNaming([raced], trx))[0]!);
        await held;
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      await inserting.query('commit');
      expect(await takenId).toBe(rows[0]!.id);
      // another process's message naming that audience: its foreign-key check must not wait for the group
      await elsewhere.query(`set lock_timeout = '1s'`);
      await elsewhere.query(
        `insert into messages (app_id, audience_id, request, title, type, publish_at, expires_at)
         values ($1, $2, '{}', 'jo', 'default', now(), now() + interval '90 days')`,
        [app, rows[0]!.id],
      );
    } finally {
      release();
      await group;
      inserting.release();
      elsewhere.release();
    }
  });
});
