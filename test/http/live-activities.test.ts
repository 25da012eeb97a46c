import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import type { AppWithKeys } from './support.js';

/**
 * iOS Live Activities through the HTTP API and the mock APNs: the token registry (sdk key), a start by push-to-start
 * tokens, updates and an end reaching exactly the activity's tokens with Apple's headers and payload, a 410 that
 * forgets one activity token and not the device, a channel broadcast as one request, and hostile input.
 */

const BUNDLE = 'com.example.live';
const TOPIC = `${BUNDLE}.push-type.liveactivity`;
/** ActivityKit's tokens are longer than a device token. */
const activityToken = () => randomBytes(80).toString('hex');
const seconds = (iso: string) => Math.floor(Date.parse(iso) / 1000);

describe('Live Activities', () => {
  let h: Harness;
  let gw: Gateways;
  let app: AppWithKeys;
  let other: AppWithKeys;
  let a: RegisteredDevice;
  let b: RegisteredDevice;
  let c: RegisteredDevice;
  let android: RegisteredDevice;

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({
      workers: true,
      env: {
        ...gw.env,
        APNS_CHANNELS_ORIGIN_PRODUCTION: gw.apns.origin,
        APNS_BROADCAST_ORIGIN_PRODUCTION: gw.apns.origin,
        RETRY_BASE_MS: '20',
      },
    });
    app = await h.createApp(BUNDLE);
    other = await h.createApp('com.example.other');
    await setCredentials(h, app.app.id, gw);
    a = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
    b = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
    c = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
    android = await registerDevice(h, app.keys.sdk, { platform: 'android' });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });
  beforeEach(() => gw.reset());

  const call = (
    method: 'GET' | 'PUT' | 'POST' | 'DELETE',
    url: string,
    key: string,
    payload?: unknown,
    headers: Record<string, string> = {},
  ) =>
    h.server.inject({
      method,
      url,
      headers: { authorization: basic(key), ...headers },
      ...(payload !== undefined && { payload: payload as object }),
    });
  const putToken = (device: string, activity: string, body: unknown, key = app.keys.sdk) =>
    call('PUT', `/v6/devices/${device}/live-activities/${activity}`, key, body);
  const putStart = (device: string, type: string, token: string, key = app.keys.sdk) =>
    call('PUT', `/v6/devices/${device}/live-activity-start-tokens/${type}`, key, { token });
  const send = (liveActivity: Record<string, unknown>, headers: Record<string, string> = {}) =>
    call('POST', '/v6/live-activities', app.keys.write, { live_activity: liveActivity }, headers);
  const deviceRecord = async (id: string) => (await call('GET', `/v6/devices/${id}`, app.keys.read)).json().device;
  /** Waits for the push to finish; its record. */
  const finished = (id: string) =>
    waitFor(`live activity ${id} finished`, async () => {
      const r = (await call('GET', `/v6/live-activities/${id}`, app.keys.read)).json().live_activity;
      return ['sent', 'failed', 'canceled'].includes(r.state) ? r : undefined;
    });

  describe('the registry', () => {
    it('registers, shows, replaces and forgets an activity token with the sdk key', async () => {
      const activity = randomUUID();
      const first = activityToken();
      expect((await putToken(a.id, activity, { activity_type: 'DeliveryAttributes', token: first })).statusCode).toBe(204);
      const second = activityToken();
      expect((await putToken(a.id, activity, { activity_type: 'DeliveryAttributes', token: second })).statusCode).toBe(204);
      const record = await deviceRecord(a.id);
      expect(record.live_activities).toEqual([
        { activity_id: activity, activity_type: 'DeliveryAttributes', token: second, updated_at: expect.any(String) },
      ]);
      expect(record.push_token).toBe(a.token);

      expect((await call('DELETE', `/v6/devices/${a.id}/live-activities/${activity}`, app.keys.sdk)).statusCode).toBe(204);
      expect((await deviceRecord(a.id)).live_activities).toEqual([]);
      expect((await call('DELETE', `/v6/devices/${a.id}/live-activities/${activity}`, app.keys.sdk)).statusCode).toBe(404);
    });

    it('registers a push-to-start token per activity type, shown in the device record', async () => {
      const token = activityToken();
      expect((await putStart(b.id, 'ScoreAttributes', token)).statusCode).toBe(204);
      expect((await deviceRecord(b.id)).live_activity_start_tokens).toContainEqual({
        activity_type: 'ScoreAttributes',
        token,
        updated_at: expect.any(String),
      });
      expect((await call('DELETE', `/v6/devices/${b.id}/live-activity-start-tokens/ScoreAttributes`, app.keys.sdk)).statusCode).toBe(204);
    });

    it("takes the device's credential in place of its user's proof; a wrong one is refused", async () => {
      const verified = await h.createApp('com.example.live.credential', { identityVerification: true });
      const proof = createHmac('sha256', verified.identity_secret).update('u-cred').digest('hex');
      const token = randomBytes(32).toString('hex');
      const created = await call('POST', '/v6/devices', verified.keys.sdk, {
        device: { platform: 'ios', token, user_id: 'u-cred', user_id_auth_hash: proof },
      });
      expect(created.statusCode, created.body).toBe(201);
      const { id, credential } = created.json().device as { id: string; credential: string };
      const startUrl = `/v6/devices/${id}/live-activity-start-tokens/Delivery`;
      const tokenUrl = `/v6/devices/${id}/live-activities/${randomUUID()}`;

      expect((await call('PUT', startUrl, verified.keys.sdk, { token: activityToken() })).statusCode).toBe(403);
      const wrong = await call('PUT', startUrl, verified.keys.sdk, { token: activityToken(), credential: 'A'.repeat(32) });
      expect([wrong.statusCode, wrong.json().error]).toEqual([403, expect.stringMatching(/^credential: does not match/)]);
      expect((await call('PUT', startUrl, verified.keys.sdk, { token: activityToken(), credential })).statusCode).toBe(204);
      const put = await call('PUT', tokenUrl, verified.keys.sdk, { activity_type: 'Delivery', token: activityToken(), credential });
      expect(put.statusCode, put.body).toBe(204);
      expect((await call('GET', `/v6/devices/${id}`, verified.keys.read)).json().device.live_activities).toHaveLength(1);

      expect((await call('DELETE', `${tokenUrl}?credential=${'A'.repeat(32)}`, verified.keys.sdk)).statusCode).toBe(403);
      expect((await call('DELETE', `${tokenUrl}?credential=${credential}`, verified.keys.sdk)).statusCode).toBe(204);
      expect((await call('DELETE', `${startUrl}?credential=${credential}`, verified.keys.sdk)).statusCode).toBe(204);
      // another device's credential proves nothing for this one
      const other = await call('POST', '/v6/devices', verified.keys.sdk, {
        device: { platform: 'ios', token: randomBytes(32).toString('hex') },
      });
      const theirs = (other.json().device as { credential: string }).credential;
      expect((await call('PUT', startUrl, verified.keys.sdk, { token: activityToken(), credential: theirs })).statusCode).toBe(403);
    });

    it("needs the device's credential once its client holds it, identities verified or not", async () => {
      const app = await h.createApp('com.example.live.held');
      const created = await call('POST', '/v6/devices', app.keys.sdk, {
        device: { platform: 'ios', token: randomBytes(32).toString('hex') },
      });
      const { id, credential } = created.json().device as { id: string; credential: string };
      const startUrl = `/v6/devices/${id}/live-activity-start-tokens/Delivery`;
      // an old SDK that never sends the credential back keeps the device open
      expect((await call('PUT', startUrl, app.keys.sdk, { token: activityToken() })).statusCode).toBe(204);
      // the client sends it back once: from then on the device is held
      const held = await call('PUT', `/v6/devices/${id}`, app.keys.sdk, { device: { credential, locale: 'fr_FR' } });
      expect(held.statusCode, held.body).toBe(200);
      const refused = await call('PUT', startUrl, app.keys.sdk, { token: activityToken() });
      expect([refused.statusCode, refused.json().error]).toEqual([403, expect.stringMatching(/^credential: is required/)]);
      expect((await call('DELETE', startUrl, app.keys.sdk)).statusCode).toBe(403);
      expect((await call('PUT', startUrl, app.keys.sdk, { token: activityToken(), credential })).statusCode).toBe(204);
      expect((await call('DELETE', startUrl, app.keys.write)).statusCode).toBe(204);
    });

    it("takes a user's proof, while the app verifies identities, to change the activities of that user's device", async () => {
      const verified = await h.createApp('com.example.live.verified', { identityVerification: true });
      const proof = createHmac('sha256', verified.identity_secret).update('u-live').digest('hex');
      // bound by the customer's backend (the write key binds freely)
      const bound = await registerDevice(h, verified.keys.write, { platform: 'ios', user_id: 'u-live' });
      const startUrl = `/v6/devices/${bound.id}/live-activity-start-tokens/Delivery`;
      const refused = await call('PUT', startUrl, verified.keys.sdk, { token: activityToken() });
      expect(refused.statusCode, refused.body).toBe(403);
      expect(refused.json().error).toMatch(/^user_id_auth_hash: is required/);
      const wrong = await call('PUT', startUrl, verified.keys.sdk, { token: activityToken(), user_id_auth_hash: 'ab'.repeat(32) });
      expect(wrong.json().error).toMatch(/^user_id_auth_hash: does not match/);
      const activity = randomUUID();
      const tokenUrl = `/v6/devices/${bound.id}/live-activities/${activity}`;
      expect((await call('PUT', tokenUrl, verified.keys.sdk, { activity_type: 'Delivery', token: activityToken() })).statusCode).toBe(403);
      expect((await call('GET', `/v6/devices/${bound.id}`, verified.keys.read)).json().device.live_activities).toEqual([]);

      expect((await call('PUT', startUrl, verified.keys.sdk, { token: activityToken(), user_id_auth_hash: proof })).statusCode).toBe(204);
      const put = await call('PUT', tokenUrl, verified.keys.sdk, {
        activity_type: 'Delivery',
        token: activityToken(),
        user_id_auth_hash: proof,
      });
      expect(put.statusCode, put.body).toBe(204);
      // a delete has no body: the proof comes in the query
      expect((await call('DELETE', tokenUrl, verified.keys.sdk)).statusCode).toBe(403);
      expect((await call('DELETE', `${tokenUrl}?user_id_auth_hash=${proof}`, verified.keys.sdk)).statusCode).toBe(204);
      expect((await call('DELETE', startUrl, verified.keys.sdk)).statusCode).toBe(403);
      expect((await call('DELETE', startUrl, verified.keys.write)).statusCode).toBe(204);
      // a device bound to nobody needs no proof
      const free = await registerDevice(h, verified.keys.sdk, { platform: 'ios' });
      expect(
        (await call('PUT', `/v6/devices/${free.id}/live-activity-start-tokens/Delivery`, verified.keys.sdk, { token: activityToken() }))
          .statusCode,
      ).toBe(204);
    });

    it("fences what an sdk key reaches: only the app's own live iOS devices, only ActivityKit ids", async () => {
      const body = { activity_type: 'DeliveryAttributes', token: activityToken() };
      // another app's key does not see this app's device
      expect((await putToken(a.id, randomUUID(), body, other.keys.sdk)).statusCode).toBe(404);
      expect((await putToken(randomUUID(), randomUUID(), body)).statusCode).toBe(404);
      expect((await putToken('not-a-uuid', randomUUID(), body)).statusCode).toBe(404);
      const androidAnswer = await putToken(android.id, randomUUID(), body);
      expect(androidAnswer.statusCode).toBe(422);
      expect(androidAnswer.json().error).toMatch(/^device: Live Activities are iOS only/);
      // a guessable activity id would let any install subscribe to someone else's activity
      const guessable = await putToken(a.id, 'order-123', body);
      expect(guessable.statusCode).toBe(400);
      expect(guessable.json().error).toMatch(/^activity_id: /);
      // a read key may not register
      expect((await putToken(a.id, randomUUID(), body, app.keys.read)).statusCode).toBe(403);
    });

    it('caps the activities one device holds', async () => {
      const device = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
      for (let i = 0; i < 50; i++)
        expect((await putToken(device.id, randomUUID(), { activity_type: 'T', token: activityToken() })).statusCode).toBe(204);
      const over = await putToken(device.id, randomUUID(), { activity_type: 'T', token: activityToken() });
      expect(over.statusCode).toBe(422);
      expect(over.json().error).toMatch(/^activity_id: the device holds 50 activities already/);
    });

    it.each([
      ['token not hex', { activity_type: 'T', token: 'zz'.repeat(40) }, /^token: /],
      ['token too short', { activity_type: 'T', token: 'ab' }, /^token: /],
      ['token a number', { activity_type: 'T', token: 12 }, /^token: /],
      ['activity_type with a space', { activity_type: 'My Type', token: 'ab'.repeat(40) }, /^activity_type: /],
      ['activity_type missing', { token: 'ab'.repeat(40) }, /^activity_type: /],
      ['an unknown key', { activity_type: 'T', token: 'ab'.repeat(40), device: 'x' }, /Unrecognized key/],
    ])('refuses %s with a 400 naming the field', async (_what, body, error) => {
      const res = await putToken(a.id, randomUUID(), body);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatch(error);
    });
  });

  describe('sending', () => {
    it('starts an activity on exactly the devices with a push-to-start token of its type', async () => {
      const startA = activityToken();
      const startB = activityToken();
      await putStart(a.id, 'DeliveryAttributes', startA);
      await putStart(b.id, 'DeliveryAttributes', startB);
      await putStart(c.id, 'OtherAttributes', activityToken());
      const res = await send({
        event: 'start',
        activity_type: 'DeliveryAttributes',
        to: '*',
        attributes: { orderId: 'A-1' },
        content_state: { eta: 12 },
        alert: { title: 'On its way', body: 'Your order left', sound: 'default' },
      });
      expect(res.statusCode).toBe(201);
      const record = await finished(res.json().live_activity.id);
      expect(record).toMatchObject({ state: 'sent', event: 'start', devices_targeted: 2, pushes_succeeded: 2, pushes_failed: 0 });
      expect(gw.apns.pushes.map((p) => p.token).sort()).toEqual([startA, startB].sort());
      for (const p of gw.apns.pushes) {
        expect(p.topic).toBe(TOPIC);
        expect(p.pushType).toBe('liveactivity');
        expect(p.priority).toBe(10);
        expect(p.payload).toEqual({
          aps: {
            timestamp: expect.any(Number),
            event: 'start',
            'content-state': { eta: 12 },
            'attributes-type': 'DeliveryAttributes',
            attributes: { orderId: 'A-1' },
            alert: { title: 'On its way', body: 'Your order left', sound: 'default' },
          },
        });
      }
      expect(gw.apns.pushes.every((p) => p.token !== a.token && p.token !== b.token)).toBe(true);
    });

    it('updates and ends an activity on exactly its tokens, later pushes with later timestamps', async () => {
      const activity = randomUUID();
      const onA = activityToken();
      const onC = activityToken();
      await putToken(a.id, activity, { activity_type: 'DeliveryAttributes', token: onA });
      await putToken(c.id, activity, { activity_type: 'DeliveryAttributes', token: onC });
      await putToken(b.id, randomUUID(), { activity_type: 'DeliveryAttributes', token: activityToken() });

      const stale = new Date(Date.now() + 600_000).toISOString();
      const update = await send({
        event: 'update',
        activity_id: activity,
        content_state: { eta: 5 },
        stale_date: stale,
        relevance_score: 75,
        priority: 'normal',
        ttl: 600,
      });
      expect(update.statusCode).toBe(201);
      expect(await finished(update.json().live_activity.id)).toMatchObject({ state: 'sent', devices_targeted: 2, pushes_succeeded: 2 });
      expect(gw.apns.pushes.map((p) => p.token).sort()).toEqual([onA, onC].sort());
      const [first] = gw.apns.pushes;
      expect(first!.priority).toBe(5);
      expect(first!.topic).toBe(TOPIC);
      expect(first!.expiration).toBeGreaterThan(Date.now() / 1000);
      expect(first!.payload).toEqual({
        aps: {
          timestamp: expect.any(Number),
          event: 'update',
          'content-state': { eta: 5 },
          'stale-date': seconds(stale),
          'relevance-score': 75,
        },
      });

      await new Promise((r) => setTimeout(r, 1100)); // a second later: its timestamp must be later
      gw.reset();
      const dismiss = new Date(Date.now() + 3_600_000).toISOString();
      const end = await send({ event: 'end', activity_id: activity, content_state: { eta: 0 }, dismissal_date: dismiss });
      expect(await finished(end.json().live_activity.id)).toMatchObject({ state: 'sent', pushes_succeeded: 2 });
      expect(gw.apns.pushes.map((p) => p.token).sort()).toEqual([onA, onC].sort());
      const aps = gw.apns.pushes[0]!.payload.aps as Record<string, unknown>;
      expect(aps).toMatchObject({ event: 'end', 'dismissal-date': seconds(dismiss), 'content-state': { eta: 0 } });
      expect(aps.timestamp as number).toBeGreaterThan((first!.payload.aps as { timestamp: number }).timestamp);
    });

    it('forgets only the activity token APNs answers 410 for, not the device nor the others', async () => {
      const activity = randomUUID();
      const dead = activityToken();
      const alive = activityToken();
      await putToken(a.id, activity, { activity_type: 'DeliveryAttributes', token: dead });
      await putToken(c.id, activity, { activity_type: 'DeliveryAttributes', token: alive });
      gw.apns.markUnregistered(dead);
      const res = await send({ event: 'update', activity_id: activity, content_state: { eta: 1 } });
      const record = await finished(res.json().live_activity.id);
      expect(record).toMatchObject({ state: 'sent', pushes_succeeded: 1, tokens_invalidated: 1 });
      const recordA = await deviceRecord(a.id);
      expect(recordA.live_activities.map((x: { activity_id: string }) => x.activity_id)).not.toContain(activity);
      expect(recordA.push_token).toBe(a.token);
      expect(
        (await h.db.db.selectFrom('devices').select('token_invalidated_at').where('id', '=', a.id).executeTakeFirstOrThrow())
          .token_invalidated_at,
      ).toBeNull();
      expect((await deviceRecord(c.id)).live_activities.map((x: { token: string }) => x.token)).toContain(alive);

      // the next update goes to the token left only
      gw.reset();
      const again = await send({ event: 'update', activity_id: activity, content_state: { eta: 0 } });
      expect(await finished(again.json().live_activity.id)).toMatchObject({ devices_targeted: 1, pushes_succeeded: 1 });
      expect(gw.apns.pushes.map((p) => p.token)).toEqual([alive]);
    });

    it('answers a repeated Idempotency-Key with the first answer, sending once', async () => {
      const activity = randomUUID();
      await putToken(b.id, activity, { activity_type: 'DeliveryAttributes', token: activityToken() });
      const body = { event: 'update', activity_id: activity, content_state: { eta: 3 } };
      const key = { 'idempotency-key': randomUUID() };
      const first = await send(body, key);
      const second = await send(body, key);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(second.json().live_activity.id).toBe(first.json().live_activity.id);
      await finished(first.json().live_activity.id);
      expect(gw.apns.pushes).toHaveLength(1);
    });

    it('cancels a scheduled push, which then sends nothing', async () => {
      const activity = randomUUID();
      await putToken(b.id, activity, { activity_type: 'DeliveryAttributes', token: activityToken() });
      const res = await send({
        event: 'update',
        activity_id: activity,
        content_state: { eta: 3 },
        send_at: new Date(Date.now() + 3_600_000).toISOString(),
      });
      const id = res.json().live_activity.id;
      const canceled = await call('DELETE', `/v6/live-activities/${id}`, app.keys.write);
      expect(canceled.json().live_activity.state).toBe('canceled');
      expect(gw.apns.pushes).toHaveLength(0);
      // not a notification: not listed, not read, not canceled as one
      const list = await call('GET', '/v6/notifications', app.keys.read);
      expect(JSON.stringify(list.json())).not.toContain(id);
      expect((await call('GET', `/v6/notifications/${id}`, app.keys.read)).statusCode).toBe(404);
      expect((await call('DELETE', `/v6/notifications/${id}`, app.keys.write)).statusCode).toBe(404);
      const again = await call('DELETE', `/v6/live-activities/${id}`, app.keys.write);
      expect(again.statusCode).toBe(409);
      expect(again.json().error).toBe('live activity: it is canceled and can no longer be canceled');
    });

    const laterIso = () => new Date(Date.now() + 3_600_000).toISOString();
    it.each([
      ['no event', { activity_id: randomUUID(), content_state: {} }, /^live_activity\.event: /],
      ['an unknown event', { event: 'pause', activity_id: randomUUID() }, /^live_activity\.event: /],
      ['a start without to', { event: 'start', activity_type: 'T', attributes: {}, content_state: {} }, /^live_activity\.to: /],
      ['a start without attributes', { event: 'start', activity_type: 'T', to: '*', content_state: {} }, /^live_activity\.attributes: /],
      [
        'a start with a channel',
        { event: 'start', activity_type: 'T', to: '*', attributes: {}, content_state: {}, channel: 'x' },
        /^live_activity\.channel: /,
      ],
      ['an update without activity_id', { event: 'update', content_state: {} }, /^live_activity\.activity_id: /],
      ['an update with to', { event: 'update', activity_id: randomUUID(), to: '*', content_state: {} }, /^live_activity\.to: /],
      ['an update without content_state', { event: 'update', activity_id: randomUUID() }, /^live_activity\.content_state: /],
      ['content_state an array', { event: 'update', activity_id: randomUUID(), content_state: [1] }, /^live_activity\.content_state: /],
      [
        'a dismissal_date on an update',
        { event: 'update', activity_id: randomUUID(), content_state: {}, dismissal_date: laterIso() },
        /^live_activity\.dismissal_date: /,
      ],
      [
        'stale_date not an instant',
        { event: 'update', activity_id: randomUUID(), content_state: {}, stale_date: 'soon' },
        /^live_activity\.stale_date: /,
      ],
      [
        'relevance_score negative',
        { event: 'update', activity_id: randomUUID(), content_state: {}, relevance_score: -1 },
        /^live_activity\.relevance_score: /,
      ],
      ['priority unknown', { event: 'update', activity_id: randomUUID(), content_state: {}, priority: 10 }, /^live_activity\.priority: /],
      [
        'send_at in the past',
        { event: 'update', activity_id: randomUUID(), content_state: {}, send_at: '2020-01-01T00:00:00Z' },
        /^live_activity\.send_at: /,
      ],
      [
        'an activity_type with code',
        { event: 'start', activity_type: 'a;drop', to: '*', attributes: {}, content_state: {} },
        /^live_activity\.activity_type: /,
      ],
      [
        'a payload over 4096 bytes',
        { event: 'update', activity_id: randomUUID(), content_state: { text: 'x'.repeat(5000) } },
        /^live_activity: the APNs payload/,
      ],
    ])('refuses %s with a 4xx naming the field, storing nothing', async (_what, body, error) => {
      const before = await h.db.db.selectFrom('notifications').select(h.db.db.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
      const res = await send(body);
      expect(res.statusCode).toBeGreaterThanOrEqual(400);
      expect(res.statusCode).toBeLessThan(500);
      expect(res.json().error).toMatch(error);
      const after = await h.db.db.selectFrom('notifications').select(h.db.db.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
      expect(after.n).toBe(before.n);
    });
  });

  describe('broadcast channels', () => {
    it('creates a channel at APNs, broadcasts on it with one request, lists and deletes it', async () => {
      const created = await call('POST', '/v6/live-activities/channels', app.keys.write, { message_storage_policy: 1 });
      expect(created.statusCode).toBe(201);
      const channel = created.json().channel;
      expect(gw.apns.channels.get(BUNDLE)?.get(channel.id)).toBe(1);
      const [create] = gw.apns.managementRequests;
      expect(create).toMatchObject({ method: 'POST', path: `/1/apps/${BUNDLE}/channels` });
      expect(create!.headers['apns-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect((await call('GET', '/v6/live-activities/channels', app.keys.read)).json().channels).toEqual([channel]);

      // devices holding tokens are not sent to: the channel reaches its subscribers
      await putToken(a.id, randomUUID(), { activity_type: 'ScoreAttributes', token: activityToken() });
      const res = await send({ event: 'update', channel: channel.id, content_state: { home: 2, away: 1 } });
      expect(res.statusCode).toBe(201);
      expect(res.json().live_activity).toMatchObject({ state: 'sent', channel: channel.id, pushes_succeeded: 1 });
      expect(gw.apns.broadcasts).toHaveLength(1);
      const [broadcast] = gw.apns.broadcasts;
      expect(broadcast).toMatchObject({ bundleId: BUNDLE, channelId: channel.id, pushType: 'liveactivity', priority: 10 });
      expect(broadcast!.payload).toEqual({
        aps: { timestamp: expect.any(Number), event: 'update', 'content-state': { home: 2, away: 1 } },
      });
      expect(gw.apns.pushes).toHaveLength(0);

      expect((await call('DELETE', `/v6/live-activities/channels/${encodeURIComponent(channel.id)}`, app.keys.write)).statusCode).toBe(204);
      expect(gw.apns.channels.get(BUNDLE)?.has(channel.id)).toBe(false);
      // both changes are in the audit log, by the write key
      const audited = await h.db.db
        .selectFrom('audit_log')
        .select(['action', 'actor_role', 'details', 'request_id'])
        .where('app_id', '=', app.app.id)
        .where('action', 'like', 'live_activity_channel.%')
        .orderBy('at')
        .execute();
      expect(audited).toEqual([
        {
          action: 'live_activity_channel.created',
          actor_role: 'write',
          details: { channel_id: channel.id },
          request_id: expect.any(String),
        },
        {
          action: 'live_activity_channel.deleted',
          actor_role: 'write',
          details: { channel_id: channel.id },
          request_id: expect.any(String),
        },
      ]);
      expect((await call('GET', '/v6/live-activities/channels', app.keys.read)).json().channels).toEqual([]);
    });

    it("refuses a channel the app does not have, and another app's", async () => {
      const res = await send({ event: 'update', channel: 'bm9wZQ==', content_state: {} });
      expect(res.statusCode).toBe(404);
      expect(res.json().error).toBe('channel not found');
      const bad = await call('POST', '/v6/live-activities/channels', app.keys.write, { message_storage_policy: 2 });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().error).toMatch(/^message_storage_policy: /);
    });
  });
});
