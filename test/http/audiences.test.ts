import { beforeAll, describe, expect, it } from 'vitest';
import { useHarness, type Harness } from '../helpers/harness.js';
import { countRows, get, postNotification, type AppWithKeys } from './support.js';

/** On-the-fly audiences are deduplicated per app by their canonical spec, also under concurrency. */

const send = (h: Harness, app: AppWithKeys, to: unknown) =>
  postNotification(h, app.keys.write, { notification: { to, payload: { alert: 'x' } } });

async function audienceOf(h: Harness, app: AppWithKeys, to: unknown): Promise<string> {
  const res = await send(h, app, to);
  expect(res.statusCode, res.body).toBe(201);
  return res.json().to.id as string;
}

const spec = [
  { name: 'locale', criteria: ['fr_FR', 'de_DE'] },
  { name: 'badge', criteria: [{ gt: 1, lte: 10 }] },
  { name: 'location', criteria: [{ point: { latitude: 48.8, longitude: 2.3 }, distance: 5, unit: 'km' }] },
  { name: 'tags', criteria: ['vip'], not_filter: true },
];
// The same audience written differently: filters, criteria and object keys reordered, not_filter:false spelled
// out, a duplicated criterion, a unit alias.
const sameSpec = [
  { not_filter: true, criteria: ['vip'], name: 'tags' },
  { criteria: [{ unit: 'kilometers', distance: 5, point: { longitude: 2.3, latitude: 48.8 } }], name: 'location' },
  { name: 'badge', criteria: [{ lte: 10, gt: 1 }], not_filter: false },
  { name: 'locale', criteria: ['de_DE', 'fr_FR', 'de_DE'] },
];

describe('audience dedupe', () => {
  const h = useHarness();
  let app: AppWithKeys;
  beforeAll(async () => {
    app = await h.createApp();
  });

  it('50 concurrent identical on-the-fly requests share one audience, stored once', async () => {
    const to = [{ name: 'country', criteria: ['FR'] }];
    const before = await countRows(h, 'audiences', app.app.id);
    const results = await Promise.all(Array.from({ length: 50 }, () => send(h, app, to)));
    expect(results.map((r) => r.statusCode)).toEqual(Array(50).fill(201));
    const ids = new Set(results.map((r) => r.json().to.id));
    expect(ids.size).toBe(1);
    expect(await countRows(h, 'audiences', app.app.id)).toBe(before + 1);
    // 50 notifications, all pointing at that audience
    const rows = await h.db.db
      .selectFrom('notifications')
      .select('audience_id')
      .where('app_id', '=', app.app.id)
      .where('audience_id', '=', [...ids][0]!)
      .execute();
    expect(rows).toHaveLength(50);
  });

  it('50 concurrent different-but-equivalent spellings also converge on one audience', async () => {
    const spellings = Array.from({ length: 50 }, (_, i) => (i % 2 ? spec : sameSpec));
    const results = await Promise.all(spellings.map((to) => send(h, app, to)));
    expect(new Set(results.map((r) => r.json().to.id)).size).toBe(1);
  });

  it('reordered filters, criteria and keys, not_filter:false vs absent, duplicates and unit aliases -> the same id', async () => {
    const a = await audienceOf(h, app, spec);
    expect(await audienceOf(h, app, sameSpec)).toBe(a);
    expect(await audienceOf(h, app, [...spec].reverse())).toBe(a);
  });

  it('not_filter:false equals an absent not_filter', async () => {
    const a = await audienceOf(h, app, [{ name: 'os_name', criteria: ['iOS'] }]);
    expect(await audienceOf(h, app, [{ name: 'os_name', criteria: ['iOS'], not_filter: false }])).toBe(a);
  });

  it.each([
    ['another criterion value', [{ name: 'os_name', criteria: ['Android'] }]],
    ['not_filter true', [{ name: 'os_name', criteria: ['iOS'], not_filter: true }]],
    ['another attribute', [{ name: 'os_version', criteria: ['iOS'] }]],
    [
      'an extra filter',
      [
        { name: 'os_name', criteria: ['iOS'] },
        { name: 'development', criteria: [true] },
      ],
    ],
    ['an extra criterion', [{ name: 'os_name', criteria: ['iOS', 'Android'] }]],
  ])('a different spec (%s) -> a different id', async (_name, other) => {
    const base = await audienceOf(h, app, [{ name: 'os_name', criteria: ['iOS'] }]);
    const id = await audienceOf(h, app, other);
    expect(id).not.toBe(base);
  });

  it('the same spec in another app is another audience', async () => {
    const other = await h.createApp();
    const mine = await audienceOf(h, app, spec);
    const theirs = await audienceOf(h, other, spec);
    expect(theirs).not.toBe(mine);
    // and each app reads only its own
    expect((await get(h, other.keys.read, `/v6/audiences/${mine}`)).statusCode).toBe(404);
    const owners = await h.db.db.selectFrom('audiences').select(['id', 'app_id']).where('id', 'in', [mine, theirs]).execute();
    expect(Object.fromEntries(owners.map((r) => [r.id, r.app_id]))).toEqual({ [mine]: app.app.id, [theirs]: other.app.id });
  });

  it('"*" is the app\'s built-in all-devices audience: one per app, stable id, not a filter audience', async () => {
    const a = await audienceOf(h, app, '*');
    const concurrent = await Promise.all(Array.from({ length: 10 }, () => audienceOf(h, app, '*')));
    expect(new Set(concurrent)).toEqual(new Set([a]));
    const rows = await h.db.db.selectFrom('audiences').selectAll().where('app_id', '=', app.app.id).where('kind', '=', 'all').execute();
    expect(rows.map((r) => r.id)).toEqual([a]);

    const other = await h.createApp();
    expect(await audienceOf(h, other, '*')).not.toBe(a);
  });

  it('{"audience": id} targets that stored audience', async () => {
    const id = await audienceOf(h, app, [{ name: 'app_version', criteria: ['1.0'] }]);
    const res = await send(h, app, { audience: id });
    expect(res.statusCode).toBe(201);
    expect(res.json().to).toEqual({ id, type: 'Audience' });
    expect(res.json().notification.to).toEqual({ audience: id });
    const all = await audienceOf(h, app, '*');
    expect(await audienceOf(h, app, { audience: all })).toBe(all);
  });

  it.each([
    ["another app's audience", async (h2: Harness) => audienceOf(h2, await h2.createApp(), [{ name: 'locale', criteria: ['it_IT'] }])],
    ['an unknown uuid', async () => '00000000-0000-4000-8000-000000000000'],
    ['not a uuid', async () => 'not-a-uuid'],
  ])('{"audience": %s} -> 404 audience not found, nothing stored', async (_name, makeId) => {
    const id = await makeId(h);
    const notifications = await countRows(h, 'notifications');
    const audiences = await countRows(h, 'audiences');
    const res = await send(h, app, { audience: id });
    expect(res.json()).toEqual({ error: 'audience not found' });
    expect(res.statusCode).toBe(404);
    expect(await countRows(h, 'notifications')).toBe(notifications);
    expect(await countRows(h, 'audiences')).toBe(audiences);
  });
});
