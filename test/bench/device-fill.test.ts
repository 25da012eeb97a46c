import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fillRegistrations, registration, registrationToken } from '../../bench/lib/device-fill.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { register } from '../http/device-support.js';

/**
 * The scale benchmark fills 10 million devices by SQL, not through the API: its fill must write what a phone's
 * registration writes — the same devices, tags and custom attribute rows, every other table alike.
 */
describe('bench: the SQL fill writes what registering through the API writes', () => {
  const COUNT = 24;
  let h: Harness;
  let api: Awaited<ReturnType<Harness['createApp']>>;
  let filled: Awaited<ReturnType<Harness['createApp']>>;
  /** each table's rows, app_daily_stats's installs (a statement counts its devices in one row per shard) */
  const tableCounts = async () => {
    const { rows } = await sql<{ table: string }>`
      select table_name as table from information_schema.tables
      where table_schema = 'public' and table_type = 'BASE TABLE' order by 1`.execute(h.db.db);
    const counts: Record<string, number> = {};
    for (const { table } of rows) {
      const measure = table === 'app_daily_stats' ? sql`coalesce(sum(installs), 0)` : sql`count(*)`;
      counts[table] = Number((await sql<{ n: string }>`select ${measure}::text as n from ${sql.table(table)}`.execute(h.db.db)).rows[0]!.n);
    }
    return counts;
  };
  const growth = (before: Record<string, number>, after: Record<string, number>) =>
    Object.fromEntries(Object.keys(after).map((t) => [t, after[t]! - (before[t] ?? 0)]));
  /** the registry tables' index definitions and triggers (enabled or not) */
  const structure = async () =>
    (
      await sql<{ line: string }>`
        select indexdef as line from pg_indexes where tablename in ('devices', 'device_tags', 'device_attributes')
        union all
        select tgrelid::regclass || ' ' || tgname || ' ' || tgenabled::text from pg_trigger
        where tgrelid in ('devices'::regclass, 'device_tags'::regclass, 'device_attributes'::regclass)
        order by 1`.execute(h.db.db)
    ).rows.map((r) => r.line);
  let structureBefore: string[];
  let structureAfter: string[];
  let apiGrowth: Record<string, number>;
  let fillGrowth: Record<string, number>;

  beforeAll(async () => {
    h = await createHarness();
    api = await h.createApp('com.example.fill-api', { identityVerification: true });
    filled = await h.createApp('com.example.fill-sql', { identityVerification: true });
    const t0 = await tableCounts();
    for (let i = 0; i < COUNT; i++) await register(h, api.keys.sdk, registration(i, api.identity_secret).device);
    const t1 = await tableCounts();
    structureBefore = await structure();
    await fillRegistrations(h.db, filled.app.id, { count: COUNT, chunk: 10, parallel: 2 });
    structureAfter = await structure();
    apiGrowth = growth(t0, t1);
    fillGrowth = growth(t1, await tableCounts());
  });
  afterAll(async () => {
    await h?.close();
  });

  /** an app's devices, tags and attributes as a registration sets them, in user id order, ids and times left out */
  const stored = async (appId: string) => {
    const devices = await h.db.db.selectFrom('devices').selectAll().where('app_id', '=', appId).orderBy('user_id').execute();
    const tags = await h.db.db
      .selectFrom('device_tags as t')
      .innerJoin('devices as d', 'd.id', 't.device_id')
      .select(['d.user_id', 't.tag'])
      .where('t.app_id', '=', appId)
      .orderBy('d.user_id')
      .orderBy('t.tag')
      .execute();
    const attributes = await h.db.db
      .selectFrom('device_attributes as a')
      .innerJoin('devices as d', 'd.id', 'a.device_id')
      .select(['d.user_id', 'a.name', 'a.type', 'a.position', 'a.is_array', 'a.str_value', 'a.num_value', 'a.date_value', 'a.bool_value'])
      .where('a.app_id', '=', appId)
      .orderBy('d.user_id')
      .orderBy('a.name')
      .execute();
    // the address it registered from: this test's, and one a device of the fill's
    // and the hash of its credential, which is random: its size
    const bare = devices.map(({ id: _id, app_id: _app, created_at: _c, registered_at: _r, ip_address, credential_hash, ...rest }) => ({
      ...rest,
      ip_address: ip_address === null ? null : 'set',
      credential_hash: credential_hash?.length ?? null,
    }));
    return { devices: bare, tags, attributes };
  };

  it('the same devices, tags and custom attributes', async () => {
    const [viaApi, viaSql] = await Promise.all([stored(api.app.id), stored(filled.app.id)]);
    expect(viaApi.devices).toHaveLength(COUNT);
    expect(viaApi.tags).toHaveLength(2 * COUNT);
    expect(viaApi.attributes).toHaveLength(5 * COUNT);
    expect(viaSql).toEqual(viaApi);
  });

  it("the tokens registration(i) sends, an FCM one's base64url past PostgreSQL's line breaks", async () => {
    const rows = await h.db.db.selectFrom('devices').select(['user_id', 'token']).where('app_id', '=', filled.app.id).execute();
    const expected = Array.from({ length: COUNT }, (_, i) => ({ user_id: `u${i}`, token: registrationToken(i) }));
    expect(rows.sort((a, b) => a.user_id!.localeCompare(b.user_id!))).toEqual(expected.sort((a, b) => a.user_id.localeCompare(b.user_id)));
  });

  it('the same indexes after it, the triggers on again', () => {
    expect(structureBefore.filter((line) => line.includes('devices_app_zone_idx'))).toHaveLength(1);
    expect(structureAfter).toEqual(structureBefore);
  });

  it('no other table grows otherwise, the installs counted alike', () => {
    expect(apiGrowth.devices).toBe(COUNT);
    expect(fillGrowth).toEqual(apiGrowth);
  });
});
