import fc from 'fast-check';
import { AUTH_ROUTES, rolesFor, type Fixture, type Role } from './auth-routes.js';

/**
 * The requests test/http/fuzz.test.ts sends: valid requests of every route (the auth matrix's and a few more), mutated
 * with hostile values and keys, framed and addressed oddly. `requestSpec` generates one; the test builds it.
 */

// ---- hostile values ----

const LONE_SURROGATES = ['\ud800', '\udbff', '\udc00', '\udfff', 'a\ud83d', '\ude00b', '\udc00\ud800'];
const NUMBERS = [0, -0, -1, 1.5, -1e-320, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 + 2, -(2 ** 63), 1e21, 1e308, -1e308, 5e-324];
/** Numbers written as JSON text (JSON.stringify cannot produce them): overflow to Infinity, huge integers, exponents. */
const RAW_NUMBERS = ['1e400', '-1e400', '123456789012345678901234567890', '1E2', '-0.0', '0.1e-400'];
const DATE_LIKE = [
  '2024-13-45',
  '9999-12-31T23:59:59Z',
  '+275760-09-13T00:00:00Z',
  '-271821-04-20T00:00:00Z',
  'now-1d',
  'now+1000000y',
  '',
];
const KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  '',
  ' ',
  'a.b',
  '$where',
  'x\u0000',
  '\ud800',
  'platform',
  'token',
  'custom',
  'user_attributes',
  'events',
  'name',
  'date',
  'criteria',
  'not_filter',
  'payload',
  'to',
  'audience',
  'type',
  'value',
  'alert',
  'badge',
  'location',
  'custom.string.x',
  'aps',
  '_nid',
  'gcm.x',
];

/** Placeholders replaced in the JSON text after stringifying (JSON.stringify cannot write these). */
const deepMarker = (levels: number, kind: 'array' | 'object') => `\u0001deep:${kind}:${levels}\u0001`;
const rawMarker = (text: string) => `\u0001raw:${text}\u0001`;

const hostileString = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.string({ unit: 'grapheme', maxLength: 10 }),
  fc.string({ maxLength: 10 }).map((s) => `${s}\u0000${s}`),
  fc.constantFrom(...LONE_SURROGATES),
  fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => `x${String.fromCharCode(c)}`),
  fc.constantFrom(...DATE_LIKE),
  fc.integer({ min: 256, max: 6000 }).map((n) => 'x'.repeat(n)),
  fc.constantFrom('é'.repeat(3000), '🎉'.repeat(1500), '\u202e\u200b', '\\', '"', "'; drop table devices; --", '%00', '*'),
  fc.constantFrom('toString', '__proto__', 'constructor', 'valueOf', 'hasOwnProperty'),
);

const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: hostileString, weight: 4 },
  { arbitrary: fc.constantFrom(...NUMBERS), weight: 2 },
  { arbitrary: fc.double(), weight: 1 },
  { arbitrary: fc.integer(), weight: 1 },
  { arbitrary: fc.constantFrom(...RAW_NUMBERS).map(rawMarker), weight: 1 },
  { arbitrary: fc.constantFrom(true, false, null), weight: 2 },
  { arbitrary: fc.jsonValue({ maxDepth: 3 }), weight: 2 },
  { arbitrary: fc.array(hostileString, { maxLength: 60 }), weight: 1 },
  {
    arbitrary: fc
      .tuple(fc.oneof(fc.integer({ min: 20, max: 40 }), fc.constant(10_000)), fc.constantFrom<'array' | 'object'>('array', 'object'))
      .map(([levels, kind]) => deepMarker(levels, kind)),
    weight: 1,
  },
);

const hostileKey = fc.oneof(fc.constantFrom(...KEYS), fc.string({ maxLength: 12 }), fc.string({ unit: 'binary', maxLength: 8 }));

// ---- body mutations ----

type Mutation =
  | { op: 'replace'; at: number; value: unknown }
  | { op: 'add'; at: number; key: string; value: unknown }
  | { op: 'delete'; at: number }
  | { op: 'duplicate'; at: number; value: unknown; first: boolean };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('replace' as const), at: fc.nat(), value: hostileValue }), weight: 5 },
  { arbitrary: fc.record({ op: fc.constant('add' as const), at: fc.nat(), key: hostileKey, value: hostileValue }), weight: 3 },
  { arbitrary: fc.record({ op: fc.constant('delete' as const), at: fc.nat() }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('duplicate' as const), at: fc.nat(), value: hostileValue, first: fc.boolean() }), weight: 1 },
);

type Node = { parent: Record<string, unknown> | unknown[] | null; key: string | number; value: unknown };

function nodes(root: { body: unknown }): Node[] {
  const out: Node[] = [];
  const visit = (parent: Node['parent'], key: string | number, value: unknown) => {
    out.push({ parent, key, value });
    if (Array.isArray(value)) value.forEach((v, i) => visit(value, i, v));
    else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) visit(value as Record<string, unknown>, k, v);
  };
  visit(root as unknown as Record<string, unknown>, 'body', root.body);
  return out;
}

/** An own property even for "__proto__" (plain assignment would set the prototype instead). */
const setOwn = (obj: Record<string, unknown>, key: string, value: unknown) =>
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });

/** Applies the mutations to a copy of the body and returns its JSON text, placeholders expanded. */
export function mutatedJson(body: unknown, mutations: Mutation[]): string {
  const root = { body: structuredClone(body) };
  let dup = 0;
  const duplicates = new Map<string, string>();
  for (const m of mutations) {
    const all = nodes(root);
    const node = all[m.at % all.length]!;
    const parent = node.parent as Record<string | number, unknown>;
    if (m.op === 'replace') parent[node.key] = m.value;
    else if (m.op === 'delete' && node.parent !== root) {
      if (Array.isArray(node.parent)) node.parent.splice(node.key as number, 1);
      else delete parent[node.key];
    } else if (m.op === 'add' && node.value && typeof node.value === 'object') {
      if (Array.isArray(node.value)) node.value.push(m.value);
      else setOwn(node.value as Record<string, unknown>, m.key, m.value);
    } else if (m.op === 'duplicate' && node.value && typeof node.value === 'object' && !Array.isArray(node.value)) {
      const obj = node.value as Record<string, unknown>;
      const [existing] = Object.keys(obj);
      if (existing === undefined) continue;
      const placeholder = `\u0001dup${dup++}\u0001`;
      duplicates.set(JSON.stringify(placeholder), JSON.stringify(existing));
      // First or last: JSON.parse keeps the last of duplicate keys.
      const entries = Object.entries(obj);
      for (const k of Object.keys(obj)) delete obj[k];
      if (m.first) setOwn(obj, placeholder, m.value);
      for (const [k, v] of entries) setOwn(obj, k, v);
      if (!m.first) setOwn(obj, placeholder, m.value);
    }
  }
  return JSON.stringify(root.body).replace(/"\\u0001([^"]*?)\\u0001"/g, (match, inner: string) => {
    const dupKey = duplicates.get(match);
    if (dupKey) return dupKey;
    const deep = /^deep:(array|object):(\d+)$/.exec(inner);
    if (deep) {
      const n = Number(deep[2]);
      return deep[1] === 'array' ? `${'['.repeat(n)}${']'.repeat(n)}` : `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;
    }
    if (inner.startsWith('raw:')) return inner.slice(4);
    return match;
  });
}

// ---- valid requests to start from ----

export const token = () => `fuzz${Math.random().toString(16).slice(2)}${'cd'.repeat(20)}`;
export const notification = (to: unknown, payload: Record<string, unknown>) => ({ notification: { to, payload } });
const EXTRA_SEEDS: { method: string; path: string; body: (fx: Fixture) => unknown }[] = [
  {
    method: 'POST',
    path: '/v6/notifications',
    body: () =>
      notification(
        [
          { name: 'custom.integer.level', criteria: [{ gte: 1, lt: 10 }] },
          { name: 'location', criteria: [{ point: { latitude: 48.8, longitude: 2.3 }, distance: 10, unit: 'km' }] },
          { name: 'events.opened', criteria: [{ gt: 'now-7d' }], not_filter: true },
        ],
        {
          alert: 'a',
          title: 't',
          badge: 1,
          sound: 's',
          collapse_key: 'c',
          interruption_level: 'active',
          relevance_score: 0.5,
          extra: { a: [1] },
        },
      ),
  },
  { method: 'POST', path: '/v6/notifications', body: (fx) => notification({ audience: fx.params.audienceId }, { alert: 'a' }) },
  { method: 'POST', path: '/v6/notifications', body: () => notification('*', { content_available: true }) },
  {
    method: 'POST',
    path: '/v6/devices',
    body: () => ({
      device: {
        platform: 'ios',
        token: token(),
        locale: 'fr_FR',
        time_zone: 'Europe/Paris',
        badge: 2,
        user_id: 'fuzz-user',
        user_email: 'a@example.com',
        tags: ['a'],
        country: 'FR',
        notifications_allowed: 'Enabled',
        location: { latitude: 1, longitude: 2 },
        custom: {
          plan: { type: 'string', value: 'pro' },
          n: { type: 'integer', value: [1, 2] },
          d: { type: 'date', value: '2024-01-01T00:00:00Z' },
        },
      },
    }),
  },
  {
    method: 'PUT',
    path: '/v6/devices/:id',
    body: () => ({ device: { token: token(), custom: { f: { type: 'float', value: 1.5 }, b: { type: 'boolean', value: true } } } }),
  },
  {
    method: 'POST',
    path: '/v6/devices/:id/events',
    body: () => ({ events: [{ name: 'opened', date: '2024-01-01T00:00:00Z' }, { name: 'x' }] }),
  },
  { method: 'PUT', path: '/v6/users/:id', body: () => ({ user: { user_attributes: { age: { type: 'integer', value: 3 } } } }) },
];

const normalise = (path: string) => path.replace(/:[A-Za-z_]+/g, ':id');

/** The narrowest key a route admits (read < sdk < write); write for a route the auth matrix does not list. */
export function fittingRole(route: { method: string; path: string }): Role {
  const known = AUTH_ROUTES.find((r) => r.method === route.method && normalise(r.path) === route.path);
  return known ? (['read', 'sdk', 'write'] as const).find((r) => rolesFor(known).includes(r))! : 'write';
}
export const SEEDS = [
  ...AUTH_ROUTES.filter((r) => r.body).map((r) => ({ method: r.method, path: normalise(r.path), body: r.body! })),
  ...EXTRA_SEEDS,
];

// ---- odd ids and query strings (already URL-encoded) ----

const ODD_SEGMENTS = [
  '%00',
  'a%00b',
  '%ED%A0%80',
  '%FF',
  '%',
  '%zz',
  '%2F',
  '..',
  '.',
  '-1',
  '0',
  '1e309',
  'null',
  '__proto__',
  'constructor',
  '00000000-0000-0000-0000-000000000000',
  'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF',
  'x'.repeat(300),
  encodeURIComponent('🎉'),
  '%20',
];
const QUERY_KEYS = ['cursor', 'per', 'page', 'from', 'to', 'x', '__proto__', 'per[]', ''];
const QUERY_VALUES = [
  '',
  '0',
  '-1',
  '1',
  '1000',
  '1001',
  '99999999999999999999',
  '1e3',
  'NaN',
  'abc',
  '%00',
  '%ED%A0%80',
  '%FF',
  'WzEsIngiLCJ5Il0',
  'eyJhIjoxfQ',
  '2024-01-01T00:00:00Z',
  'now-1d',
  '9999-99-99',
  '-271821-04-20T00:00:00Z',
  '%2B275760-09-13T00:00:00Z',
  '0000-01-01T00:00:00Z',
  ...[
    '[1,"x","00000000-0000-0000-0000-000000000000"]',
    '[1,null,null]',
    '2024-01-01T00:00:00.000Z|00000000-0000-0000-0000-000000000000',
    '-271821-04-20T00:00:00.000Z|00000000-0000-0000-0000-000000000000',
    '+275760-09-13T00:00:00.000Z|00000000-0000-0000-0000-000000000000',
    '\u0000|\u0000',
  ].map((cursor) => Buffer.from(cursor).toString('base64url')),
];

const segment = fc.oneof(
  { arbitrary: fc.constant('valid'), weight: 6 },
  { arbitrary: fc.constantFrom(...ODD_SEGMENTS), weight: 3 },
  { arbitrary: fc.string({ unit: 'grapheme', maxLength: 12 }).map(encodeURIComponent), weight: 1 },
);
const query = fc.oneof(
  { arbitrary: fc.constant(''), weight: 3 },
  {
    arbitrary: fc
      .array(
        fc.tuple(
          fc.constantFrom(...QUERY_KEYS),
          fc.oneof(fc.constantFrom(...QUERY_VALUES), fc.string({ maxLength: 8 }).map(encodeURIComponent)),
        ),
        {
          minLength: 1,
          maxLength: 4,
        },
      )
      .map((pairs) => `?${pairs.map(([k, v]) => `${k}=${v}`).join('&')}`),
    weight: 2,
  },
  { arbitrary: fc.constantFrom('?', '?&&', '?per', '?=1', '?cursor=%', '?a[b][c]=1'), weight: 1 },
);

export type Framing = 'json' | 'truncated' | 'empty' | 'garbage' | 'invalid-utf8' | 'none';
const OTHER_CONTENT_TYPES = [
  'application/json; charset=utf-8',
  'application/JSON',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=utf-16',
  'application/vnd.api+json',
  ';;',
  'none',
];

export const requestSpec = fc.record({
  route: fc.nat(),
  otherMethod: fc.oneof(
    { arbitrary: fc.constant(null), weight: 12 },
    { arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'), weight: 1 },
  ),
  seed: fc.nat(),
  ownSeed: fc.boolean(),
  mutations: fc.array(mutation, { maxLength: 4 }),
  framing: fc.oneof(
    { arbitrary: fc.constant<Framing>('json'), weight: 20 },
    { arbitrary: fc.constantFrom<Framing>('truncated', 'empty', 'garbage', 'invalid-utf8', 'none'), weight: 3 },
  ),
  cut: fc.double({ min: 0, max: 1, noNaN: true }),
  garbage: fc.string({ unit: 'binary', maxLength: 40 }),
  contentType: fc.oneof(
    { arbitrary: fc.constant('application/json'), weight: 5 },
    { arbitrary: fc.constantFrom(...OTHER_CONTENT_TYPES), weight: 1 },
  ),
  segments: fc.array(segment, { minLength: 3, maxLength: 3 }),
  query,
  credential: fc.oneof(
    { arbitrary: fc.constant('fitting' as const), weight: 8 },
    { arbitrary: fc.constantFrom('read', 'write', 'sdk', 'none', 'bearer', 'wrong-user', 'garbage'), weight: 4 },
  ),
  validId: fc.nat(),
  forwardedFor: fc.oneof(
    { arbitrary: fc.constant(null), weight: 8 },
    { arbitrary: fc.constantFrom('not-an-ip', '999.1.1.1', 'fe80::1%eth0', '1.2.3.4, x', '::ffff:1.2.3.4', '203.0.113.9', ''), weight: 1 },
  ),
});
export type RequestSpec = typeof requestSpec extends fc.Arbitrary<infer T> ? T : never;

export interface Sent {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string | Buffer;
}
