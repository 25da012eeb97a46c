import pg from 'pg';
import { sql } from 'kysely';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DevicesRepository } from '../../src/db/repositories/devices.js';
import { NewDevicesRepository, type NewTokenDevice } from '../../src/db/repositories/new-devices.js';
import { byNameAndPosition, tokenKey } from '../../src/db/repositories/device-queries.js';
import { credentialHash } from '../../src/domain/device-credential.js';
import type { CustomChanges } from '../../src/domain/device-input.js';
import { useHarness } from '../helpers/harness.js';
import { call, SAMPLE_COLUMNS, SAMPLE_CUSTOM, token } from './device-support.js';

/**
 * New devices of registrations that arrive together, written by one statement (NewDevicesRepository.insertNewTokens):
 * stored exactly as the one-device statement stores them, each token's lock taken without waiting for it.
 */
describe('new devices written in groups', () => {
  const h = useHarness();
  const repo = new NewDevicesRepository();
  afterEach(() => vi.restoreAllMocks());

  const custom = SAMPLE_CUSTOM;

  const fullDevice = (appId: string, t: string): NewTokenDevice['values'] => ({
    ...SAMPLE_COLUMNS,
    app_id: appId,
    token: t,
    last_opened_at: new Date('2026-01-02T03:04:05.678Z'),
    credential_hash: credentialHash('the credential'),
  });

  it('stores each device and its attributes as the one-device statement does', async () => {
    const { app } = await h.createApp();
    const [grouped, alone] = [token(), token()];
    const [stored] = await repo.insertNewTokens(h.db.db, [{ values: fullDevice(app.id, grouped), changes: custom }]);
    const single = await new DevicesRepository().insertNewToken(h.db.db, fullDevice(app.id, alone), custom);
    const comparable = (d: Record<string, unknown>) => {
      const { id: _id, token: _token, created_at: _c, registered_at: _r, ...rest } = d;
      return rest;
    };
    expect(stored!.device.token).toBe(grouped);
    expect(comparable(stored!.device)).toEqual(comparable(single!.device));
    const attributes = (list: Record<string, unknown>[]) => list.map(({ device_id: _d, ...a }) => a);
    expect(stored!.attributes).toHaveLength(6);
    expect(attributes(stored!.attributes)).toEqual(attributes(single!.attributes));
    expect(stored!.attributes.every((a) => a.device_id === stored!.device.id)).toBe(true);
    // what the answer says is what a read finds
    const row = await h.db.db.selectFrom('devices').selectAll().where('id', '=', stored!.device.id).executeTakeFirstOrThrow();
    expect(row).toEqual(stored!.device);
    const tags = await h.db.db.selectFrom('device_tags').select('tag').where('device_id', '=', row.id).orderBy('tag').execute();
    expect(tags.map((t) => t.tag)).toEqual(['a,b', 'news', 'x"y']);
  });

  it('answers undefined for a token repeated in the group, one already stored and one whose lock is held, without waiting', async () => {
    const { app } = await h.createApp();
    const [stored, repeated, held, plain] = [token(), token(), token(), token()];
    await repo.insertNewTokens(h.db.db, [{ values: { app_id: app.id, platform: 'ios', token: stored }, changes: new Map() }]);
    const locker = new pg.Client({ connectionString: h.databaseUrl });
    await locker.connect();
    try {
      await locker.query('select pg_advisory_lock(hashtextextended($1, 0))', [`${app.id}:${held}`]);
      const ios = (t: string, badge: number) => ({
        values: { app_id: app.id, platform: 'ios' as const, token: t, badge },
        changes: new Map(),
      });
      const started = performance.now();
      const answers = await repo.insertNewTokens(h.db.db, [
        ios(repeated, 1),
        ios(stored, 2),
        { ...ios(repeated, 3), values: { ...ios(repeated, 3).values, locale: 'fr_FR' } },
        ios(held, 4),
        ios(plain, 5),
      ]);
      expect(performance.now() - started).toBeLessThan(2000);
      expect(answers.map((a) => a?.device.badge)).toEqual([1, undefined, undefined, undefined, 5]);
    } finally {
      await locker.end();
    }
    const rows = await h.db.db.selectFrom('devices').select(['token', 'badge']).where('app_id', '=', app.id).orderBy('badge').execute();
    expect(rows).toEqual([
      { token: repeated, badge: 1 },
      { token: plain, badge: 5 },
      { token: stored, badge: null },
    ]);
  });

  it('writes devices of several apps and columns in one statement, each with its own attributes', async () => {
    const [one, two] = [(await h.createApp()).app, (await h.createApp()).app];
    const [shared, other] = [token(), token()];
    const plan = (value: string): CustomChanges => new Map([['plan', { type: 'string', isArray: false, values: [value] }]]);
    const answers = await repo.insertNewTokens(h.db.db, [
      { values: { app_id: one.id, platform: 'ios', token: shared }, changes: plan('pro') },
      {
        values: { app_id: two.id, platform: 'android', token: shared, locale: 'fr_FR' },
        changes: new Map([...plan('free'), ['n', { type: 'integer', isArray: true, values: [1, 2] }]]),
      },
      { values: { app_id: one.id, platform: 'android', token: other, tags: ['x'] }, changes: new Map() },
    ]);
    expect(answers.map((a) => [a!.device.app_id, a!.device.token, a!.device.locale, a!.device.tags])).toEqual([
      [one.id, shared, null, []],
      [two.id, shared, 'fr_FR', []],
      [one.id, other, null, ['x']],
    ]);
    const values = answers.map((a) => a!.attributes.map((r) => [r.device_id === a!.device.id, r.name, r.str_value ?? r.num_value]));
    expect(values).toEqual([
      [[true, 'plan', 'pro']],
      [
        [true, 'n', 1],
        [true, 'n', 2],
        [true, 'plan', 'free'],
      ],
      [],
    ]);
    const stored = await h.db.db.selectFrom('device_attributes').select(['device_id', 'name']).where('app_id', '=', two.id).execute();
    expect(stored.map((r) => r.device_id)).toEqual([answers[1]!.device.id, answers[1]!.device.id, answers[1]!.device.id]);
  });

  it('gives each device of a statement its tags once (migration 076), none to one inserted erased, and syncs them on update', async () => {
    const { app } = await h.createApp();
    const ios = (t: string, tags: string[]) => ({
      values: { app_id: app.id, platform: 'ios' as const, token: t, tags },
      changes: new Map(),
    });
    const [a, b, c] = await repo.insertNewTokens(h.db.db, [ios(token(), ['x', 'y', 'x']), ios(token(), []), ios(token(), ['y'])]);
    const erased = await new DevicesRepository().insertNewToken(
      h.db.db,
      { app_id: app.id, platform: 'ios', token: token(), tags: ['x'], erased_at: new Date() },
      new Map(),
    );
    const tagsOf = async () =>
      (
        await h.db.db
          .selectFrom('device_tags')
          .select(['device_id', 'tag'])
          .where('app_id', '=', app.id)
          .orderBy('tag')
          .orderBy('device_id')
          .execute()
      ).map((r) => [r.device_id, r.tag]);
    const [ida, idc] = [a!.device.id, c!.device.id];
    expect(b!.device.tags).toEqual([]);
    expect(erased!.device.erased_at).not.toBeNull();
    expect(await tagsOf()).toEqual([
      [ida, 'x'],
      ...[
        [ida, 'y'],
        [idc, 'y'],
      ].sort(),
    ]);
    await h.db.db
      .updateTable('devices')
      .set({ tags: ['z'] })
      .where('id', '=', ida)
      .execute();
    expect(await tagsOf()).toEqual([
      [idc, 'y'],
      [ida, 'z'],
    ]);
  });

  it("one device alone (a group's fallback) waits in its insert for a held lock, then writes", async () => {
    const { app } = await h.createApp();
    const t = token();
    const locker = new pg.Client({ connectionString: h.databaseUrl });
    await locker.connect();
    try {
      await locker.query('select pg_advisory_lock(hashtextextended($1, 0))', [`${app.id}:${t}`]);
      const alone = new DevicesRepository().insertNewToken(h.db.db, { app_id: app.id, platform: 'ios', token: t }, new Map());
      const waiting = async () =>
        (await locker.query(`select query from pg_stat_activity where datname = current_database() and wait_event = 'advisory'`)).rows;
      let rows = await waiting();
      for (let i = 0; rows.length < 1 && i < 400; i++) rows = await new Promise((r) => setTimeout(r, 25)).then(waiting);
      expect(rows.map((r) => r.query.trim().slice(0, 30))).toEqual(['insert into "devices" ("platfo']);
      await locker.query('select pg_advisory_unlock(hashtextextended($1, 0))', [`${app.id}:${t}`]);
      expect((await alone)!.device.token).toBe(t);
    } finally {
      await locker.end();
    }
  });

  it('stores a token with a lone surrogate as a parameter sends it, under the key Node computes', async () => {
    const { app } = await h.createApp();
    const lone = `lone \ud800 ${token()}`;
    const [stored] = await repo.insertNewTokens(h.db.db, [
      { values: { app_id: app.id, platform: 'android', token: lone }, changes: new Map() },
    ]);
    const sent = Buffer.from(lone, 'utf8').toString('utf8');
    expect(stored!.device.token).toBe(sent);
    const { rows } = await sql<{
      key: string;
    }>`select pushd_token_key(token)::text as key from devices where id = ${stored!.device.id}`.execute(h.db.db);
    expect(rows[0]!.key).toBe(tokenKey(lone));
  });

  it("answers each device's attributes as a read of them finds them, without reading them back", async () => {
    const { app } = await h.createApp();
    const custom: CustomChanges = new Map([
      ...SAMPLE_CUSTOM,
      ['lone \ud800 name', { type: 'string', isArray: true, values: ['b \udfff', 'a'] }],
      ['count', { type: 'integer', isArray: false, values: [9_007_199_254_740_991] }],
      ['removed', null],
    ]);
    const answers = await repo.insertNewTokens(h.db.db, [
      { values: { app_id: app.id, platform: 'ios', token: token() }, changes: custom },
      { values: { app_id: app.id, platform: 'ios', token: token() }, changes: new Map() },
    ]);
    for (const answer of answers) {
      const read = await h.db.db.selectFrom('device_attributes').selectAll().where('device_id', '=', answer!.device.id).execute();
      expect(answer!.attributes).toEqual(read.sort(byNameAndPosition));
    }
    expect(answers[0]!.attributes.map((a) => a.name)).toContain('lone \ufffd name');
    expect(answers[1]!.attributes).toEqual([]);
  });

  it('registrations that arrive together are written by one statement, each answered with its own device and credential', async () => {
    const { app, keys } = await h.createApp();
    const grouped = vi.spyOn(NewDevicesRepository.prototype, 'insertNewTokens');
    const single = vi.spyOn(DevicesRepository.prototype, 'insertNewToken');
    const tokens = Array.from({ length: 40 }, () => token());
    const answers = await Promise.all(
      tokens.map((t, i) =>
        call(h, 'POST', '/v6/devices', keys.sdk, {
          device: { platform: 'ios', token: t, badge: i, tags: [`t${i}`], custom: { n: { type: 'integer', value: i } } },
        }),
      ),
    );
    expect(answers.map((a) => a.statusCode)).toEqual(tokens.map(() => 201));
    answers.forEach((a, i) =>
      expect(a.json().device).toMatchObject({ token: tokens[i], badge: i, tags: [`t${i}`], custom: { n: { type: 'integer', value: i } } }),
    );
    // fewer statements than registrations, and none fell back to one at a time
    const sizes = grouped.mock.calls.map(([, devices]) => devices.length);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(40);
    expect(Math.max(...sizes)).toBeGreaterThan(1);
    expect(single).not.toHaveBeenCalled();
    // a statement counts its devices' installs in one counter of the day (migration 075), not one counter each
    const counters = await h.db.db
      .selectFrom('app_daily_stats')
      .select([sql<number>`count(*)::int`.as('rows'), sql<number>`sum(installs)::int`.as('installs')])
      .where('app_id', '=', app.id)
      .executeTakeFirstOrThrow();
    expect(counters.installs).toBe(40);
    expect(counters.rows).toBeLessThanOrEqual(sizes.length);
    // each device keeps the credential its own answer gave
    for (const [i, a] of answers.entries()) {
      const { id, credential } = a.json().device as { id: string; credential: string };
      const row = await h.db.db.selectFrom('devices').select(['token', 'credential_hash']).where('id', '=', id).executeTakeFirstOrThrow();
      expect(row.token).toBe(tokens[i]);
      expect(row.credential_hash).toEqual(credentialHash(credential));
    }
  });
  it('a device of more attribute values than a group takes is written alone', async () => {
    const { keys } = await h.createApp();
    const grouped = vi.spyOn(NewDevicesRepository.prototype, 'insertNewTokens');
    const single = vi.spyOn(DevicesRepository.prototype, 'insertNewToken');
    const many = {
      a: { type: 'string', value: Array.from({ length: 40 }, (_, i) => `a${i}`) },
      b: { type: 'integer', value: Array.from({ length: 11 }, (_, i) => i) },
    };
    const res = await call(h, 'POST', '/v6/devices', keys.sdk, { device: { platform: 'ios', token: token(), custom: many } });
    expect(res.statusCode).toBe(201);
    expect(res.json().device.custom).toEqual(many);
    expect(single).toHaveBeenCalledTimes(1);
    expect(grouped).not.toHaveBeenCalled();
  });
});
