import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, ManualClock, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { call } from './device-support.js';
import { createMessage, expectMessageRecord, postMessage, streamOf } from './message-support.js';
import { ISO_MS, UUID } from './support.js';

/**
 * POST /v6/messages and the app's reads of its messages, API and workers on the mock gateways: the documented
 * examples, the three targets, the push sent with a message (carrying its id), send_at on a clock the test moves,
 * cancel, Idempotency-Key, the 400s naming their field, and other apps' keys.
 */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('in-app messages: the app side', () => {
  const clock = new ManualClock(new Date('2026-06-01T09:00:00Z'));
  let h: Harness;
  let gw: Gateways;
  type App = Awaited<ReturnType<Harness['createApp']>>;
  let app: App;
  let ios: RegisteredDevice;
  let android: RegisteredDevice;

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, clock, env: { ...gw.env, SCHEDULE_POLL_MS: '20', RATE_LIMIT_SDK_PER_SECOND: '0' } });
    app = await h.createApp('com.example.messages');
    await setCredentials(h, app.app.id, gw);
    ios = await registerDevice(h, app.keys.sdk, { platform: 'ios', tags: ['fans'], user_id: 'ana' });
    android = await registerDevice(h, app.keys.sdk, { platform: 'android', tags: ['fans'] });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });
  beforeEach(() => {
    gw.reset();
    clock.set('2026-06-01T09:00:00Z');
  });

  const readMessage = async (id: string, key = app.keys.read) => call(h, 'GET', `/v6/messages/${id}`, key);
  const readNotification = async (id: string) => (await call(h, 'GET', `/v6/notifications/${id}`, app.keys.read)).json();
  const pushes = () => [...gw.apns.pushes, ...gw.fcm.pushes];
  const sent = (id: string) => waitFor(`notification ${id} sent`, async () => (await readNotification(id)).state === 'sent', 20_000);

  describe('the documented examples', () => {
    // The examples of the public reference, sent as they are (unpublish_at moved to the test's future).
    const examples: [string, Record<string, unknown>][] = [
      ['basic text message', { to: '*', title: 'test', text: 'test message' }],
      ['with message attributes', { to: '*', title: 'test', text: 'test message', custom: { my_key: 'my value' } }],
      ['link message', { to: '*', title: 'test', url: 'http://google.com' }],
      ['with a push', { to: '*', title: 'test', text: 'test message', notification: { payload: { alert: 'foo', bar: 'baz' } } }],
      [
        'with a push with an interruption level',
        {
          to: '*',
          title: 'test',
          text: 'test message',
          notification: { payload: { alert: 'foo', bar: 'baz', interruption_level: 'time-sensitive' } },
        },
      ],
      ['with unpublish_at', { to: '*', title: 'test', text: 'test message', unpublish_at: '2026-08-01T00:00:00Z' }],
      // the reference's own example is shown 8 months: longer than the 90 days of retention
      ['with unpublish_at 8 months ahead', { to: '*', title: 'test', text: 'test message', unpublish_at: '2027-02-01T00:00:00Z' }],
    ];

    it.each(examples)('%s: 201 with created_at, state, id, to and the message as submitted', async (_name, message) => {
      const res = await postMessage(h, app.keys.write, message);
      expect(res.statusCode, res.body).toBe(201);
      const record = res.json();
      expectMessageRecord(record);
      expect(record).toMatchObject({ state: 'scheduled', to: { type: 'Audience' }, message, title: 'test' });
      expect(record.notification_id === null).toBe(message.notification === undefined);
      // the same record reads back by id, now published
      const read = await readMessage(record.id);
      expect(read.statusCode).toBe(200);
      expectMessageRecord(read.json());
      expect(read.json()).toEqual({ ...record, state: 'published' });
      // its push goes to the app's devices: sent before the next test counts what they received
      if (record.notification_id) await sent(record.notification_id);
    });

    it('stores what the examples imply: attributes, the link type, the text type, the unpublish time', async () => {
      const custom = await createMessage(h, app.keys.write, examples[1]![1]);
      expect(custom).toMatchObject({ custom: { my_key: 'my value' }, type: 'text_message', text: 'test message', url: null });
      const link = await createMessage(h, app.keys.write, examples[2]![1]);
      expect(link).toMatchObject({ type: 'link_message', url: 'http://google.com', text: null });
      const later = await createMessage(h, app.keys.write, examples[5]![1]);
      expect(later).toMatchObject({
        unpublish_at: '2026-08-01T00:00:00.000Z',
        publish_at: '2026-06-01T09:00:00.000Z',
        send_at: null,
        expires_at: '2026-10-30T00:00:00.000Z', // unpublished + 90 days
      });
      // without send_at it is published the instant it is created, not a moment before
      expect(later.publish_at).toBe(later.created_at);
      const forever = await createMessage(h, app.keys.write, examples[0]![1]);
      expect(forever).toMatchObject({ publish_at: '2026-06-01T09:00:00.000Z', created_at: '2026-06-01T09:00:00.000Z', unpublish_at: null });
      expect(forever.expires_at).toBe('2026-08-30T09:00:00.000Z'); // published + 90 days
      const eightMonths = await createMessage(h, app.keys.write, examples[6]![1]);
      expect(eightMonths).toMatchObject({ unpublish_at: '2027-02-01T00:00:00.000Z', expires_at: '2027-05-02T00:00:00.000Z' });
      const typed = await createMessage(h, app.keys.write, { to: '*', title: 't', url: 'myapp://offers/42', type: 'fake_call' });
      expect(typed).toMatchObject({ type: 'fake_call', url: 'myapp://offers/42' });
    });
  });

  describe('targets', () => {
    it('takes the three forms of notifications and resolves them to the same audiences', async () => {
      const tag = `t-${randomBytes(4).toString('hex')}`;
      const all = await createMessage(h, app.keys.write, { to: '*', title: 'everyone' });
      const notification = await call(h, 'POST', '/v6/notifications', app.keys.write, {
        notification: { to: '*', payload: { alert: 'x' }, send_at: '2026-06-02T00:00:00Z' },
      });
      expect(all.to.id).toBe(notification.json().to.id);

      const filters = [
        { name: 'tags', criteria: [tag] },
        { name: 'locale', criteria: ['fr_FR', 'en_US'], not_filter: true },
      ];
      const first = await createMessage(h, app.keys.write, { to: filters, title: 'on the fly' });
      // the same spec in another order is the same stored audience
      const again = await createMessage(h, app.keys.write, { to: [filters[1], { ...filters[0], not_filter: false }], title: 'again' });
      expect(again.to.id).toBe(first.to.id);
      const audience = await call(h, 'GET', `/v6/audiences/${first.to.id}`, app.keys.read);
      expect(audience.json().audience.name).toMatch(/^api_audience_/);

      const stored = await createMessage(h, app.keys.write, { to: { audience: first.to.id }, title: 'stored' });
      expect(stored.to.id).toBe(first.to.id);
      const unknown = await postMessage(h, app.keys.write, { to: { audience: '00000000-0000-4000-8000-000000000000' }, title: 'x' });
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json()).toEqual({ error: 'audience not found' });
      await call(h, 'DELETE', `/v6/notifications/${notification.json().id}`, app.keys.write);
    });
  });

  describe('the push sent with a message', () => {
    it("goes to the message's audience through the pipeline and carries the message id in _st.mid, keeping the caller's _st", async () => {
      const res = await postMessage(h, app.keys.write, {
        to: [{ name: 'tags', criteria: ['fans'] }],
        title: 'New season',
        notification: { payload: { alert: 'It is here', _st: { image_url: 'https://example.com/a.png' }, bar: 'baz' } },
      });
      expect(res.statusCode, res.body).toBe(201);
      const { id, notification_id: notificationId, to } = res.json();
      expect(notificationId).toMatch(UUID);
      await sent(notificationId);
      expect(
        pushes()
          .map((p) => p.token)
          .sort(),
      ).toEqual([ios.token, android.token].sort());
      const apns = gw.apns.pushes.find((p) => p.token === ios.token)!;
      expect(apns.payload).toMatchObject({
        aps: { alert: 'It is here' },
        _st: { mid: id, image_url: 'https://example.com/a.png' },
        bar: 'baz',
      });
      const fcm = gw.fcm.pushes.find((p) => p.token === android.token)!.message as { data: Record<string, string> };
      expect(JSON.parse(fcm.data._st!)).toEqual({ mid: id, image_url: 'https://example.com/a.png' });
      // an ordinary notification: same audience, readable, its payload as sent
      expect(await readNotification(notificationId)).toMatchObject({
        to: { id: to.id },
        state: 'sent',
        pushes_succeeded: 2,
        notification: { payload: { _st: { mid: id } } },
      });
      const row = await h.db.db.selectFrom('notifications').select('message_id').where('id', '=', notificationId).executeTakeFirstOrThrow();
      expect(row.message_id).toBe(id);
      expect((await readMessage(id)).json().notification_id).toBe(notificationId);
    });

    it("with a collapse_key, replaces an earlier push and becomes the later message's push", async () => {
      const notification = { payload: { alert: 'news', collapse_key: `c-${randomBytes(4).toString('hex')}` } };
      const to = [{ name: 'tags', criteria: ['nobody'] }];
      const first = await createMessage(h, app.keys.write, { to, title: 'first', notification });
      const second = await createMessage(h, app.keys.write, { to, title: 'second', notification });
      expect(second.notification_id).toBe(first.notification_id);
      expect((await readMessage(first.id)).json().notification_id).toBeNull();
      expect((await readMessage(second.id)).json().notification_id).toBe(first.notification_id);
      expect((await readNotification(first.notification_id!)).notification.payload._st).toEqual({ mid: second.id });
    });

    it('takes the delivery options of notifications, named under message.notification', async () => {
      const ok = await createMessage(h, app.keys.write, {
        to: [{ name: 'tags', criteria: ['nobody'] }],
        title: 'urgent',
        notification: { payload: { alert: 'now' }, ttl: 600, priority: 'high' },
      });
      const push = await readNotification(ok.notification_id!);
      expect(push.priority).toBe('high');
      expect(Date.parse(push.expires_at) - Date.parse(push.created_at)).toBe(600_000); // a ttl counts from its creation
      const bad = await postMessage(h, app.keys.write, {
        to: '*',
        title: 'x',
        notification: { payload: { alert: 'x' }, expires_at: '2026-05-01T00:00:00Z' },
      });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().error).toBe('message.notification.expires_at: must be in the future');
    });
  });

  describe('send_at', () => {
    it('keeps a message out of streams and its push unsent until send_at, then both go out', async () => {
      const res = await postMessage(h, app.keys.write, {
        to: [{ name: 'device_id', criteria: [ios.id] }],
        title: 'Later',
        send_at: '2026-06-01T12:00:00+02:00',
        notification: { payload: { alert: 'later' } },
      });
      expect(res.statusCode, res.body).toBe(201);
      const { id, notification_id: notificationId } = res.json();
      expect(res.json()).toMatchObject({ state: 'scheduled', send_at: '2026-06-01T10:00:00.000Z', publish_at: '2026-06-01T10:00:00.000Z' });
      expect((await readMessage(id)).json().state).toBe('scheduled');
      expect(await readNotification(notificationId)).toMatchObject({ state: 'scheduled', send_at: '2026-06-01T10:00:00.000Z' });
      await sleep(200); // many polls: not due yet
      expect(pushes()).toEqual([]);
      expect((await streamOf(h, app.keys.sdk, ios.id)).ids).not.toContain(id);

      clock.set('2026-06-01T10:00:00Z');
      await sent(notificationId);
      expect(pushes().map((p) => p.token)).toEqual([ios.token]);
      expect((await streamOf(h, app.keys.sdk, ios.id)).ids).toContain(id);
      expect((await readMessage(id)).json().state).toBe('published');
    });

    it('refuses a send time in the past, more than a year ahead or without an offset, and bad unpublish times, naming the field', async () => {
      const cases: [Record<string, unknown>, string | RegExp][] = [
        [{ send_at: '2026-06-01T08:00:00Z' }, 'message.send_at: is in the past'],
        [{ send_at: '2027-07-01T00:00:00Z' }, 'message.send_at: is more than a year ahead'],
        [{ send_at: '2026-06-02T09:00' }, /^message\.send_at: must be an ISO 8601 date-time with an offset, as [^(]*$/],
        [{ send_at: 7 }, /^message\.send_at: /],
        [{ local_time: true }, /^message: Unrecognized key/],
        [{ unpublish_at: '2026-06-01T08:59:59Z' }, 'message.unpublish_at: must be in the future'],
        [{ unpublish_at: '2026-06-03' }, /^message\.unpublish_at: must be an ISO 8601 date-time with a time zone offset/],
        [{ send_at: '2026-06-05T00:00:00Z', unpublish_at: '2026-06-04T00:00:00Z' }, 'message.unpublish_at: must be after send_at'],
        [
          { unpublish_at: '2036-05-29T10:00:00.001Z', send_at: '2026-06-01T10:00:00Z' },
          'message.unpublish_at: must be at most 3650 days after the message is published',
        ],
      ];
      for (const [fields, error] of cases) {
        const res = await postMessage(h, app.keys.write, { to: '*', title: 't', ...fields });
        expect(res.statusCode, JSON.stringify(fields)).toBe(400);
        expect(res.json().error, JSON.stringify(fields)).toMatch(error);
      }
    });
  });

  describe('cancel', () => {
    it('cancels a scheduled message and its push: it never appears, nothing is sent; then 409, and 404 for an unknown one', async () => {
      const { id, notification_id: notificationId } = await createMessage(h, app.keys.write, {
        to: [{ name: 'device_id', criteria: [android.id] }],
        title: 'Never',
        send_at: '2026-06-01T09:30:00Z',
        notification: { payload: { alert: 'never' } },
      });
      expect((await call(h, 'DELETE', `/v6/messages/${id}`, app.keys.read)).statusCode).toBe(403);
      const res = await call(h, 'DELETE', `/v6/messages/${id}`, app.keys.write);
      expect(res.statusCode, res.body).toBe(200);
      expectMessageRecord(res.json());
      expect(res.json()).toMatchObject({
        id,
        state: 'canceled',
        canceled_at: expect.stringMatching(ISO_MS),
        notification_id: notificationId,
      });
      expect(await readNotification(notificationId!)).toMatchObject({ state: 'canceled' });

      clock.set('2026-06-01T10:00:00Z');
      await sleep(300);
      expect(pushes()).toEqual([]);
      expect((await streamOf(h, app.keys.sdk, android.id)).ids).not.toContain(id);
      expect((await readMessage(id)).json().state).toBe('canceled');

      const again = await call(h, 'DELETE', `/v6/messages/${id}`, app.keys.write);
      expect(again.statusCode).toBe(409);
      expect(again.json()).toEqual({ error: 'message: it is canceled and can no longer be canceled' });
      const published = await createMessage(h, app.keys.write, { to: '*', title: 'out already' });
      const late = await call(h, 'DELETE', `/v6/messages/${published.id}`, app.keys.write);
      expect(late.statusCode).toBe(409);
      expect(late.json()).toEqual({ error: 'message: it is published and can no longer be canceled' });
      for (const unknown of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid'])
        expect((await call(h, 'DELETE', `/v6/messages/${unknown}`, app.keys.write)).statusCode).toBe(404);
    });
  });

  describe('Idempotency-Key', () => {
    it('a retry answers the first answer and creates no second message or push; another body with the key is a 422', async () => {
      const key = `k-${randomBytes(8).toString('hex')}`;
      const body = { to: [{ name: 'device_id', criteria: [ios.id] }], title: 'Once', notification: { payload: { alert: 'once' } } };
      const first = await postMessage(h, app.keys.write, body, { 'idempotency-key': key });
      expect(first.statusCode, first.body).toBe(201);
      const second = await postMessage(h, app.keys.write, body, { 'idempotency-key': key });
      expect(second.statusCode).toBe(201);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(second.body).toBe(first.body);
      await sent(first.json().notification_id);
      await sleep(200);
      expect(pushes().map((p) => p.token)).toEqual([ios.token]);
      const mine = await h.db.db.selectFrom('messages').select('id').where('title', '=', 'Once').execute();
      expect(mine.map((m) => m.id)).toEqual([first.json().id]);
      const other = await postMessage(h, app.keys.write, { ...body, title: 'Twice' }, { 'idempotency-key': key });
      expect(other.statusCode).toBe(422);
      expect(other.json().error).toMatch(/^Idempotency-Key: /);
    });
  });

  describe('reads', () => {
    it('lists the app\'s messages newest first, in pages of "per"', async () => {
      const fresh = await h.createApp();
      const ids: string[] = [];
      for (const title of ['one', 'two', 'three']) {
        ids.push((await createMessage(h, fresh.keys.write, { to: '*', title })).id);
        clock.advance(1000); // created_at is the clock's: one a second
      }
      const page = (q: string) => call(h, 'GET', `/v6/messages${q}`, fresh.keys.read);
      const all = await page('');
      expect(all.statusCode).toBe(200);
      expect(all.json().messages.map((m: { id: string }) => m.id)).toEqual([...ids].reverse());
      all.json().messages.forEach(expectMessageRecord);
      expect((await page('?per=2&page=1')).json().messages.map((m: { title: string }) => m.title)).toEqual(['three', 'two']);
      expect((await page('?per=2&page=2')).json().messages.map((m: { title: string }) => m.title)).toEqual(['one']);
      expect((await page('?per=0')).statusCode).toBe(400);
    });

    it('answers 404 for an unknown id or one that is not a UUID', async () => {
      for (const id of ['00000000-0000-4000-8000-000000000000', 'nope', '%20']) expect((await readMessage(id)).statusCode, id).toBe(404);
      const stats = await call(h, 'GET', '/v6/stats/messages/00000000-0000-4000-8000-000000000000/events', app.keys.read);
      expect(stats.statusCode).toBe(404);
    });
  });

  describe('validation', () => {
    it('answers 400 naming the field for every bad part', async () => {
      const long = (n: number) => 'x'.repeat(n);
      const cases: [unknown, string | RegExp][] = [
        [{ to: '*' }, /^message\.title: /],
        [{ to: '*', title: '' }, 'message.title: must not be empty'],
        [{ to: '*', title: '   ' }, 'message.title: must not be empty'],
        [{ to: '*', title: long(256) }, 'message.title: must be at most 255 characters'],
        [{ to: '*', title: 5 }, 'message.title: must be a string'],
        [{ title: 't' }, /^message\.to: /],
        [{ to: 'everyone', title: 't' }, /^message\.to: must be "\*"/],
        [{ to: [{ name: 'nope', criteria: ['x'] }], title: 't' }, /^message\.to\[0\]\.name: /],
        [{ to: '*', title: 't', text: long(10_001) }, 'message.text: must be at most 10000 characters'],
        [{ to: '*', title: 't', url: 'javascript:alert(1)' }, /^message\.url: must be an http\(s\) URL or an app URL/],
        [{ to: '*', title: 't', url: 'data://text/html,x' }, /^message\.url: /],
        [{ to: '*', title: 't', url: 'google.com' }, /^message\.url: /],
        [{ to: '*', title: 't', url: 'https://exa mple.com' }, /^message\.url: /],
        [{ to: '*', title: 't', url: `https://example.com/${long(2048)}` }, 'message.url: must be at most 2048 characters'],
        [{ to: '*', title: 't', type: 'has space' }, /^message\.type: must be 1 to 64 letters/],
        [{ to: '*', title: 't', type: long(65) }, /^message\.type: /],
        [{ to: '*', title: 't', custom: 'x' }, /^message\.custom: must be an object/],
        [{ to: '*', title: 't', custom: { nested: { a: 1 } } }, /^message\.custom\.nested: must be a string/],
        [{ to: '*', title: 't', custom: { v: long(1025) } }, /^message\.custom\.v: /],
        [
          { to: '*', title: 't', custom: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i])) },
          'message.custom: must have at most 50 keys',
        ],
        [{ to: '*', title: 't', notification: { payload: {} } }, 'message.notification.payload: must not be empty'],
        [
          { to: '*', title: 't', notification: { payload: { alert: 'x', aps: {} } } },
          /^message\.notification\.payload\.aps: is a reserved key/,
        ],
        [
          { to: '*', title: 't', notification: { payload: { alert: 'x', _st: 'x' } } },
          /^message\.notification\.payload\._st: must be an object/,
        ],
        [{ to: '*', title: 't', notification: { payload: { alert: 'x' }, to: '*' } }, /^message\.notification: Unrecognized key/],
        [{ to: '*', title: 't', notification: { payload: { alert: long(3990) } } }, /^message\.notification\.payload: is too large/],
        [{ to: '*', title: 't', extra: 1 }, /^message: Unrecognized key/],
        [{ to: '*', title: 't', notification: 'x' }, /^message\.notification: must be an object with payload/],
      ];
      for (const [message, error] of cases) {
        const res = await postMessage(h, app.keys.write, message);
        expect(res.statusCode, JSON.stringify(message).slice(0, 200)).toBe(400);
        expect(res.json().error, JSON.stringify(message).slice(0, 200)).toMatch(error);
      }
      for (const body of [{}, { message: 'x' }, [], { message: { to: '*', title: 't' }, other: 1 }]) {
        const res = await call(h, 'POST', '/v6/messages', app.keys.write, body);
        expect(res.statusCode, JSON.stringify(body)).toBe(400);
        expect(res.json().error).toEqual(expect.any(String));
      }
    });

    it('stores nothing for a refused request', async () => {
      const fresh = await h.createApp();
      await postMessage(h, fresh.keys.write, { to: '*', title: '' });
      await postMessage(h, fresh.keys.write, { to: '*', title: 't', notification: { payload: { alert: 'x' }, ttl: 0 } });
      expect((await call(h, 'GET', '/v6/messages', fresh.keys.read)).json().messages).toEqual([]);
    });
  });

  describe('other apps', () => {
    it("cannot read, list, cancel or count another app's message, nor target its audience", async () => {
      const other = await h.createApp();
      const mine = await createMessage(h, app.keys.write, { to: '*', title: 'mine', send_at: '2026-06-02T00:00:00Z' });
      expect((await readMessage(mine.id, other.keys.read)).statusCode).toBe(404);
      expect((await call(h, 'GET', `/v6/stats/messages/${mine.id}/events`, other.keys.read)).statusCode).toBe(404);
      expect((await call(h, 'DELETE', `/v6/messages/${mine.id}`, other.keys.write)).statusCode).toBe(404);
      expect((await call(h, 'GET', '/v6/messages', other.keys.read)).json().messages).toEqual([]);
      const theirs = await postMessage(h, other.keys.write, { to: { audience: mine.to.id }, title: 'x' });
      expect(theirs.statusCode).toBe(404);
      expect((await readMessage(mine.id)).json().state).toBe('scheduled'); // untouched
    });
  });
});
