import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, useHarness } from '../helpers/harness.js';
import { AUTH_ROUTES, prepareFixture, registeredRoutes, rolesFor, type Fixture, type Role } from './auth-routes.js';

/**
 * Fuzzing every route the server registered (read from its route table, so a route added later is fuzzed too)
 * with mutations of valid requests: hostile values and keys anywhere in the body, duplicate keys, truncated JSON,
 * other content types, odd ids, cursors, query strings and X-Forwarded-For values, each of the keys and none. No answer may be a 5xx and
 * no connection may drop, and every 4xx says why in {"error": "..."}; the server must be healthy after. Most requests go through server.inject, one batch in
 * ten over a real socket. FUZZ_SEED replays a run (a failure prints its seed and request); FUZZ_BATCHES scales it.
 */

const SEED = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const BATCHES = Number(process.env.FUZZ_BATCHES ?? 1100);
const BATCH_SIZE = 10;

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
function mutatedJson(body: unknown, mutations: Mutation[]): string {
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

const token = () => `fuzz${Math.random().toString(16).slice(2)}${'cd'.repeat(20)}`;
const notification = (to: unknown, payload: Record<string, unknown>) => ({ notification: { to, payload } });
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
function fittingRole(route: { method: string; path: string }): Role {
  const known = AUTH_ROUTES.find((r) => r.method === route.method && normalise(r.path) === route.path);
  return known ? (['read', 'sdk', 'write'] as const).find((r) => rolesFor(known).includes(r))! : 'write';
}
const SEEDS = [
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

type Framing = 'json' | 'truncated' | 'empty' | 'garbage' | 'invalid-utf8' | 'none';
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

const requestSpec = fc.record({
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
type RequestSpec = typeof requestSpec extends fc.Arbitrary<infer T> ? T : never;

interface Sent {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string | Buffer;
}

describe('fuzz: no 5xx, no dropped connection, a healthy server after', () => {
  // Rate limits off: this test is about hostile input, thousands of requests from one address (test/http/rate-limit.test.ts tests limits).
  const h = useHarness({ env: { RATE_LIMIT_PER_SECOND: '0', RATE_LIMIT_SDK_PER_SECOND: '0' } });
  let fx: Fixture;
  /** Ids that exist, by the path segment before the :id (a route with another gets any of them). */
  let validIds: Record<string, string[]>;
  let routes: { method: string; path: string }[];
  let port: number;
  const agent = new http.Agent({ keepAlive: true, maxSockets: BATCH_SIZE });
  const counts = { inject: 0, socket: 0, byStatus: new Map<number, number>(), byRoute: new Map<string, number>() };

  beforeAll(async () => {
    fx = await prepareFixture(h);
    await freshDevices();
    routes = registeredRoutes(h.server.printRoutes({ commonPrefix: false }));
    await h.server.listen({ port: 0, host: '127.0.0.1' });
    port = (h.server.server.address() as AddressInfo).port;
  });
  afterAll(() => agent.destroy());

  /**
   * Live devices and users for the valid ids, renewed every few batches: the fuzz erases some, and requests on
   * erased devices stop at 451 instead of reaching deeper code.
   */
  let generation = 0;
  async function freshDevices(): Promise<void> {
    const users = Array.from({ length: 4 }, (_, i) => `fuzz-user-${generation}-${i}`);
    generation++;
    const devices = await Promise.all(
      Array.from({ length: 12 }, async (_, i) => {
        const res = await h.server.inject({
          method: 'POST',
          url: '/v6/devices',
          headers: { authorization: basic(fx.app.keys.sdk), 'content-type': 'application/json' },
          payload: JSON.stringify({ device: { platform: i % 2 ? 'ios' : 'android', token: token(), user_id: users[i % users.length] } }),
        });
        if (res.statusCode !== 201) throw new Error(`registering a fuzz device failed: ${res.statusCode} ${res.body}`);
        return res.json().device.id as string;
      }),
    );
    validIds = {
      notifications: [fx.params.notificationId!],
      audiences: [fx.params.audienceId!],
      devices: [fx.params.deviceId!, ...devices],
      users: [fx.params.userId!, ...users],
    };
  }

  function build(spec: RequestSpec): Sent {
    const route = routes[spec.route % routes.length]!;
    const own = SEEDS.filter((s) => s.method === route.method && s.path === route.path);
    const pool = spec.ownSeed && own.length ? own : SEEDS;
    const seedBody = pool[spec.seed % pool.length]!.body(fx);
    let i = 0;
    const path = route.path.replace(/([^/]+)\/:id/g, (_, collection: string) => {
      const seg = spec.segments[i++ % spec.segments.length]!;
      if (seg !== 'valid') return `${collection}/${seg}`;
      const ids = validIds[collection] ?? Object.values(validIds).flat();
      return `${collection}/${encodeURIComponent(ids[spec.validId % ids.length]!)}`;
    });
    const headers: Record<string, string> = {};
    const keys = fx.app.keys;
    const credential = spec.credential === 'fitting' ? fittingRole(route) : spec.credential;
    if (credential === 'read' || credential === 'write' || credential === 'sdk') headers.authorization = basic(keys[credential]);
    else if (credential === 'bearer') headers.authorization = `Bearer ${keys.write}`;
    else if (credential === 'wrong-user') headers.authorization = basic(keys.write, 'not.the.bundle');
    else if (credential === 'garbage') headers.authorization = 'Basic %%%';
    if (spec.contentType !== 'none') headers['content-type'] = spec.contentType;
    if (spec.forwardedFor !== null) headers['x-forwarded-for'] = spec.forwardedFor;
    const json = mutatedJson(seedBody, spec.mutations);
    const body: Record<Framing, string | Buffer | undefined> = {
      json,
      truncated: json.slice(0, Math.floor(json.length * spec.cut)),
      empty: '',
      garbage: spec.garbage,
      'invalid-utf8': Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff, 0xfe, 0xc0, 0x80, 0xed, 0xa0, 0x80]), Buffer.from('"}')]),
      none: undefined,
    };
    return { method: spec.otherMethod ?? route.method, url: `${path}${spec.query}`, headers, body: body[spec.framing] };
  }

  const describeRequest = (sent: Sent) => {
    const text = sent.body === undefined ? '(none)' : Buffer.isBuffer(sent.body) ? `(bytes) ${sent.body.toString('hex')}` : sent.body;
    const shown = text.length > 4000 ? `${text.slice(0, 4000)}... (${text.length} characters)` : text;
    return `seed ${SEED} (FUZZ_SEED=${SEED} replays the run)\n${sent.method} ${sent.url}\nheaders: ${JSON.stringify(sent.headers)}\nbody: ${shown}`;
  };

  interface Answer {
    status: number;
    body: string;
  }

  async function viaInject(sent: Sent): Promise<Answer> {
    const res = await h.server.inject({ method: sent.method as 'GET', url: sent.url, headers: sent.headers, payload: sent.body });
    return { status: res.statusCode, body: res.body };
  }

  function viaSocket(sent: Sent): Promise<Answer> {
    return new Promise((resolve, reject) => {
      // Node frames a GET/HEAD/DELETE body only when told its length; unframed, it would read as a second request.
      const length = sent.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(sent.body)) };
      const headers = { ...sent.headers, ...length };
      const req = http.request({ host: '127.0.0.1', port, method: sent.method, path: sent.url, headers, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.on('error', (err) => reject(new Error(`connection dropped: ${err.message}`)));
      req.end(sent.body);
    });
  }

  /** What is wrong with an answer: a 5xx, or a 4xx without {"error": "<message>"} (HEAD answers have no body). */
  function answerProblem(sent: Sent, answer: Answer): string | null {
    if (answer.status >= 500) return `answered ${answer.status}: ${answer.body}`;
    if (answer.status < 400 || sent.method === 'HEAD') return null;
    try {
      const error = (JSON.parse(answer.body) as { error?: unknown }).error;
      if (typeof error === 'string' && error.length > 0) return null;
    } catch {
      // not JSON: reported below
    }
    return `answered ${answer.status} without {"error": "..."}: ${answer.body}`;
  }

  it(`${BATCHES * BATCH_SIZE} generated requests across every route`, async () => {
    let batch = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(requestSpec, { minLength: BATCH_SIZE, maxLength: BATCH_SIZE }), async (specs) => {
        if (batch % 25 === 24) await freshDevices();
        const overSocket = batch++ % 10 === 0;
        await Promise.all(
          specs.map(async (spec) => {
            const sent = build(spec);
            let answer: Answer;
            try {
              answer = overSocket ? await viaSocket(sent) : await viaInject(sent);
            } catch (err) {
              throw new Error(`${(err as Error).message}\n${describeRequest(sent)}`);
            }
            const { status } = answer;
            if (overSocket) counts.socket++;
            else counts.inject++;
            counts.byStatus.set(status, (counts.byStatus.get(status) ?? 0) + 1);
            const route = routes[spec.route % routes.length]!;
            counts.byRoute.set(`${route.method} ${route.path}`, (counts.byRoute.get(`${route.method} ${route.path}`) ?? 0) + 1);
            const problem = answerProblem(sent, answer);
            if (problem) throw new Error(`${problem}\n${describeRequest(sent)}`);
          }),
        );
      }),
      { seed: SEED, numRuns: BATCHES, endOnFailure: true },
    );
    console.log(
      `fuzz seed ${SEED}: ${counts.inject} injected + ${counts.socket} over a socket; statuses ${JSON.stringify(Object.fromEntries(counts.byStatus))}`,
    );
    expect(counts.inject + counts.socket).toBe(BATCHES * BATCH_SIZE);
    // Every registered route was fuzzed, and requests got past authentication and validation to storage.
    expect([...counts.byRoute.keys()].sort()).toEqual(routes.map((r) => `${r.method} ${r.path}`).sort());
    for (const status of [200, 201, 202]) expect(counts.byStatus.get(status) ?? 0, `answers ${status}`).toBeGreaterThan(0);
  }, 180_000); // 10-20 s on a quiet machine; the margin is for a busy one

  it('the server is healthy after: /health, /ready, and valid requests work, in process and over the socket', async () => {
    const sdk = { authorization: basic(fx.app.keys.sdk), 'content-type': 'application/json' };
    const write = { authorization: basic(fx.app.keys.write), 'content-type': 'application/json' };
    const create = JSON.stringify(notification('*', { alert: 'after the fuzz' }));
    for (const send of [viaInject, viaSocket]) {
      const device = JSON.stringify({ device: { platform: 'ios', token: token() } });
      expect((await send({ method: 'GET', url: '/health', headers: {} })).status).toBe(200);
      expect((await send({ method: 'GET', url: '/ready', headers: {} })).status).toBe(200);
      expect((await send({ method: 'POST', url: '/v6/devices', headers: sdk, body: device })).status).toBe(201);
      expect((await send({ method: 'POST', url: '/v6/notifications', headers: write, body: create })).status).toBe(201);
    }
  });
});
