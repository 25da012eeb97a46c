import { beforeAll, describe, expect, it } from 'vitest';
import { basic, useHarness } from '../helpers/harness.js';
import { circle, manyFilters, near, pt, triangle, UNITS, withPayload, withTo } from './notification-bodies.js';
import { postNotification, type AppWithKeys } from './support.js';

/**
 * POST /v<N>/notifications with bodies at the boundaries of each validation rule (validation-refusals.test.ts has
 * the refusals): each is created, and custom payload keys pass through untouched.
 */

describe('accepted bodies (the boundaries of each rule)', () => {
  const h = useHarness();
  let app: AppWithKeys;
  beforeAll(async () => {
    app = await h.createApp();
  });

  const accepted: [string, unknown][] = [
    ['to *', withTo('*')],
    ['50 filters', withTo(manyFilters(50))],
    [
      'polygons of 1,000 points in all',
      withTo([
        { name: 'location', criteria: [{ polygon: circle(600) }] },
        { name: 'sdk_location', criteria: [{ polygon: circle(400) }] },
      ]),
    ],
    [
      'every device attribute',
      withTo([
        { name: 'locale', criteria: ['fr_FR', 'en_US'] },
        { name: 'time_zone', criteria: ['Europe/Paris'] },
        { name: 'created_at', criteria: [{ gte: 'now-7d/d' }] },
        { name: 'registered_at', criteria: ['2024-01-01T10:00:00Z', { lt: '2024-01-01||+1M/d' }] },
        { name: 'badge', criteria: [0, { gt: 1, lte: 5 }] },
        { name: 'os_name', criteria: ['iOS'] },
        { name: 'os_version', criteria: ['17.1'] },
        { name: 'app_version', criteria: ['2.0'] },
        { name: 'sdk_version', criteria: ['4.2'] },
        { name: 'device_id', criteria: ['00000000-0000-0000-0000-000000000000'] },
        { name: 'country', criteria: ['FR'] },
        { name: 'marketing_name', criteria: ['iPhone 15'] },
        { name: 'user_id', criteria: ['u1'] },
        { name: 'user_email', criteria: ['a@example.com'] },
        { name: 'development', criteria: [true] },
        { name: 'location', criteria: [near(pt(48.85, 2.35), 5, 'km')] },
        { name: 'sdk_location', criteria: [{ polygon: triangle }] },
        { name: 'notifications_allowed', criteria: ['Enabled', 'Disabled', 'Unknown'] },
        { name: 'tags', criteria: ['vip'], not_filter: true },
      ]),
    ],
    [
      'custom attributes of each type',
      withTo([
        { name: 'custom.string.colour', criteria: ['red'] },
        { name: 'custom.integer.age', criteria: [30, { gte: 18 }] },
        { name: 'custom.float.score', criteria: [{ gt: 0.5 }] },
        { name: 'custom.date.birthday', criteria: [{ gte: 'now+1h+1m' }, '2000-01-01'] },
        { name: 'custom.boolean.vip', criteria: [false] },
      ]),
    ],
    [
      'event names with and without source',
      withTo([
        { name: 'events.purchase', criteria: [true, 3, { gte: 2 }, { gt: 'now-7d/d' }] },
        { name: 'events.Public Api.signup', criteria: [{ lt: '2024-01-01||+1M/d' }] },
        { name: 'events.Mixpanel.opened_app', criteria: [{ lte: 'now+1h+1m' }] },
      ]),
    ],
    [
      'every distance unit, latitude/longitude at their bounds, distance and polygon mixed',
      withTo([
        {
          name: 'location',
          criteria: [
            ...UNITS.split(', ').map((unit) => near(pt(90, 180), 1, unit)),
            near(pt(-90, -180), 0, 'm'),
            { polygon: [pt(0, 0), pt(0, 1), pt(1, 1), pt(1, 0)] },
          ],
        },
      ]),
    ],
    [
      'typed payload keys at their bounds',
      withPayload({
        alert: 'a',
        title: 't',
        subtitle: 's',
        sound: 'default',
        category: 'REPLY',
        _channel_id: 'news',
        collapse_key: 'k'.repeat(64),
        badge: 0,
        content_available: false,
        mutable_content: true,
        interruption_level: 'time-sensitive',
        relevance_score: 0.29,
      }),
    ],
    ...(['passive', 'active', 'critical'] as const).map((level): [string, unknown] => [
      `interruption_level ${level}`,
      withPayload({ interruption_level: level }),
    ]),
    ...([0, 1, 0.5, 0.57, 0.07] as const).map((v): [string, unknown] => [`relevance_score ${v}`, withPayload({ relevance_score: v })]),
    ['keys that only look reserved', withPayload({ googleplay: 1, gcm_x: 2, from_user: 'a', Available: true, nid: 4 })],
  ];

  it.each(accepted)('%s -> 201', async (_name, body) => {
    const res = await postNotification(h, app.keys.write, body);
    expect(res.json()).toMatchObject({ state: 'scheduled' });
    expect(res.statusCode).toBe(201);
  });

  it('passes custom keys through untouched, in the answer and in the stored record', async () => {
    const payload = {
      alert: 'Sale',
      _u: 'https://example.com/sale?x=1&y=2',
      _st: { image_url: 'https://example.com/i.png', mid: 42 },
      deep: { a: [1, 'two', { three: null }], b: { c: { d: true } } },
      'with space': 'ok',
      emoji: '🎉 ünïcødé',
      nothing: null,
      big: 12345678901234,
      negative: -0.5,
      list: [],
      empty: {},
    };
    const res = await postNotification(h, app.keys.write, { notification: { to: '*', payload } });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.notification.payload).toStrictEqual(payload);

    const row = await h.db.db
      .selectFrom('notifications')
      .select(['payload', 'request'])
      .where('id', '=', body.id)
      .executeTakeFirstOrThrow();
    expect(row.payload).toStrictEqual(payload);
    expect(row.request).toStrictEqual({ to: '*', payload });

    const read = await h.server.inject({
      method: 'GET',
      url: `/v6/notifications/${body.id}`,
      headers: { authorization: basic(app.keys.read) },
    });
    expect(read.json().notification.payload).toStrictEqual(payload);
  });
});
