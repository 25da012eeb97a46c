import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { AudiencesRepository, specRef } from '../../src/db/repositories/audiences.js';
import { audienceSpec } from '../../src/domain/audience-spec.js';
import type { Filter } from '../../src/domain/filters.js';
import { useHarness } from '../helpers/harness.js';

/**
 * The audiences of a group of notifications being created: one stored audience per app and canonical spec, found
 * when it exists (without writing it again), inserted when not, and the same row when another statement inserted
 * it in between.
 */
describe('the stored audiences of many specs at once', () => {
  const h = useHarness();
  const audiences = new AudiencesRepository();
  let app: string;
  let other: string;
  const spec = (appId: string, filters: Filter[]) => ({ appId, ...audienceSpec(filters) });
  const user = (id: string): Filter[] => [{ name: 'user_id', criteria: [id] }];
  /** the row's version: a write of any kind (an update to the same values included) changes it */
  const versionOf = async (id: string) =>
    (await sql<{ xmin: string }>`select xmin::text from audiences where id = ${id}::uuid`.execute(h.db.db)).rows[0]!.xmin;

  beforeAll(async () => {
    app = (await h.createApp()).app.id;
    other = (await h.createApp()).app.id;
  });

  it('inserts new specs once each, per app, and finds them again without writing', async () => {
    const specs = [spec(app, user('ann')), spec(app, user('bo')), spec(app, user('ann')), spec(other, user('ann'))];
    const first = await audiences.upsertFiltersMany(h.db.db, specs);
    expect(first.size).toBe(3);
    const ann = first.get(specRef(app, specs[0]!.key))!;
    expect(first.get(specRef(other, specs[3]!.key))).not.toBe(ann);
    const stored = await h.db.db.selectFrom('audiences').selectAll().where('id', '=', ann).executeTakeFirstOrThrow();
    expect(stored).toMatchObject({ app_id: app, kind: 'filters', filters: user('ann') });
    expect(stored.name).toMatch(/^api_audience_/);

    const version = await versionOf(ann);
    const again = await audiences.upsertFiltersMany(h.db.db, [spec(app, user('ann')), spec(app, user('cy'))]);
    expect(again.get(specRef(app, specs[0]!.key))).toBe(ann);
    expect(await versionOf(ann)).toBe(version);
    const count = await h.db.db
      .selectFrom('audiences')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('app_id', '=', app)
      .executeTakeFirstOrThrow();
    expect(count.n).toBe(3);
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
      const upserting = audiences.upsertFiltersMany(h.db.db, [raced, spec(app, user('ed'))]);
      await new Promise((resolve) => setTimeout(resolve, 200));
      await client.query('commit');
      const ids = await upserting;
      expect(ids.get(specRef(app, raced.key))).toBe(rows[0]!.id);
      expect(ids.get(specRef(app, spec(app, user('ed')).key))).toEqual(expect.any(String));
    } finally {
      client.release();
    }
  });
});
