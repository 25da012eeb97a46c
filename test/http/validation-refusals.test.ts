import { beforeAll, describe, expect, it } from 'vitest';
import { useHarness } from '../helpers/harness.js';
import { alert, circle, manyFilters, near, pt, triangle, UNITS, withPayload, withTo } from './notification-bodies.js';
import { countRows, postNotification, type AppWithKeys } from './support.js';

/**
 * POST /v<N>/notifications validation: one bad body per rule, each answered 400 with the exact error naming
 * the field path, and nothing stored. Accepted boundary values are checked in validation-accepted.test.ts, so a
 * rule that refused everything would fail there.
 */

const filter = (name: string, criteria: unknown[], extra: Record<string, unknown> = {}) => withTo([{ name, criteria, ...extra }]);

const TO_FORMS = 'notification.to: must be "*", {"audience": "<id>"} or an array of filters';
const NAME_ERR =
  'notification.to[0].name: must be a device attribute, custom.<string|integer|float|date|boolean>.<name>, events.<name> or events.<source>.<name>';
const GEO_ONLY = 'notification.to[0].criteria[0]: distance and polygon criteria only apply to location and sdk_location';
const RANGE_KEYS = 'notification.to[0].criteria[0]: a range object needs at least one of gt, gte, lt, lte';
const BAD_DATE_RANGE = (key: string) =>
  `notification.to[0].criteria[0].${key}: must be an ISO 8601 date or date-math expression within years 1 to 9999`;
const RESERVED = (key: string) => `notification.payload.${key}: is a reserved key and cannot be set`;
const RESERVED_PREFIX = (key: string) =>
  `notification.payload.${key}: is reserved (keys beginning google. or gcm. belong to the push gateway)`;

type Row = [rule: string, body: unknown, error: string];

const TO_ROWS: Row[] = [
  ['to missing', { notification: { payload: alert } }, TO_FORMS],
  ['to a number', withTo(5), TO_FORMS],
  ['to a boolean', withTo(true), TO_FORMS],
  ['to null', withTo(null), TO_FORMS],
  ['to a string other than *', withTo('all'), TO_FORMS],
  ['to "**"', withTo('**'), TO_FORMS],
  ['audience form without audience', withTo({}), 'notification.to.audience: must be an audience id string'],
  ['audience id a number', withTo({ audience: 5 }), 'notification.to.audience: must be an audience id string'],
  ['audience id empty', withTo({ audience: '' }), 'notification.to.audience: audience must not be empty'],
  ['audience form with a second key', withTo({ audience: 'a', name: 'x' }), 'notification.to: Unrecognized key: "name"'],
  ['filters array empty', withTo([]), 'notification.to: must hold at least one filter'],
  ['filter a string', withTo(['locale']), 'notification.to[0]: must be a filter object {"name", "criteria", "not_filter"?}'],
  ['filter without name', withTo([{ criteria: ['a'] }]), 'notification.to[0].name: must be a string'],
  ['filter name a number', withTo([{ name: 5, criteria: ['a'] }]), 'notification.to[0].name: must be a string'],
  ['filter without criteria', withTo([{ name: 'locale' }]), 'notification.to[0].criteria: must be an array'],
  ['criteria a string', filter('locale', 'fr_FR' as unknown as unknown[]), 'notification.to[0].criteria: must be an array'],
  ['criteria empty', filter('locale', []), 'notification.to[0].criteria: must have at least one element'],
  ['not_filter a string', filter('locale', ['fr_FR'], { not_filter: 'yes' }), 'notification.to[0].not_filter: must be a boolean'],
  ['filter with an unknown key', filter('locale', ['fr_FR'], { negate: true }), 'notification.to[0]: Unrecognized key: "negate"'],
  [
    'second filter bad, path names it',
    withTo([
      { name: 'locale', criteria: ['fr_FR'] },
      { name: 'locale', criteria: [] },
    ]),
    'notification.to[1].criteria: must have at least one element',
  ],
];

const NAME_ROWS: Row[] = [
  ['unknown attribute', filter('colour', ['red']), NAME_ERR],
  ['attribute names are case-sensitive', filter('Locale', ['fr_FR']), NAME_ERR],
  ['custom without type', filter('custom.colour', ['red']), NAME_ERR],
  ['custom with an unknown type', filter('custom.text.colour', ['red']), NAME_ERR],
  ['custom with an empty name', filter('custom.string.', ['red']), NAME_ERR],
  ['custom name with a space', filter('custom.string.fav colour', ['red']), NAME_ERR],
  ['events without a name', filter('events.', [true]), NAME_ERR],
  ['events with an empty event name', filter('events.Public Api.', [true]), NAME_ERR],
  ['events with two dotted sources', filter('events.a.b.c', [true]), NAME_ERR],
];

const CRITERIA_ROWS: Row[] = [
  ['string attribute, number criterion', filter('locale', [5]), 'notification.to[0].criteria[0]: must be a string'],
  ['string attribute, array criterion', filter('locale', [['fr_FR']]), 'notification.to[0].criteria[0]: must be a string'],
  ['tags, boolean criterion', filter('tags', [true]), 'notification.to[0].criteria[0]: must be a string'],
  ['second criterion bad, path names it', filter('user_id', ['u1', 2]), 'notification.to[0].criteria[1]: must be a string'],
  ['development, string criterion', filter('development', ['true']), 'notification.to[0].criteria[0]: must be a boolean'],
  ['badge, string criterion', filter('badge', ['1']), 'notification.to[0].criteria[0]: must be a number or a range object'],
  ['badge, null criterion', filter('badge', [null]), 'notification.to[0].criteria[0]: must be a number or a range object'],
  [
    'notifications_allowed, unknown value',
    filter('notifications_allowed', ['enabled']),
    'notification.to[0].criteria[0]: must be one of Enabled, Disabled, Unknown',
  ],
  [
    'custom.integer, string criterion',
    filter('custom.integer.age', ['x']),
    'notification.to[0].criteria[0]: must be a number or a range object',
  ],
  ['custom.boolean, number criterion', filter('custom.boolean.vip', [1]), 'notification.to[0].criteria[0]: must be a boolean'],
  ['custom.string, boolean criterion', filter('custom.string.colour', [false]), 'notification.to[0].criteria[0]: must be a string'],
  [
    'event, string criterion',
    filter('events.purchase', ['x']),
    'notification.to[0].criteria[0]: must be true, a count (integer >= 0) or a range object',
  ],
  [
    'event, negative count',
    filter('events.purchase', [-1]),
    'notification.to[0].criteria[0]: must be true, a count (integer >= 0) or a range object',
  ],
  [
    'event, false',
    filter('events.purchase', [false]),
    'notification.to[0].criteria[0]: must be true, a count (integer >= 0) or a range object',
  ],
  // range objects
  ['range with no bound', filter('badge', [{}]), RANGE_KEYS],
  ['range with only unknown keys', filter('badge', [{ above: 1 }]), RANGE_KEYS],
  [
    'range with a bound and an unknown key',
    filter('badge', [{ gt: 1, above: 2 }]),
    'notification.to[0].criteria[0].above: unknown range key (allowed: gt, gte, lt, lte)',
  ],
  ['number range, string bound', filter('badge', [{ gt: '1' }]), 'notification.to[0].criteria[0].gt: must be a number'],
  [
    'number range, second bound bad',
    filter('custom.float.score', [{ gt: 1, lte: true }]),
    'notification.to[0].criteria[0].lte: must be a number',
  ],
  [
    'range on a string attribute',
    filter('locale', [{ gt: 'a' }]),
    'notification.to[0].criteria[0]: range criteria only apply to numbers, dates and events',
  ],
  [
    'range on a boolean attribute',
    filter('custom.boolean.vip', [{ gt: 0 }]),
    'notification.to[0].criteria[0]: range criteria only apply to numbers, dates and events',
  ],
  // date math, checked by the parser
  ['date math, unknown unit now-7x', filter('created_at', [{ gte: 'now-7x' }]), BAD_DATE_RANGE('gte')],
  ['date math, yesterday', filter('registered_at', [{ lt: 'yesterday' }]), BAD_DATE_RANGE('lt')],
  ['date math, rounding without unit now/', filter('custom.date.birthday', [{ gt: 'now/' }]), BAD_DATE_RANGE('gt')],
  ['date math, anchor without ||', filter('created_at', [{ gt: '2024-01-01+1M' }]), BAD_DATE_RANGE('gt')],
  ['date math, impossible anchor date', filter('created_at', [{ gt: '2024-02-30||+1d' }]), BAD_DATE_RANGE('gt')],
  ['date math, number bound', filter('created_at', [{ gt: 5 }]), BAD_DATE_RANGE('gt')],
  ['date math past any date', filter('created_at', [{ gt: 'now+99999999999y' }]), BAD_DATE_RANGE('gt')],
  ['date math, 100,000,000 days', filter('custom.date.birthday', [{ gt: 'now+100000000d' }]), BAD_DATE_RANGE('gt')],
  ['date past year 9999 in its zone', filter('created_at', [{ lt: '9999-12-31T23:59:59-23:59' }]), BAD_DATE_RANGE('lt')],
  [
    'date criterion, not a date',
    filter('created_at', ['yesterday']),
    'notification.to[0].criteria[0]: must be an ISO 8601 date or date-math expression within years 1 to 9999, or a range object',
  ],
  [
    'date criterion, now/',
    filter('created_at', ['now/']),
    'notification.to[0].criteria[0]: must be an ISO 8601 date or date-math expression within years 1 to 9999, or a range object',
  ],
];

const GEO_ROWS: Row[] = [
  ['location, string criterion', filter('location', ['Paris']), 'notification.to[0].criteria[0]: must be a distance or polygon object'],
  [
    'latitude above 90',
    filter('location', [near(pt(90.5, 0))]),
    'notification.to[0].criteria[0].point.latitude: latitude must be between -90 and 90',
  ],
  [
    'latitude below -90',
    filter('sdk_location', [near(pt(-91, 0))]),
    'notification.to[0].criteria[0].point.latitude: latitude must be between -90 and 90',
  ],
  [
    'longitude above 180',
    filter('location', [near(pt(0, 180.01))]),
    'notification.to[0].criteria[0].point.longitude: longitude must be between -180 and 180',
  ],
  [
    'longitude below -180',
    filter('sdk_location', [near(pt(0, -200))]),
    'notification.to[0].criteria[0].point.longitude: longitude must be between -180 and 180',
  ],
  ['latitude a string', filter('location', [near(pt('1', 0))]), 'notification.to[0].criteria[0].point.latitude: must be a number'],
  [
    'point missing',
    filter('location', [{ distance: 1, unit: 'km' }]),
    'notification.to[0].criteria[0].point: must be an object with latitude and longitude',
  ],
  ['distance missing', filter('location', [{ point: pt(0, 0), unit: 'km' }]), 'notification.to[0].criteria[0].distance: must be a number'],
  ['distance negative', filter('location', [near(pt(0, 0), -1)]), 'notification.to[0].criteria[0].distance: distance must be >= 0'],
  ['unit missing', filter('location', [{ point: pt(0, 0), distance: 1 }]), 'notification.to[0].criteria[0].unit: must be a string'],
  [
    'unit not in the contract',
    filter('location', [near(pt(0, 0), 1, 'parsec')]),
    `notification.to[0].criteria[0].unit: unit must be one of ${UNITS}`,
  ],
  ['unit case differs', filter('location', [near(pt(0, 0), 1, 'KM')]), `notification.to[0].criteria[0].unit: unit must be one of ${UNITS}`],
  [
    'distance with an unknown key',
    filter('location', [{ ...near(pt(0, 0)), radius: 3 }]),
    'notification.to[0].criteria[0]: Unrecognized key: "radius"',
  ],
  [
    'polygon of 2 points',
    filter('location', [{ polygon: [pt(0, 0), pt(1, 1)] }]),
    'notification.to[0].criteria[0].polygon: polygon needs at least 3 points',
  ],
  ['polygon not an array', filter('location', [{ polygon: 'x' }]), 'notification.to[0].criteria[0].polygon: must be an array of points'],
  ['polygon null', filter('location', [{ polygon: null }]), 'notification.to[0].criteria[0].polygon: must be an array of points'],
  ['polygon on a string attribute, null', filter('country', [{ polygon: null }]), GEO_ONLY],
  [
    'polygon with a bad point',
    filter('sdk_location', [{ polygon: [pt(0, 0), pt(0, 1), pt(100, 1)] }]),
    'notification.to[0].criteria[0].polygon[2].latitude: latitude must be between -90 and 90',
  ],
  [
    'second geo criterion bad',
    filter('location', [{ polygon: triangle }, near(pt(0, 0), 1, 'lightyears')]),
    `notification.to[0].criteria[1].unit: unit must be one of ${UNITS}`,
  ],
  ['distance on a string attribute', filter('locale', [near(pt(0, 0))]), GEO_ONLY],
  ['polygon on a custom attribute', filter('custom.string.city', [{ polygon: triangle }]), GEO_ONLY],
  ['distance on badge', filter('badge', [near(pt(0, 0))]), GEO_ONLY],
  ['51 filters', withTo(manyFilters(51)), 'notification.to: must hold at most 50 filters'],
  [
    'polygons of 1,001 points in all',
    withTo([
      { name: 'location', criteria: [{ polygon: circle(600) }] },
      { name: 'sdk_location', criteria: [near(pt(0, 0)), { polygon: circle(401) }] },
    ]),
    'notification.to[1].criteria[1].polygon: polygons hold at most 1000 points in all',
  ],
];

const PAYLOAD_ROWS: Row[] = [
  ['payload missing', { notification: { to: '*' } }, 'notification.payload: must be an object'],
  ['payload a string', withPayload('hi'), 'notification.payload: must be an object'],
  ['payload an array', withPayload([]), 'notification.payload: must be an object'],
  ['payload empty', withPayload({}), 'notification.payload: must not be empty'],
  ...(['alert', 'sound', 'category', '_channel_id', 'collapse_key', 'title', 'subtitle'] as const).map((key): Row => [
    `${key} a number`,
    withPayload({ [key]: 1 }),
    `notification.payload.${key}: must be a string`,
  ]),
  ['alert an object', withPayload({ alert: { body: 'x' } }), 'notification.payload.alert: must be a string'],
  ['badge negative', withPayload({ badge: -1 }), 'notification.payload.badge: must be an integer >= 0'],
  ['badge fractional', withPayload({ badge: 1.5 }), 'notification.payload.badge: must be an integer >= 0'],
  ['badge a string', withPayload({ badge: '1' }), 'notification.payload.badge: must be an integer >= 0'],
  ['badge a boolean', withPayload({ badge: true }), 'notification.payload.badge: must be an integer >= 0'],
  ['content_available a string', withPayload({ content_available: 'true' }), 'notification.payload.content_available: must be a boolean'],
  ['content_available a number', withPayload({ content_available: 1 }), 'notification.payload.content_available: must be a boolean'],
  ['mutable_content a string', withPayload({ mutable_content: 'yes' }), 'notification.payload.mutable_content: must be a boolean'],
  ...(['loud', 'Active', '', 5] as const).map((v): Row => [
    `interruption_level ${JSON.stringify(v)}`,
    withPayload({ interruption_level: v }),
    'notification.payload.interruption_level: must be one of passive, active, time-sensitive, critical',
  ]),
  ['relevance_score above 1', withPayload({ relevance_score: 1.01 }), 'notification.payload.relevance_score: must be a number from 0 to 1'],
  ['relevance_score below 0', withPayload({ relevance_score: -0.1 }), 'notification.payload.relevance_score: must be a number from 0 to 1'],
  [
    'relevance_score a string',
    withPayload({ relevance_score: '0.5' }),
    'notification.payload.relevance_score: must be a number from 0 to 1',
  ],
  ...([0.123, 0.005, 0.995, 1e-12] as const).map((v): Row => [
    `relevance_score ${v}`,
    withPayload({ relevance_score: v }),
    'notification.payload.relevance_score: may have at most two decimal places',
  ]),
  [
    'collapse_key of 65 characters',
    withPayload({ collapse_key: 'k'.repeat(65) }),
    'notification.payload.collapse_key: must be at most 64 characters',
  ],
  ['collapse_key empty', withPayload({ collapse_key: '' }), 'notification.payload.collapse_key: must not be empty'],
  // reserved keys
  ...(['available', 'from', 'gcm', 'notification', 'message_type', 'aps', '_nid'] as const).map((key): Row => [
    `reserved key ${key}`,
    withPayload({ alert: 'x', [key]: 'v' }),
    RESERVED(key),
  ]),
  ...(['google.', 'google.c.a.e', 'gcm.notification.title', 'gcm.n.e'] as const).map((key): Row => [
    `reserved prefix ${key}`,
    withPayload({ alert: 'x', [key]: '1' }),
    RESERVED_PREFIX(key),
  ]),
];

const ENVELOPE_ROWS: Row[] = [
  ['unknown top-level key', { notification: { to: '*', payload: alert }, schedule: 'now' }, 'Unrecognized key: "schedule"'],
  [
    'unknown key next to to and payload',
    { notification: { to: '*', payload: alert, sent_at: 'now' } },
    'notification: Unrecognized key: "sent_at"',
  ],
  ['notification missing', { other: 1 }, 'notification: must be an object with to and payload'],
  ['notification a string', { notification: 'x' }, 'notification: must be an object with to and payload'],
  ['notification an array', { notification: [] }, 'notification: must be an object with to and payload'],
  ['body an array', [], 'body must be {"notification": {"to", "payload"}}'],
  ['body a string', 'x', 'body must be {"notification": {"to", "payload"}}'],
  ['body null', null, 'body must be {"notification": {"to", "payload"}}'],
];

describe('POST /v6/notifications validation', () => {
  const h = useHarness();
  let app: AppWithKeys;
  beforeAll(async () => {
    app = await h.createApp();
  });

  describe.each([
    ['to field', TO_ROWS],
    ['filter names', NAME_ROWS],
    ['criteria', CRITERIA_ROWS],
    ['distance and polygon', GEO_ROWS],
    ['payload', PAYLOAD_ROWS],
    ['envelope', ENVELOPE_ROWS],
  ] as const)('%s', (_group, rows) => {
    it.each(rows)('%s -> 400', async (_rule, body, error) => {
      const res = await postNotification(h, app.keys.write, body);
      expect(res.json()).toEqual({ error });
      expect(res.statusCode).toBe(400);
    });
  });

  it('stored nothing for any refused body', async () => {
    expect(await countRows(h, 'notifications', app.app.id)).toBe(0);
    expect(await countRows(h, 'audiences', app.app.id)).toBe(0);
  });

  it.each(['v3', 'v5'] as const)('%s validates like v6', async (version) => {
    for (const [, body, error] of [TO_ROWS[4]!, CRITERIA_ROWS[0]!, PAYLOAD_ROWS[8]!, ENVELOPE_ROWS[1]!]) {
      const res = await postNotification(h, app.keys.write, body, { version });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error });
    }
  });
});
