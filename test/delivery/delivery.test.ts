import { systemClock } from '../../src/platform/clock.js';
import { AudiencesRepository } from '../../src/db/repositories/audiences.js';
import { NotificationsRepository } from '../../src/db/repositories/notifications.js';
import { serviceDeps } from '../../src/services/deps.js';
import { NotificationService } from '../../src/services/notifications.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { basic, createHarness, metricsAuth, redisUrl, TEST_METRICS_TOKEN, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';

/**
 * End to end: devices registered through the API, notifications posted through the API, delivered by the
 * real workers through the real APNs/FCM clients to the TLS HTTP/2 mock gateways — on both queue backends.
 */
// The gateways run in the worker's thread on one backend and in a gateway thread on the other, so both
// GATEWAY_THREADS modes go through the whole suite.
const backends = [
  { name: 'postgres' as const, enabled: true, gatewayThreads: '0' },
  { name: 'redis' as const, enabled: redisUrl() !== null, gatewayThreads: '1' },
];

for (const backend of backends) {
  describe.skipIf(!backend.enabled)(`delivery on the ${backend.name} queue backend, GATEWAY_THREADS=${backend.gatewayThreads}`, () => {
    let h: Harness;
    let gw: Gateways;
    let keys: { read: string; write: string; sdk: string };
    let appId: string;
    let bundleId: string;
    let devices: Record<string, RegisteredDevice>;

    beforeAll(async () => {
      gw = await startGateways();
      h = await createHarness({
        queue: backend.name,
        workers: true,
        env: {
          ...gw.env,
          GATEWAY_THREADS: backend.gatewayThreads,
          RETRY_BASE_MS: '40',
          RETRY_MAX_MS: '3000',
          SWEEP_AFTER_SECONDS: '2',
          METRICS_TOKEN: TEST_METRICS_TOKEN,
        },
      });
      const created = await h.createApp('com.example.delivery');
      keys = created.keys;
      appId = created.app.id;
      bundleId = created.app.bundle_id;
      await setCredentials(h, appId, gw);
      devices = {
        iosProd: await registerDevice(h, keys.sdk, { platform: 'ios', locale: 'en_US', tags: ['vip'] }),
        iosDev: await registerDevice(h, keys.sdk, { platform: 'ios', development: true, locale: 'en_US' }),
        android1: await registerDevice(h, keys.sdk, { platform: 'android', locale: 'fr_FR', tags: ['vip'] }),
        android2: await registerDevice(h, keys.sdk, { platform: 'android', locale: 'de_DE' }),
      };
    });
    afterAll(async () => {
      await h?.close();
      await gw?.close();
    });
    beforeEach(() => gw.reset());

    const post = async (to: unknown, payload: Record<string, unknown>) => {
      const res = await h.server.inject({
        method: 'POST',
        url: '/v6/notifications',
        headers: { authorization: basic(keys.write) },
        payload: { notification: { to, payload } },
      });
      expect(res.statusCode, res.body).toBe(201);
      return res.json() as { id: string; to: { id: string } };
    };
    const read = async (id: string, key = keys.read) =>
      (await h.server.inject({ method: 'GET', url: `/v6/notifications/${id}`, headers: { authorization: basic(key) } })).json();
    const finished = (id: string, key = keys.read) =>
      waitFor(`notification ${id} to finish`, async () => {
        const n = await read(id, key);
        return n.state === 'sent' || n.state === 'failed' ? n : null;
      });
    const tokensOf = (...ds: RegisteredDevice[]) => ds.map((d) => d.token).sort();
    const received = () => ({
      apns: gw.apns.pushes.map((p) => p.token).sort(),
      sandbox: gw.sandbox.pushes.map((p) => p.token).sort(),
      fcm: gw.fcm.pushes.map((p) => p.token).sort(),
    });

    it('sends "*" to every device once, iOS development devices through the sandbox, with mapped payloads', async () => {
      const posted = Date.now();
      const n = await post('*', {
        alert: 'Hello',
        title: 'Hi',
        badge: 3,
        sound: 'ding.caf',
        category: 'reply',
        _channel_id: 'news',
        deep: { link: 'x://y' },
        plain: 'v',
      });
      const done = await finished(n.id);
      expect(done).toMatchObject({ state: 'sent', devices_targeted: 4, pushes_succeeded: 4, pushes_failed: 0, tokens_invalidated: 0 });
      expect(received()).toEqual({
        apns: tokensOf(devices.iosProd!),
        sandbox: tokensOf(devices.iosDev!),
        fcm: tokensOf(devices.android1!, devices.android2!),
      });
      const ios = gw.apns.pushes[0]!;
      expect(ios.topic).toBe(bundleId);
      expect(ios.pushType).toBe('alert');
      expect(ios.payload).toEqual({
        aps: { alert: { title: 'Hi', body: 'Hello' }, badge: 3, sound: 'ding.caf', category: 'reply' },
        deep: { link: 'x://y' },
        plain: 'v',
        _nid: n.id,
      });
      const android = gw.fcm.pushes[0]!.message as { android: Record<string, unknown>; data: Record<string, string> };
      expect(android.android.notification).toMatchObject({ title: 'Hi', body: 'Hello', channel_id: 'news', click_action: 'reply' });
      expect(android.data).toMatchObject({
        _nid: n.id,
        deep: JSON.stringify({ link: 'x://y' }),
        plain: 'v',
        category: 'reply',
        badge: '3',
      });
      const stats = (
        await h.server.inject({
          method: 'GET',
          url: `/v6/stats/notifications/${n.id}/events`,
          headers: { authorization: basic(keys.read) },
        })
      ).json();
      expect(stats).toEqual({
        id: n.id,
        audience_id: n.to.id,
        message_id: null,
        push_text: 'Hello',
        published_time: expect.stringMatching(/Z$/),
        direct_opens: 0,
        indirect_opens: 0,
        influenced_opens: 0,
        opens: 0,
        pushes_succeeded: 4,
        pushes_rejected: 0,
        pushes_rejected_by_reason: {},
        pushes_expired: 0,
        pushes_capped: 0,
        devices_not_allowed: 0,
        event_conversions: {},
      });
      // each device that received it has a receipt (its events are attributed to it), timed after the POST
      const receipts = await h.db.db
        .selectFrom('device_pushes')
        .select(['device_id', 'received_at'])
        .where('notification_id', '=', n.id)
        .execute();
      expect(receipts.map((r) => r.device_id).sort()).toEqual(
        Object.values(devices)
          .map((d) => d.id)
          .sort(),
      );
      for (const r of receipts) expect(r.received_at.getTime()).toBeGreaterThanOrEqual(posted);
    });

    it('sends a filtered audience to exactly its devices', async () => {
      const n = await post([{ name: 'tags', criteria: ['vip'] }], { alert: 'VIP only' });
      expect(await finished(n.id)).toMatchObject({ state: 'sent', devices_targeted: 2, pushes_succeeded: 2 });
      expect(received()).toEqual({ apns: tokensOf(devices.iosProd!), sandbox: [], fcm: tokensOf(devices.android1!) });

      gw.reset();
      const byAudience = await post({ audience: n.to.id }, { alert: 'again' });
      expect(await finished(byAudience.id)).toMatchObject({ state: 'sent', devices_targeted: 2 });
      expect(received()).toEqual({ apns: tokensOf(devices.iosProd!), sandbox: [], fcm: tokensOf(devices.android1!) });

      gw.reset();
      const negated = await post([{ name: 'locale', criteria: ['en_US'], not_filter: true }], { alert: 'not en_US' });
      expect(await finished(negated.id)).toMatchObject({ devices_targeted: 2 });
      expect(received()).toEqual({ apns: [], sandbox: [], fcm: tokensOf(devices.android1!, devices.android2!) });
    });

    it('retries 503/429 answers only for the failed tokens: nothing lost, nothing doubled', async () => {
      gw.apns.faults.next(2, { type: 'status', status: 503, reason: 'ServiceUnavailable' });
      gw.fcm.faults.forToken(devices.android1!.token, { type: 'status', status: 429, reason: 'QUOTA_EXCEEDED', retryAfter: '1' }, 1);
      gw.sandbox.faults.next(1, { type: 'status', status: 500, reason: 'InternalServerError' });
      const n = await post('*', { alert: 'retry me' });
      expect(await finished(n.id)).toMatchObject({ state: 'sent', devices_targeted: 4, pushes_succeeded: 4, pushes_failed: 0 });
      expect(received()).toEqual({
        apns: tokensOf(devices.iosProd!),
        sandbox: tokensOf(devices.iosDev!),
        fcm: tokensOf(devices.android1!, devices.android2!),
      });
      // the 429 said Retry-After: 1 — the retry came no sooner
      const answers = gw.fcm.answers.filter((a) => a.token === devices.android1!.token);
      expect(answers.map((a) => a.status)).toEqual([429, 200]);
      expect(answers[1]!.at - answers[0]!.at).toBeGreaterThanOrEqual(950);
    });

    it('invalidates unregistered and bad tokens, lists them as uninstalled, and skips them afterwards', async () => {
      const extraIos = await registerDevice(h, keys.sdk, { platform: 'ios', locale: 'it_IT' });
      const extraAndroid = await registerDevice(h, keys.sdk, { platform: 'android', locale: 'it_IT' });
      gw.apns.markUnregistered(extraIos.token);
      gw.fcm.markUnregistered(extraAndroid.token);
      const n = await post([{ name: 'locale', criteria: ['it_IT', 'en_US'] }], { alert: 'x' });
      expect(await finished(n.id)).toMatchObject({
        state: 'sent',
        devices_targeted: 4,
        pushes_succeeded: 2,
        pushes_failed: 2,
        tokens_invalidated: 2,
      });
      const uninstalled = (
        await h.server.inject({ method: 'GET', url: '/v6/devices/uninstalled', headers: { authorization: basic(keys.read) } })
      ).json();
      expect(uninstalled.devices.map((d: { id: string }) => d.id).sort()).toEqual([extraIos.id, extraAndroid.id].sort());
      expect(uninstalled.devices[0]).toMatchObject({ reason: expect.any(String), uninstalled_at: expect.stringMatching(/Z$/) });

      gw.reset();
      const again = await post([{ name: 'locale', criteria: ['it_IT'] }], { alert: 'y' });
      expect(await finished(again.id)).toMatchObject({ state: 'sent', devices_targeted: 0, pushes_succeeded: 0 });
      expect(gw.apns.requestCount + gw.fcm.requestCount).toBe(0);
    });

    it('fails permanently on other 4xx answers with the reason, without retrying', async () => {
      gw.apns.faults.forToken(devices.iosProd!.token, { type: 'status', status: 400, reason: 'BadExpirationDate' });
      const n = await post([{ name: 'device_id', criteria: [devices.iosProd!.id] }], { alert: 'x' });
      expect(await finished(n.id)).toMatchObject({
        state: 'failed',
        devices_targeted: 1,
        pushes_succeeded: 0,
        pushes_failed: 1,
        failure_reason: 'BadExpirationDate',
      });
      expect(gw.apns.requestCount).toBe(1);
    });

    it('a notification whose only device has an unregistered token fails with the gateway reason', async () => {
      const gone = await registerDevice(h, keys.sdk, { platform: 'android', locale: 'pt_PT' });
      gw.fcm.markUnregistered(gone.token);
      const n = await post([{ name: 'device_id', criteria: [gone.id] }], { alert: 'x' });
      expect(await finished(n.id)).toMatchObject({
        state: 'failed',
        devices_targeted: 1,
        pushes_succeeded: 0,
        pushes_failed: 1,
        tokens_invalidated: 1,
        failure_reason: 'UNREGISTERED',
      });
    });

    it('a collapse_key update is the same notification, sent again with the same _nid', async () => {
      const first = await post([{ name: 'device_id', criteria: [devices.iosProd!.id, devices.android2!.id] }], {
        alert: 'score 1-0',
        collapse_key: 'match-42',
      });
      await finished(first.id);
      const second = await post([{ name: 'device_id', criteria: [devices.iosProd!.id, devices.android2!.id] }], {
        alert: 'score 2-0',
        collapse_key: 'match-42',
      });
      expect(second.id).toBe(first.id);
      const done = await waitFor('second send', async () => {
        const n = await read(first.id);
        return n.state === 'sent' && n.pushes_succeeded === 4 ? n : null;
      });
      expect(done.notification.payload.alert).toBe('score 2-0');
      expect(done.devices_targeted).toBe(4);
      expect(gw.apns.pushes.map((p) => [p.collapseId, p.payload._nid, (p.payload.aps as { alert: string }).alert])).toEqual([
        ['match-42', first.id, 'score 1-0'],
        ['match-42', first.id, 'score 2-0'],
      ]);
      const fcm = gw.fcm.pushes.map(
        (p) => p.message as { android: { collapse_key: string; notification: { tag: string; body: string } }; data: { _nid: string } },
      );
      expect(fcm.map((m) => [m.android.collapse_key, m.android.notification.tag, m.data._nid, m.android.notification.body])).toEqual([
        ['match-42', 'match-42', first.id, 'score 1-0'],
        ['match-42', 'match-42', first.id, 'score 2-0'],
      ]);
    });

    it('a platform without credentials fails with no_credentials, counted and not retried', async () => {
      const other = await h.createApp();
      await setCredentials(h, other.app.id, gw, { apns: true });
      const ios = await registerDevice(h, other.keys.sdk, { platform: 'ios' });
      await registerDevice(h, other.keys.sdk, { platform: 'android' });
      const res = await h.server.inject({
        method: 'POST',
        url: '/v6/notifications',
        headers: { authorization: basic(other.keys.write) },
        payload: { notification: { to: '*', payload: { alert: 'x' } } },
      });
      const n = await finished(res.json().id, other.keys.read);
      expect(n).toMatchObject({
        state: 'sent',
        devices_targeted: 2,
        pushes_succeeded: 1,
        pushes_failed: 1,
        failure_reason: 'no_credentials',
      });
      expect(gw.apns.pushes.map((p) => p.token)).toEqual([ios.token]);
      expect(gw.fcm.requestCount).toBe(0);
    });

    it('the sweeper sends a notification whose enqueue was lost', async () => {
      // Stored exactly as the API stores it, but never enqueued (as if the queue was down after commit).
      const audience = await new AudiencesRepository().upsertAllDevices(h.db.db, appId);
      const lost = await new NotificationsRepository().insertOrCollapse(h.db.db, {
        appId,
        audienceId: audience.id,
        request: { to: '*', payload: { alert: 'lost' } },
        payload: { alert: 'lost' },
        collapseKey: null,
      });
      await h.db.db
        .updateTable('notifications')
        .set({ updated_at: new Date(Date.now() - 60_000) })
        .where('id', '=', lost.id)
        .execute();
      // the sweeper (every second with SWEEP_AFTER_SECONDS=2) finds it and enqueues it again
      expect(await finished(lost.id)).toMatchObject({ state: 'sent', pushes_succeeded: 4 });
    });

    it('cuts an audience of named devices when the notification is created: delivered with no fan-out job', async () => {
      const { iosProd, android1 } = devices;
      const res = await h.server.inject({
        method: 'POST',
        url: '/v6/notifications',
        headers: { authorization: basic(keys.write) },
        payload: { notification: { to: [{ name: 'device_id', criteria: [iosProd!.id, android1!.id] }], payload: { alert: 'direct' } } },
      });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().state).toBe('scheduled');
      // Already fanned out in the request's own transaction, before any job ran.
      const stored = await h.db.db.selectFrom('notifications').selectAll().where('id', '=', res.json().id).executeTakeFirstOrThrow();
      expect(stored).toMatchObject({ fanout_done: true, devices_targeted: 2, fanout_seq: 2 });
      expect(await finished(res.json().id)).toMatchObject({ state: 'sent', devices_targeted: 2, pushes_succeeded: 2 });
      expect(received()).toEqual({ apns: [iosProd!.token], sandbox: [], fcm: [android1!.token] });
    });

    it('a notification to a user with no devices is sent at once, to nobody', async () => {
      const created = await post([{ name: 'user_id', criteria: ['nobody-has-this-user-id'] }], { alert: 'no one' });
      expect(await read(created.id)).toMatchObject({ state: 'sent', devices_targeted: 0, pushes_succeeded: 0 });
      expect(gw.apns.requestCount + gw.sandbox.requestCount + gw.fcm.requestCount).toBe(0);
    });

    it('the sweeper sends a notification cut when created whose delivery enqueue was lost', async () => {
      // The API's own service, with a scheduler that loses every enqueue.
      const lost = { schedule: async () => undefined, deliver: async () => undefined, decideWinner: async () => undefined };
      const service = new NotificationService({
        ...serviceDeps(h.db.db, systemClock),
        scheduler: lost,
        batchSize: 2000,
        onScheduleError: () => undefined,
      });
      const n = await service.create(appId, {
        notification: { to: [{ name: 'device_id', criteria: [devices.android2!.id] }], payload: { alert: 'lost batch' } },
      });
      expect(n.state).toBe('scheduled');
      await h.db.db
        .updateTable('notifications')
        // created a while ago too: its process would have sent it by now
        .set({ created_at: new Date(Date.now() - 60_000), updated_at: new Date(Date.now() - 60_000) })
        .where('id', '=', n.id)
        .execute();
      expect(await finished(n.id)).toMatchObject({ state: 'sent', pushes_succeeded: 1 });
      expect(received().fcm).toEqual([devices.android2!.token]);
    });

    it('exposes Prometheus metrics for pushes, gateway latency and queue depth', async () => {
      const res = await h.server.inject({ method: 'GET', url: '/metrics', headers: metricsAuth });
      expect(res.statusCode).toBe(200);
      expect(res.body).toMatch(/pushd_pushes_total\{platform="ios",outcome="ok"\} \d+/);
      expect(res.body).toMatch(/pushd_gateway_send_seconds_bucket\{le="0.005",platform="(ios|android)"\}/);
      expect(res.body).toContain('pushd_queue_jobs');
    });
  });
}
