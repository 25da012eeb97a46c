import { randomBytes } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/platform/logger.js';
import { maintainPartitions, retentionOf } from '../../src/delivery/retention.js';
import { encodeCursor } from '../../src/domain/cursor.js';
import { ManualClock, useHarness, type Harness } from '../helpers/harness.js';
import { call, register, token } from './device-support.js';
import { createMessage, streamOf } from './message-support.js';
import { ISO_MS } from './support.js';
import { loadConfig } from '../../src/platform/config.js';
import { createRepositories } from '../../src/services/deps.js';

/**
 * A device's message stream through the SDK's routes (sdk key): which messages it holds (the stream rule of the
 * README), read and unread, delete, impressions and the message statistics, pages, erased devices, other apps.
 * Each test uses an app of its own, so the messages to everyone of one test are not in another's streams.
 */
const DAY = 86_400_000;

describe("a device's message stream", () => {
  const clock = new ManualClock(new Date('2026-06-01T09:00:00Z'));
  const RETENTION = retentionOf(loadConfig({}));
  const h = useHarness({ clock, env: { RATE_LIMIT_SDK_PER_SECOND: '0' } });
  type App = Awaited<ReturnType<Harness['createApp']>>;
  beforeEach(() => clock.set('2026-06-01T09:00:00Z'));

  const device = (app: App, fields: Record<string, unknown> = {}) =>
    register(h, app.keys.sdk, { platform: 'ios', token: token(), ...fields });
  const message = (app: App, fields: Record<string, unknown>) => createMessage(h, app.keys.write, { title: 'hello', ...fields });
  const stream = async (app: App, deviceId: string) => (await streamOf(h, app.keys.sdk, deviceId)).ids;
  const markRead = (app: App, deviceId: string, ids: unknown) =>
    call(h, 'POST', `/v6/devices/${deviceId}/messages/read`, app.keys.sdk, { message_ids: ids });
  const impressions = (app: App, deviceId: string, list: unknown, headers: Record<string, string> = {}) =>
    call(h, 'POST', `/v6/devices/${deviceId}/messages/impressions`, app.keys.sdk, { impressions: list }, headers);
  const stats = async (app: App, id: string) => (await call(h, 'GET', `/v6/stats/messages/${id}/events`, app.keys.read)).json();
  const tag = () => `tag-${randomBytes(4).toString('hex')}`;

  it('answers the stream newest first, each message with its read state, the unread count and a page cursor', async () => {
    const app = await h.createApp();
    const d = await device(app);
    const first = await message(app, { to: '*', text: 'body', url: 'https://example.com/a', custom: { k: 'v', n: 1, b: true } });
    clock.advance(1000);
    const second = await message(app, { to: '*', type: 'promo', unpublish_at: '2026-07-01T00:00:00Z' });
    const res = await call(h, 'GET', `/v6/devices/${d.id}/messages`, app.keys.sdk);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      messages: [
        {
          id: second.id,
          title: 'hello',
          text: null,
          url: null,
          type: 'promo',
          custom: {},
          created_at: expect.stringMatching(ISO_MS),
          publish_at: '2026-06-01T09:00:01.000Z',
          unpublish_at: '2026-07-01T00:00:00.000Z',
          read: false,
          read_at: null,
        },
        {
          id: first.id,
          title: 'hello',
          text: 'body',
          url: 'https://example.com/a',
          type: 'text_message',
          custom: { k: 'v', n: 1, b: true },
          created_at: expect.stringMatching(ISO_MS),
          publish_at: '2026-06-01T09:00:00.000Z',
          unpublish_at: null,
          read: false,
          read_at: null,
        },
      ],
      unread_count: 2,
      meta: { cursor: null, total: 2 },
    });
    const one = await call(h, 'GET', `/v6/devices/${d.id}/messages/${first.id}`, app.keys.sdk);
    expect(one.statusCode).toBe(200);
    expect(one.json()).toEqual({ message: res.json().messages[1] });
  });

  describe('which messages a device sees', () => {
    it("holds the live messages whose audience selects the device, not the others'", async () => {
      const app = await h.createApp();
      const t = tag();
      const inside = await device(app, { tags: [t] });
      const outside = await device(app, { tags: ['other'] });
      const all = await message(app, { to: '*' });
      const tagged = await message(app, { to: [{ name: 'tags', criteria: [t] }] });
      const negated = await message(app, { to: [{ name: 'tags', criteria: [t], not_filter: true }] });
      expect((await stream(app, inside.id)).sort()).toEqual([all.id, tagged.id].sort());
      expect((await stream(app, outside.id)).sort()).toEqual([all.id, negated.id].sort());
      expect((await call(h, 'GET', `/v6/devices/${outside.id}/messages/${tagged.id}`, app.keys.sdk)).statusCode).toBe(404);
      expect((await markRead(app, outside.id, [tagged.id])).statusCode).toBe(404);
      expect((await impressions(app, outside.id, [{ message_id: tagged.id, kind: 'stream' }])).statusCode).toBe(404);
    });

    it('gains a message when the device joins its audience later, and keeps it after leaving once it was shown', async () => {
      const app = await h.createApp();
      const t = tag();
      const d = await device(app);
      const m = await message(app, { to: [{ name: 'tags', criteria: [t] }] });
      expect(await stream(app, d.id)).toEqual([]);
      await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.sdk, { device: { tags: [t] } });
      expect(await stream(app, d.id)).toEqual([m.id]);
      await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.sdk, { device: { tags: [] } });
      expect(await stream(app, d.id)).toEqual([m.id]);
      // a device that left before it ever read its stream was never shown the message
      const brief = await device(app, { tags: [t] });
      await call(h, 'PUT', `/v6/devices/${brief.id}`, app.keys.sdk, { device: { tags: [] } });
      expect(await stream(app, brief.id)).toEqual([]);
    });

    it('shows a scheduled message from send_at, and takes messages away at unpublish_at and at the end of their retention', async () => {
      const app = await h.createApp();
      const d = await device(app);
      const later = await message(app, { to: '*', send_at: '2026-06-01T12:00:00Z' });
      const brief = await message(app, { to: '*', unpublish_at: '2026-06-02T00:00:00Z' });
      const kept = await message(app, { to: '*' });
      expect((await stream(app, d.id)).sort()).toEqual([brief.id, kept.id].sort());
      clock.set('2026-06-01T12:00:00Z');
      const ids = await stream(app, d.id);
      expect(ids[0]).toBe(later.id); // the newest: published last
      expect(ids.sort()).toEqual([later.id, brief.id, kept.id].sort());
      clock.set('2026-06-02T00:00:00Z');
      expect((await stream(app, d.id)).sort()).toEqual([later.id, kept.id].sort());
      expect((await call(h, 'GET', `/v6/messages/${brief.id}`, app.keys.read)).json().state).toBe('unpublished');
      // kept 90 days from when it was published: the one published at 09:00 goes first
      clock.set(new Date(Date.parse('2026-06-01T09:00:00Z') + 90 * DAY));
      expect(await stream(app, d.id)).toEqual([later.id]);
      expect((await call(h, 'GET', `/v6/messages/${kept.id}`, app.keys.read)).json().state).toBe('unpublished');
      clock.set(new Date(Date.parse('2026-06-01T12:00:00Z') + 90 * DAY));
      expect(await stream(app, d.id)).toEqual([]);
    });

    it('keeps a message past the retention until its unpublish_at, and deletes it the retention after that', async () => {
      const app = await h.createApp();
      const d = await device(app);
      // the public reference's example shows a message for 8 months, longer than the 90 days of retention
      const long = await message(app, { to: '*', unpublish_at: '2027-02-01T09:00:00Z' });
      expect(long).toMatchObject({ unpublish_at: '2027-02-01T09:00:00.000Z', expires_at: '2027-05-02T09:00:00.000Z' });
      const plain = await message(app, { to: '*' });
      // the workers' maintenance: messages and their stream rows dropped whole with their days; answers the days of
      // messages it dropped
      const purge = async () =>
        (await maintainPartitions({ db: h.db.db, repos: createRepositories(), log: createLogger('silent') }, RETENTION, clock.now()))
          .messages.dropped.length;
      clock.set(new Date(Date.parse('2026-06-01T09:00:00Z') + 100 * DAY));
      await purge();
      expect(await stream(app, d.id)).toEqual([long.id]);
      expect((await call(h, 'GET', `/v6/messages/${plain.id}`, app.keys.read)).statusCode).toBe(404);
      expect((await call(h, 'GET', `/v6/messages/${long.id}`, app.keys.read)).json().state).toBe('published');
      clock.set('2027-02-01T08:59:59.999Z');
      await purge();
      expect(await stream(app, d.id)).toEqual([long.id]);
      clock.set('2027-02-01T09:00:00Z');
      expect(await stream(app, d.id)).toEqual([]);
      // out of streams, it is kept the retention for late impressions and its statistics, then deleted
      clock.set('2027-05-02T08:59:59.999Z');
      await purge();
      expect((await call(h, 'GET', `/v6/messages/${long.id}`, app.keys.read)).json().state).toBe('unpublished');
      expect((await impressions(app, d.id, [{ message_id: long.id, kind: 'stream' }])).statusCode).toBe(202);
      // past its retention, its stream rows go whole with their day, at the end of the day its retention started on
      clock.set('2027-05-02T23:59:59.999Z');
      expect(await purge()).toBe(0);
      expect(await h.db.db.selectFrom('device_messages').select('device_id').where('message_id', '=', long.id).execute()).toHaveLength(1);
      clock.set('2027-05-03T00:00:00Z');
      expect(await purge()).toBeGreaterThanOrEqual(1);
      expect(await h.db.db.selectFrom('messages').select('id').where('id', '=', long.id).execute()).toEqual([]);
      expect((await call(h, 'GET', `/v6/messages/${long.id}`, app.keys.read)).statusCode).toBe(404);
      expect(await h.db.db.selectFrom('device_messages').select('device_id').where('message_id', '=', long.id).execute()).toEqual([]);
    });

    it('puts a message to named devices or users in their streams when it is created', async () => {
      const app = await h.createApp();
      const named = await device(app, { user_id: 'ana' });
      const other = await device(app);
      const byDevice = await message(app, { to: [{ name: 'device_id', criteria: [other.id] }] });
      const byUser = await message(app, { to: [{ name: 'user_id', criteria: ['ana'] }] });
      expect(await stream(app, named.id)).toEqual([byUser.id]);
      expect(await stream(app, other.id)).toEqual([byDevice.id]);
      // the user's devices as they were then: a device that becomes ana's later does not get it
      const newcomer = await device(app, { user_id: 'ana' });
      expect(await stream(app, newcomer.id)).toEqual([]);
    });

    it('evaluates date math when the stream is read', async () => {
      const app = await h.createApp();
      const d = await device(app);
      const m = await message(app, { to: [{ name: 'events.purchase', criteria: [{ gte: 'now-1d' }] }] });
      expect(await stream(app, d.id)).toEqual([]);
      await call(h, 'POST', `/v6/devices/${d.id}/events`, app.keys.sdk, {
        events: [{ name: 'purchase', date: clock.now().toISOString() }],
      });
      expect(await stream(app, d.id)).toEqual([m.id]);
    });
  });

  describe('read and delete', () => {
    it('marks several messages read at once; the first read time stays; the unread count follows', async () => {
      const app = await h.createApp();
      const d = await device(app);
      const [a, b, c] = [await message(app, { to: '*' }), await message(app, { to: '*' }), await message(app, { to: '*' })];
      expect((await streamOf(h, app.keys.sdk, d.id)).unread).toBe(3);
      const res = await markRead(app, d.id, [a.id, b.id, a.id]);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({ unread_count: 1 });
      clock.advance(60_000);
      expect((await markRead(app, d.id, [a.id])).json()).toEqual({ unread_count: 1 });
      const { messages, unread } = await streamOf(h, app.keys.sdk, d.id);
      expect(unread).toBe(1);
      const byId = new Map(messages.map((m) => [m.id, m as unknown as { read: boolean; read_at: string | null }]));
      expect(byId.get(a.id)).toMatchObject({ read: true, read_at: '2026-06-01T09:00:00.000Z' });
      expect(byId.get(b.id)).toMatchObject({ read: true });
      expect(byId.get(c.id)).toMatchObject({ read: false, read_at: null });
      // all or nothing: an id not in the stream marks none
      const unknown = await markRead(app, d.id, [c.id, '00000000-0000-4000-8000-000000000000']);
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json()).toEqual({ error: 'message "00000000-0000-4000-8000-000000000000" not found' });
      expect((await streamOf(h, app.keys.sdk, d.id)).unread).toBe(1);
      for (const body of [{}, { message_ids: [] }, { message_ids: 'x' }, { message_ids: [1] }, { message_ids: Array(101).fill(c.id) }]) {
        const bad = await call(h, 'POST', `/v6/devices/${d.id}/messages/read`, app.keys.sdk, body);
        expect(bad.statusCode, JSON.stringify(body)).toBe(400);
        expect(bad.json().error).toMatch(/message_ids|body/);
      }
    });

    it('deletes a message from the stream for good, for that device only', async () => {
      const app = await h.createApp();
      const [d, other] = [await device(app), await device(app)];
      const [a, b] = [await message(app, { to: '*' }), await message(app, { to: '*' })];
      expect((await streamOf(h, app.keys.sdk, d.id)).unread).toBe(2);
      const res = await call(h, 'DELETE', `/v6/devices/${d.id}/messages/${a.id}`, app.keys.sdk);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({ unread_count: 1 });
      expect(await stream(app, d.id)).toEqual([b.id]); // still in the audience, not back
      expect((await stream(app, other.id)).sort()).toEqual([a.id, b.id].sort());
      expect((await call(h, 'DELETE', `/v6/devices/${d.id}/messages/${a.id}`, app.keys.sdk)).statusCode).toBe(404);
      expect((await call(h, 'GET', `/v6/devices/${d.id}/messages/${a.id}`, app.keys.sdk)).statusCode).toBe(404);
      expect((await markRead(app, d.id, [a.id])).statusCode).toBe(404);
      expect((await call(h, 'DELETE', `/v6/devices/${d.id}/messages/not-a-uuid`, app.keys.sdk)).statusCode).toBe(404);
    });
  });

  describe('impressions and statistics', () => {
    it('counts each impression by kind, exactly; a retry with its Idempotency-Key counts once', async () => {
      const app = await h.createApp();
      const [d, e] = [await device(app), await device(app)];
      const m = await message(app, { to: '*' });
      const res = await impressions(app, d.id, [
        { message_id: m.id, kind: 'stream' },
        { message_id: m.id, kind: 'stream' },
        { message_id: m.id, kind: 'full_screen' },
      ]);
      expect(res.statusCode, res.body).toBe(202);
      expect(res.json()).toEqual({});
      const key = `k-${randomBytes(6).toString('hex')}`;
      const once = [{ message_id: m.id, kind: 'in_app' }];
      expect((await impressions(app, e.id, once, { 'idempotency-key': key })).statusCode).toBe(202);
      const retry = await impressions(app, e.id, once, { 'idempotency-key': key });
      expect(retry.statusCode).toBe(202);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect((await impressions(app, e.id, [{ message_id: m.id, kind: 'stream' }], { 'idempotency-key': key })).statusCode).toBe(422);
      expect(await stats(app, m.id)).toEqual({
        id: m.id,
        full_screen_impressions: 1,
        message_stream_impressions: 2,
        in_app_notification_impressions: 1,
      });
    });

    it('refuses an impression of a message the device never had, counting none of the report; still counts one after unpublish', async () => {
      const app = await h.createApp();
      const d = await device(app);
      const m = await message(app, { to: '*', unpublish_at: '2026-06-01T10:00:00Z' });
      const elsewhere = await message(app, { to: [{ name: 'tags', criteria: ['nobody'] }] });
      const res = await impressions(app, d.id, [
        { message_id: m.id, kind: 'stream' },
        { message_id: elsewhere.id, kind: 'stream' },
      ]);
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: `message "${elsewhere.id}" not found` });
      expect((await stats(app, m.id)).message_stream_impressions).toBe(0);
      expect(await stream(app, d.id)).toEqual([m.id]); // shown
      clock.set('2026-06-01T11:00:00Z');
      expect((await impressions(app, d.id, [{ message_id: m.id, kind: 'full_screen' }])).statusCode).toBe(202); // reported late
      expect(await stats(app, m.id)).toMatchObject({ full_screen_impressions: 1, message_stream_impressions: 0 });
      for (const list of [
        [],
        [{ message_id: m.id, kind: 'banner' }],
        [{ message_id: m.id }],
        'x',
        [{ message_id: m.id, kind: 'stream', x: 1 }],
      ]) {
        const bad = await impressions(app, d.id, list);
        expect(bad.statusCode, JSON.stringify(list)).toBe(400);
        expect(bad.json().error).toMatch(/^impressions/);
      }
    });
  });

  it('answers concurrent reads of one device alike, each message in the stream once', async () => {
    const app = await h.createApp();
    const d = await device(app, { tags: ['x'] });
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push((await message(app, { to: i % 2 ? '*' : [{ name: 'tags', criteria: ['x'] }] })).id);
    const reads = await Promise.all(Array.from({ length: 10 }, () => streamOf(h, app.keys.sdk, d.id)));
    for (const r of reads) expect(r.ids.sort()).toEqual([...ids].sort());
    const rows = await h.db.db.selectFrom('device_messages').select('message_id').where('device_id', '=', d.id).execute();
    expect(rows).toHaveLength(6);
  });

  it('pages with a cursor bound to the device; an unknown or foreign cursor answers 404', async () => {
    const app = await h.createApp();
    const [d, other] = [await device(app), await device(app)];
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.unshift((await message(app, { to: '*' })).id);
      clock.advance(1000);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const q: string = cursor ? `?per=2&cursor=${encodeURIComponent(cursor)}` : '?per=2';
      const res = await call(h, 'GET', `/v6/devices/${d.id}/messages${q}`, app.keys.sdk);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().meta.total).toBe(5);
      seen.push(...res.json().messages.map((m: { id: string }) => m.id));
      cursor = res.json().meta.cursor;
      if (cursor) {
        const foreign = await call(h, 'GET', `/v6/devices/${other.id}/messages?cursor=${encodeURIComponent(cursor)}`, app.keys.sdk);
        expect(foreign.statusCode).toBe(404);
      }
    } while (cursor);
    expect(seen).toEqual(ids);
    expect((await call(h, 'GET', `/v6/devices/${d.id}/messages?cursor=nonsense`, app.keys.sdk)).statusCode).toBe(404);
    // cursors are not signed: a forged one with a time PostgreSQL cannot hold is a 404 too, not a failed query
    for (const at of ['-271821-04-20T00:00:00.000Z', '275760-09-13T00:00:00.000Z', 'soon'])
      expect(
        (await call(h, 'GET', `/v6/devices/${d.id}/messages?cursor=${encodeCursor(`messages:${d.id}`, [at, d.id])}`, app.keys.sdk))
          .statusCode,
      ).toBe(404);
    expect((await call(h, 'GET', `/v6/devices/${d.id}/messages?per=101`, app.keys.sdk)).statusCode).toBe(400);
  });

  it('empties the stream of an erased device, which may then change nothing (451)', async () => {
    const app = await h.createApp();
    const d = await device(app);
    const m = await message(app, { to: '*' });
    await impressions(app, d.id, [{ message_id: m.id, kind: 'stream' }]);
    expect((await call(h, 'POST', `/v6/devices/${d.id}/erase`, app.keys.write)).statusCode).toBe(200);
    expect(await streamOf(h, app.keys.sdk, d.id)).toMatchObject({ ids: [], unread: 0 });
    expect((await markRead(app, d.id, [m.id])).statusCode).toBe(451);
    expect((await call(h, 'DELETE', `/v6/devices/${d.id}/messages/${m.id}`, app.keys.sdk)).statusCode).toBe(451);
    expect((await impressions(app, d.id, [{ message_id: m.id, kind: 'stream' }])).statusCode).toBe(451);
    expect((await stats(app, m.id)).message_stream_impressions).toBe(1); // what it reported stays counted
  });

  it("keeps apps apart: another app's key, device or message answers 404", async () => {
    const [a, b] = [await h.createApp(), await h.createApp()];
    const [da, db] = [await device(a), await device(b)];
    const ma = await message(a, { to: '*' });
    const mb = await message(b, { to: '*' });
    expect(await stream(a, da.id)).toEqual([ma.id]);
    expect(await stream(b, db.id)).toEqual([mb.id]);
    // b's sdk key on a's device
    for (const [method, url, body] of [
      ['GET', `/v6/devices/${da.id}/messages`],
      ['GET', `/v6/devices/${da.id}/messages/${ma.id}`],
      ['POST', `/v6/devices/${da.id}/messages/read`, { message_ids: [ma.id] }],
      ['DELETE', `/v6/devices/${da.id}/messages/${ma.id}`],
      ['POST', `/v6/devices/${da.id}/messages/impressions`, { impressions: [{ message_id: ma.id, kind: 'stream' }] }],
    ] as const) {
      const res = await call(h, method, url, b.keys.sdk, body);
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json()).toEqual({ error: 'device not found' });
    }
    // a's device and b's message
    expect((await call(h, 'GET', `/v6/devices/${da.id}/messages/${mb.id}`, a.keys.sdk)).statusCode).toBe(404);
    expect((await markRead(a, da.id, [mb.id])).statusCode).toBe(404);
    expect((await impressions(a, da.id, [{ message_id: mb.id, kind: 'stream' }])).statusCode).toBe(404);
    expect((await call(h, 'DELETE', `/v6/devices/${da.id}/messages/${mb.id}`, a.keys.sdk)).statusCode).toBe(404);
    expect(await stats(b, mb.id)).toEqual({
      id: mb.id,
      full_screen_impressions: 0,
      message_stream_impressions: 0,
      in_app_notification_impressions: 0,
    });
    expect((await call(h, 'GET', `/v6/stats/messages/${mb.id}/events`, a.keys.read)).statusCode).toBe(404);
    expect((await stream(a, da.id)).concat(await stream(b, db.id))).toEqual([ma.id, mb.id]);
  });
});
