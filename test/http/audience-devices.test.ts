import { AudiencesRepository } from '../../src/db/repositories/audiences.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { useHarness, type Harness } from '../helpers/harness.js';
import { audienceFor, call, register } from './device-support.js';

type App = Awaited<ReturnType<Harness['createApp']>>;

describe('audience listing and devices', () => {
  const h = useHarness();
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });

  it('lists audiences in pages of `per`, oldest first, with the test flag', async () => {
    const other = await h.createApp();
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await audienceFor(h, other.app.id, [{ name: 'badge', criteria: [i] }]));
    const page1 = await call(h, 'GET', '/v6/audiences?per=2&page=1', other.keys.read);
    const page3 = await call(h, 'GET', '/v6/audiences?per=2&page=3', other.keys.read);
    expect(page1.statusCode).toBe(200);
    expect(page1.json().audiences.map((a: { id: string }) => a.id)).toEqual([made[0]!.id, made[1]!.id]);
    expect(page3.json().audiences.map((a: { id: string }) => a.id)).toEqual([made[4]!.id]);
    expect(Object.keys(page1.json().audiences[0]).sort()).toEqual(['created_at', 'id', 'name', 'test', 'updated_at']);
    expect(page1.json().audiences[0].test).toBe(false);
    expect((await call(h, 'GET', '/v6/audiences', other.keys.read)).json().audiences).toHaveLength(5);
    expect((await call(h, 'GET', '/v6/audiences?per=0', other.keys.read)).statusCode).toBe(400);
    expect((await call(h, 'GET', '/v6/audiences?page=x', other.keys.read)).statusCode).toBe(400);
    expect((await call(h, 'GET', '/v6/audiences', other.keys.sdk)).statusCode).toBe(403);
  });

  it('pages an audience by cursor until a page has no devices: every device once, in id order, total on each page', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++)
      ids.push((await register(h, app.keys.sdk, { platform: 'ios', tags: ['paged'], custom: { n: { type: 'integer', value: i } } })).id);
    const gone = await register(h, app.keys.sdk, { platform: 'ios', tags: ['paged'] });
    await call(h, 'POST', `/v6/devices/${gone.id}/erase`, app.keys.write);
    await register(h, app.keys.sdk, { platform: 'ios', tags: ['other'] });
    const audience = await audienceFor(h, app.app.id, [{ name: 'tags', criteria: ['paged'] }]);

    const seen: string[] = [];
    let cursor = '';
    let pages = 0;
    for (let devices = -1; devices !== 0 && pages < 10; pages++) {
      const res = await call(h, 'GET', `/v6/audiences/${audience.id}/devices?per=3${cursor ? `&cursor=${cursor}` : ''}`, app.keys.read);
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json();
      expect(body.meta.total).toBe(7);
      devices = body.devices.length;
      seen.push(...body.devices.map((d: { id: string }) => d.id));
      // the empty page answers the position it was asked for
      if (devices === 0) expect(body.meta.cursor).toBe(cursor);
      cursor = body.meta.cursor;
    }
    expect(pages).toBe(4); // 3 + 3 + 1, then the empty page
    expect(seen).toEqual([...ids].sort());
    const first = (await call(h, 'GET', `/v6/audiences/${audience.id}/devices?per=1`, app.keys.read)).json();
    expect(first.devices[0].custom.n.type).toBe('integer');
    expect(first.devices[0].tags).toEqual(['paged']);
  });

  it('an unknown, garbage or foreign cursor answers 404', async () => {
    const a = await audienceFor(h, app.app.id, [{ name: 'os_name', criteria: ['none'] }]);
    const b = await audienceFor(h, app.app.id, [{ name: 'os_name', criteria: ['other'] }]);
    for (const i of [0, 1, 2]) await register(h, app.keys.sdk, { platform: 'android', os_name: 'none', badge: i });
    const page = (await call(h, 'GET', `/v6/audiences/${a.id}/devices?per=1`, app.keys.read)).json();
    expect(page.meta.cursor).toEqual(expect.any(String));
    expect((await call(h, 'GET', `/v6/audiences/${a.id}/devices?cursor=${page.meta.cursor}`, app.keys.read)).statusCode).toBe(200);
    expect((await call(h, 'GET', `/v6/audiences/${b.id}/devices?cursor=${page.meta.cursor}`, app.keys.read)).statusCode).toBe(404);
    expect((await call(h, 'GET', `/v6/audiences/${a.id}/devices?cursor=garbage`, app.keys.read)).statusCode).toBe(404);
    expect(
      (await call(h, 'GET', `/v6/audiences/${a.id}/devices?cursor=${Buffer.from('[1,"x","y"]').toString('base64url')}`, app.keys.read))
        .statusCode,
    ).toBe(404);
    expect((await call(h, 'GET', '/v6/audiences/00000000-0000-4000-8000-000000000000/devices', app.keys.read)).statusCode).toBe(404);
  });

  it('the all-devices audience lists every live device', async () => {
    const fresh = await h.createApp();
    const all = await new AudiencesRepository().upsertAllDevices(h.db.db, fresh.app.id);
    for (let i = 0; i < 3; i++) await register(h, fresh.keys.sdk, { platform: 'ios' });
    const res = (await call(h, 'GET', `/v6/audiences/${all.id}/devices`, fresh.keys.read)).json();
    expect(res.meta).toEqual({ cursor: expect.any(String), total: 3 });
    expect(res.devices).toHaveLength(3);
    const next = (await call(h, 'GET', `/v6/audiences/${all.id}/devices?cursor=${res.meta.cursor}`, fresh.keys.read)).json();
    expect(next).toEqual({ meta: { cursor: res.meta.cursor, total: 3 }, devices: [] });
  });
});
