import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { basic, createHarness, redisUrl, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { get } from '../http/support.js';

/**
 * Expiry and priority end to end: notifications posted through the API with `ttl`/`expires_at` and `priority`,
 * delivered by the real workers to the TLS HTTP/2 mocks. A push still unsent when its notification expires is
 * not sent, is counted in pushes_expired, and its batch stops retrying; the notification still finishes.
 */
const backends = [
  { name: 'postgres' as const, enabled: true, gatewayThreads: '0' },
  { name: 'redis' as const, enabled: redisUrl() !== null, gatewayThreads: '1' },
];

for (const backend of backends) {
  describe.skipIf(!backend.enabled)(`expiry and priority on the ${backend.name} queue backend`, () => {
    let h: Harness;
    let gw: Gateways;
    let keys: { read: string; write: string; sdk: string };
    let ios: RegisteredDevice;
    let android: RegisteredDevice;

    beforeAll(async () => {
      gw = await startGateways();
      h = await createHarness({
        queue: backend.name,
        workers: true,
        // Retry-After up to 30 s is honoured and 50 attempts never run out within these tests: only the expiry stops them.
        env: {
          ...gw.env,
          GATEWAY_THREADS: backend.gatewayThreads,
          RETRY_BASE_MS: '100',
          RETRY_MAX_MS: '30000',
          DELIVERY_MAX_ATTEMPTS: '50',
        },
      });
      const created = await h.createApp('com.example.expiry');
      keys = created.keys;
      await setCredentials(h, created.app.id, gw);
      ios = await registerDevice(h, keys.sdk, { platform: 'ios' });
      android = await registerDevice(h, keys.sdk, { platform: 'android' });
    });
    afterAll(async () => {
      await h?.close();
      await gw?.close();
    });
    beforeEach(() => gw.reset());

    const post = async (notification: Record<string, unknown>) => {
      const res = await h.server.inject({
        method: 'POST',
        url: '/v6/notifications',
        headers: { authorization: basic(keys.write) },
        payload: { notification: { to: [{ name: 'device_id', criteria: [ios.id, android.id] }], ...notification } },
      });
      expect(res.statusCode, res.body).toBe(201);
      return res.json() as { id: string; created_at: string; notification: Record<string, unknown> };
    };
    const read = async (id: string) => (await get(h, keys.read, `/v6/notifications/${id}`)).json();
    const finished = (id: string) =>
      waitFor(`notification ${id} to finish`, async () => {
        const n = await read(id);
        return n.state === 'sent' || n.state === 'failed' ? n : null;
      });
    const answersTo = (token: string) => [...gw.apns.answers, ...gw.fcm.answers].filter((a) => a.token === token);

    it('carries the expiry and the priority to both gateways, and shows them on the notification', async () => {
      const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
      const created = await post({ payload: { alert: 'Flash sale' }, expires_at: expiresAt, priority: 'normal' });
      expect(created.notification).toEqual({
        to: [{ name: 'device_id', criteria: [ios.id, android.id] }],
        payload: { alert: 'Flash sale' },
        expires_at: expiresAt,
        priority: 'normal',
      });
      const done = await finished(created.id);
      expect(done).toMatchObject({ state: 'sent', pushes_succeeded: 2, pushes_expired: 0, expires_at: expiresAt, priority: 'normal' });

      const unix = Math.floor(Date.parse(expiresAt) / 1000);
      expect(gw.apns.pushes).toHaveLength(1);
      expect(gw.apns.pushes[0]).toMatchObject({ token: ios.token, pushType: 'alert', priority: 5, expiration: unix });
      const message = gw.fcm.pushes[0]!.message as { android: { priority: string; ttl: string } };
      expect(message.android.priority).toBe('NORMAL');
      const ttl = parseInt(message.android.ttl, 10);
      expect(message.android.ttl).toBe(`${ttl}s`);
      expect(ttl).toBeLessThanOrEqual(3600);
      expect(ttl).toBeGreaterThan(3500);
    });

    it('without options: no expiry header or ttl, today’s priorities, null fields', async () => {
      const created = await post({ payload: { alert: 'Plain' } });
      expect(created.notification).toEqual({ to: expect.any(Array), payload: { alert: 'Plain' } });
      expect(await finished(created.id)).toMatchObject({ state: 'sent', expires_at: null, priority: null, pushes_expired: 0 });
      expect(gw.apns.pushes[0]).toMatchObject({ priority: 10, expiration: undefined });
      expect((gw.fcm.pushes[0]!.message as { android: Record<string, unknown> }).android).toEqual({
        priority: 'HIGH',
        notification: { body: 'Plain' },
      });
    });

    it('a ttl counts from created_at: the expiry is created_at + ttl', async () => {
      const created = await post({ payload: { alert: 'ttl' }, ttl: 600, priority: 'high' });
      const done = await finished(created.id);
      expect(Date.parse(done.expires_at) - Date.parse(created.created_at)).toBe(600_000);
      expect(gw.apns.pushes[0]).toMatchObject({ priority: 10, expiration: Math.floor(Date.parse(done.expires_at) / 1000) });
      expect((gw.fcm.pushes[0]!.message as { android: { priority: string } }).android.priority).toBe('HIGH');
    });

    it('gateways that keep asking to retry: the pushes expire, are counted, and nothing is sent after the expiry', async () => {
      // APNs answers 503 and FCM 429 with a Retry-After far beyond the expiry; both until cleared.
      gw.apns.faults.forToken(ios.token, { type: 'status', status: 503, reason: 'ServiceUnavailable' });
      gw.fcm.faults.forToken(android.token, { type: 'status', status: 429, reason: 'QUOTA_EXCEEDED', retryAfter: '25' });
      const started = Date.now();
      const created = await post({ payload: { alert: 'Only for 2 seconds' }, ttl: 2 });
      const done = await finished(created.id);
      const expiresAt = Date.parse(done.expires_at);
      expect(done).toMatchObject({
        state: 'failed',
        failure_reason: 'expired',
        devices_targeted: 2,
        pushes_succeeded: 0,
        pushes_failed: 0,
        pushes_expired: 2,
      });
      // The 429's Retry-After (25 s) would have come back long after the expiry: the retry came at the expiry instead.
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(Date.now()).toBeGreaterThanOrEqual(expiresAt);
      expect(answersTo(ios.token).length).toBeGreaterThan(1); // APNs was retried until the expiry
      expect(answersTo(android.token).map((a) => a.status)).toEqual([429]);
      // every attempt began before the expiry (an answer may land a moment after it)
      for (const a of [...answersTo(ios.token), ...answersTo(android.token)]) expect(a.at).toBeLessThan(expiresAt + 200);

      // The gateways recover: nothing is sent any more, the batches are done.
      gw.apns.faults.clear();
      gw.fcm.faults.clear();
      const answered = gw.apns.requestCount + gw.fcm.requestCount;
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(gw.apns.requestCount + gw.fcm.requestCount).toBe(answered);
      expect(gw.apns.pushes.length + gw.fcm.pushes.length).toBe(0);
      const batches = await h.db.db.selectFrom('delivery_batches').selectAll().where('notification_id', '=', created.id).execute();
      expect(batches.map((b) => [b.state, b.expired, b.pending_device_ids])).toEqual([
        ['done', 1, []],
        ['done', 1, []],
      ]);

      const stats = (await get(h, keys.read, `/v6/stats/notifications/${created.id}/events`)).json();
      expect(stats).toMatchObject({ pushes_succeeded: 0, pushes_rejected: 0, pushes_expired: 2 });
    });

    it('one device delivered, the other expired: the notification is sent, with both counted', async () => {
      gw.fcm.faults.forToken(android.token, { type: 'status', status: 503, reason: 'UNAVAILABLE' });
      // 4 s: the iOS push must reach its gateway before the expiry on a loaded machine too
      const created = await post({ payload: { alert: 'Half' }, expires_at: new Date(Date.now() + 4000).toISOString() });
      expect(await finished(created.id)).toMatchObject({
        state: 'sent',
        pushes_succeeded: 1,
        pushes_failed: 0,
        pushes_expired: 1,
        failure_reason: 'expired',
      });
      expect(gw.apns.pushes.map((p) => p.token)).toEqual([ios.token]);
      expect(gw.fcm.pushes).toHaveLength(0);
    });
  });
}
