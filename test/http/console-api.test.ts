import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { liveActivityPayload } from '../../src/domain/live-activity.js';
import { toApnsRequest, toFcmMessage, toHmsMessage, toLiveActivityRequest, toWebPushMessage } from '../../src/domain/push-mapping.js';
import { PREVIEW_NOTIFICATION_ID } from '../../src/services/notifications.js';
import { useHarness, type Harness } from '../helpers/harness.js';
import { call, countVia, register, token } from './device-support.js';
import { ISO_MS, postNotification } from './support.js';

/** The endpoints the console reads beyond the contract's: key, notification list, stats, count, preview. */

type App = Awaited<ReturnType<Harness['createApp']>>;

describe('console API', () => {
  const h = useHarness();
  let app: App;
  beforeAll(async () => {
    app = await h.createApp('com.example.console');
  });

  it('GET /v6/key names the role and the app; an sdk key is refused', async () => {
    for (const role of ['read', 'write'] as const) {
      const res = await call(h, 'GET', '/v6/key', app.keys[role]);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ role, app: { id: app.app.id, bundle_id: 'com.example.console', name: app.app.name } });
    }
    expect((await call(h, 'GET', '/v6/key', app.keys.sdk)).statusCode).toBe(403);
    const refused = await call(h, 'GET', '/v6/key', 'nope');
    expect(refused.statusCode).toBe(401);
    expect(refused.headers['www-authenticate']).toBe('Basic realm="push"');
    // a script's request (the console's) gets no challenge, which would open the browser's password dialog
    const scripted = await call(h, 'GET', '/v6/key', 'nope', undefined, { 'x-requested-with': 'XMLHttpRequest' });
    expect(scripted.statusCode).toBe(401);
    expect(scripted.json()).toEqual({ error: 'unauthorized' });
    expect(scripted.headers['www-authenticate']).toBeUndefined();
  });

  it('GET /v6/notifications lists newest first in pages, only the app’s own', async () => {
    const own = await h.createApp();
    const other = await h.createApp();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await postNotification(h, own.keys.write, { notification: { to: '*', payload: { alert: `n${i}` } } });
      ids.push(res.json().id);
    }
    await postNotification(h, other.keys.write, { notification: { to: '*', payload: { alert: 'other' } } });
    const page1 = await call(h, 'GET', '/v6/notifications?per=2', own.keys.read);
    const page2 = await call(h, 'GET', '/v6/notifications?per=2&page=2', own.keys.read);
    expect(page1.statusCode).toBe(200);
    expect(page1.json().notifications.map((n: { id: string }) => n.id)).toEqual([ids[2], ids[1]]);
    expect(page2.json().notifications.map((n: { id: string }) => n.id)).toEqual([ids[0]]);
    const first = page1.json().notifications[0];
    const single = await call(h, 'GET', `/v6/notifications/${ids[2]}`, own.keys.read);
    expect(first).toEqual(single.json());
    expect(first.created_at).toMatch(ISO_MS);
    expect((await call(h, 'GET', '/v6/notifications?per=5000', own.keys.read)).json()).toEqual({
      error: 'querystring.per: Too big: expected number to be <=1000',
    });
    expect((await call(h, 'GET', '/v6/notifications', own.keys.sdk)).statusCode).toBe(403);
  });

  it('GET /v6/stats/devices counts live devices by platform and environment, push-enabled, uninstalled in 30 days', async () => {
    const a = await h.createApp();
    await register(h, a.keys.sdk, { platform: 'ios', token: token(), notifications_allowed: 'Enabled' });
    await register(h, a.keys.sdk, { platform: 'ios', token: token(), notifications_allowed: 'Disabled' });
    await register(h, a.keys.sdk, { platform: 'ios', token: token(), development: true, notifications_allowed: 'Enabled' });
    const invalid = await register(h, a.keys.sdk, { platform: 'android', token: token(), notifications_allowed: 'Enabled' });
    const old = await register(h, a.keys.sdk, { platform: 'android', token: token() });
    const erased = await register(h, a.keys.sdk, { platform: 'android', token: token(), notifications_allowed: 'Enabled' });
    await call(h, 'POST', `/v6/devices/${erased.id}/erase`, a.keys.write);
    await h.db.db
      .updateTable('devices')
      .set({ token_invalidated_at: sql`now() - interval '1 day'` })
      .where('id', '=', invalid.id)
      .execute();
    await h.db.db
      .updateTable('devices')
      .set({ token_invalidated_at: sql`now() - interval '31 days'` })
      .where('id', '=', old.id)
      .execute();

    const res = await call(h, 'GET', '/v6/stats/devices', a.keys.read);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      total: 5,
      push_enabled: 3,
      with_token: 3,
      uninstalled_last_30_days: 1,
      groups: [
        { platform: 'android', environment: 'production', devices: 2, push_enabled: 1, with_token: 0 },
        { platform: 'ios', environment: 'production', devices: 2, push_enabled: 1, with_token: 2 },
        { platform: 'ios', environment: 'development', devices: 1, push_enabled: 1, with_token: 1 },
      ],
    });
  });

  it('GET /v6/stats/pushes sums delivery batches per UTC day by outcome, zeros for quiet days', async () => {
    const a = await h.createApp();
    const n = (await postNotification(h, a.keys.write, { notification: { to: '*', payload: { alert: 'x' } } })).json().id as string;
    const other = await h.createApp();
    const o = (await postNotification(h, other.keys.write, { notification: { to: '*', payload: { alert: 'x' } } })).json().id as string;
    const dayStart = (daysAgo: number) =>
      sql<Date>`date_trunc('day', now() at time zone 'UTC') at time zone 'UTC' - make_interval(days => ${daysAgo}::int) + interval '1 hour'`;
    // made `daysAgo`, and started then unless paced to start `startedDaysAgo`; its last attempt is now
    const batch = (
      notificationId: string,
      seq: number,
      daysAgo: number,
      succeeded: number,
      failed: number,
      invalidated: number,
      startedDaysAgo?: number,
    ) =>
      h.db.db
        .insertInto('delivery_batches')
        .values({
          notification_id: notificationId,
          generation: 1,
          seq,
          platform: 'ios',
          development: false,
          device_ids: [],
          pending_device_ids: [],
          state: 'done',
          succeeded,
          failed,
          invalidated,
          created_at: dayStart(daysAgo),
          not_before: startedDaysAgo === undefined ? null : dayStart(startedDaysAgo),
        })
        .execute();
    await batch(n, 1, 0, 5, 1, 2);
    await batch(n, 2, 0, 3, 0, 0);
    await batch(n, 3, 2, 7, 0, 1);
    await batch(n, 4, 9, 100, 0, 0); // outside a 3-day window
    await batch(n, 5, 9, 4, 0, 0, 2); // made before the window, paced to start in it
    await batch(o, 1, 0, 1000, 0, 0); // another app

    const res = await call(h, 'GET', '/v6/stats/pushes?days=3', a.keys.read);
    expect(res.statusCode).toBe(200);
    const day = (ago: number) => new Date(Date.now() - ago * 86_400_000).toISOString().slice(0, 10);
    expect(res.json()).toEqual({
      days: [
        { date: day(2), succeeded: 11, failed: 0, invalidated: 1 },
        { date: day(1), succeeded: 0, failed: 0, invalidated: 0 },
        { date: day(0), succeeded: 8, failed: 1, invalidated: 2 },
      ],
    });
    expect((await call(h, 'GET', '/v6/stats/pushes', a.keys.read)).json().days).toHaveLength(30);
    expect((await call(h, 'GET', '/v6/stats/pushes?days=0', a.keys.read)).statusCode).toBe(400);
  });

  it('POST /v6/audiences/count answers what the stored audience counts, stores nothing, and names a bad filter; a stored audience shows its filters', async () => {
    const a = await h.createApp();
    for (const locale of ['fr_FR', 'fr_FR', 'de_DE']) await register(h, a.keys.sdk, { platform: 'ios', token: token(), locale });
    const filters = [{ name: 'locale', criteria: ['fr_FR'] }];
    const res = await call(h, 'POST', '/v6/audiences/count', a.keys.read, { filters });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ device_count: 2 });
    expect((await h.db.db.selectFrom('audiences').select('id').where('app_id', '=', a.app.id).execute()).length).toBe(0);
    expect(await countVia(h, a.app.id, a.keys.read, filters)).toBe(2);
    expect((await call(h, 'POST', '/v6/audiences/count', a.keys.read, { filters: [] })).json()).toEqual({ device_count: 3 });
    const tooMany = Array.from({ length: 51 }, () => filters[0]);
    const refused = await call(h, 'POST', '/v6/audiences/count', a.keys.read, { filters: tooMany });
    expect([refused.statusCode, refused.json()]).toEqual([400, { error: 'filters: must hold at most 50 filters' }]);

    const stored = await call(h, 'POST', '/v6/notifications', a.keys.write, { notification: { to: filters, payload: { alert: 'x' } } });
    const audienceId = stored.json().to.id as string;
    expect((await call(h, 'GET', `/v6/audiences/${audienceId}/filters`, a.keys.read)).json()).toEqual({
      id: audienceId,
      kind: 'filters',
      filters,
    });
    const all = (await call(h, 'POST', '/v6/notifications', a.keys.write, { notification: { to: '*', payload: { alert: 'x' } } })).json();
    expect((await call(h, 'GET', `/v6/audiences/${all.to.id}/filters`, a.keys.read)).json()).toEqual({
      id: all.to.id,
      kind: 'all',
      filters: null,
    });
    expect((await call(h, 'GET', `/v6/audiences/${audienceId}/filters`, app.keys.read)).statusCode).toBe(404);

    const bad = await call(h, 'POST', '/v6/audiences/count', a.keys.read, { filters: [{ name: 'badge', criteria: ['x'] }] });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ error: 'filters[0].criteria[0]: must be a number or a range object' });
    expect((await call(h, 'POST', '/v6/audiences/count', a.keys.read, [])).json()).toEqual({ error: 'body must be {"filters": [...]}' });
  });

  it('POST /v6/notifications/preview answers the mapped APNs, FCM, Web Push and HMS requests and the create’s own validation messages', async () => {
    const payload = { alert: 'Soldes', title: 'Shop', badge: 2, collapse_key: 'sale', _channel_id: 'promo', url: 'https://x', n: 3 };
    const res = await call(h, 'POST', '/v6/notifications/preview', app.keys.read, { notification: { to: '*', payload } });
    expect(res.statusCode, res.body).toBe(200);
    const apns = toApnsRequest(payload, PREVIEW_NOTIFICATION_ID);
    const web = toWebPushMessage(payload, PREVIEW_NOTIFICATION_ID);
    expect(res.json()).toEqual({
      apns: { headers: apns.headers, body: apns.body, bytes: apns.bytes, max_bytes: 4096 },
      fcm: { body: { message: { token: '<device token>', ...toFcmMessage(payload, PREVIEW_NOTIFICATION_ID) } } },
      web: { headers: web.headers, document: web.document, bytes: web.body.length + 103, max_bytes: 4096 },
      hms: { message: toHmsMessage(payload, PREVIEW_NOTIFICATION_ID, { now: new Date() }) },
      // no content per language: the payload as it is
      localized: null,
    });
    expect(res.json().apns.headers['apns-collapse-id']).toBe('sale');

    for (const body of [
      { notification: { to: '*', payload: { badge: -1 } } },
      { notification: { to: [{ name: 'nope', criteria: [1] }], payload: { alert: 'x' } } },
      { notification: { to: '*', payload: { aps: {} } } },
    ]) {
      const preview = await call(h, 'POST', '/v6/notifications/preview', app.keys.read, body);
      const create = await postNotification(h, app.keys.write, body);
      expect(preview.statusCode).toBe(400);
      expect(preview.json()).toEqual(create.json());
    }
    const missing = { notification: { to: { audience: '3f0b6c0e-0000-4000-8000-000000000000' }, payload: { alert: 'x' } } };
    expect((await call(h, 'POST', '/v6/notifications/preview', app.keys.read, missing)).json()).toEqual({ error: 'audience not found' });
    const before = await h.db.db.selectFrom('notifications').select('id').where('app_id', '=', app.app.id).execute();
    await call(h, 'POST', '/v6/notifications/preview', app.keys.read, { notification: { to: '*', payload: { alert: 'x' } } });
    const after = await h.db.db.selectFrom('notifications').select('id').where('app_id', '=', app.app.id).execute();
    expect(after.length).toBe(before.length);
  });
  it('POST /v6/live-activities/preview answers the mapped APNs request and the create’s own messages, storing nothing', async () => {
    const activity = '0d9f2b1e-5c3a-4f7e-9b2d-1a2b3c4d5e6f';
    const stale = new Date(Date.now() + 3_600_000).toISOString();
    const la = { event: 'update' as const, activity_id: activity, content_state: { eta: 5 }, alert: { body: 'Soon' }, stale_date: stale };
    const res = await call(h, 'POST', '/v6/live-activities/preview', app.keys.read, {
      live_activity: { ...la, priority: 'normal', ttl: 600 },
    });
    expect(res.statusCode, res.body).toBe(200);
    const apns = toLiveActivityRequest(liveActivityPayload(la, new Date()), { priority: 'normal' });
    const body = res.json().apns;
    expect(body).toEqual({
      headers: { ...apns.headers, 'apns-expiration': expect.any(Number) },
      body: { aps: { ...(apns.body.aps as object), timestamp: expect.any(Number) } },
      bytes: apns.bytes,
      max_bytes: 4096,
    });
    expect(body.headers['apns-expiration'] - Date.now() / 1000).toBeGreaterThan(590);
    expect(body.headers['apns-push-type']).toBe('liveactivity');

    for (const live_activity of [
      { event: 'update', activity_id: 'order-1', content_state: {} },
      { event: 'update', activity_id: activity, content_state: [1] },
      { event: 'start', to: '*', activity_type: 'T', content_state: {} },
      { event: 'end', activity_id: activity, ttl: -1 },
      { event: 'update', activity_id: activity, content_state: { big: 'x'.repeat(5000) } },
    ]) {
      const preview = await call(h, 'POST', '/v6/live-activities/preview', app.keys.read, { live_activity });
      const create = await call(h, 'POST', '/v6/live-activities', app.keys.write, { live_activity });
      expect(preview.statusCode, JSON.stringify(live_activity)).toBe(400);
      expect(preview.json()).toEqual(create.json());
    }
    expect((await call(h, 'POST', '/v6/live-activities/preview', app.keys.sdk, { live_activity: la })).statusCode).toBe(403);
    const stored = await h.db.db
      .selectFrom('notifications')
      .select('id')
      .where('app_id', '=', app.app.id)
      .where('live_activity', 'is not', null)
      .execute();
    expect(stored).toEqual([]);
  });
});
