import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { basic, useHarness, type Harness } from '../helpers/harness.js';
import {
  AUTH_ROUTES,
  PUBLIC_ROUTES,
  fillPath,
  prepareFixture,
  registeredRoutes,
  rolesFor,
  type AuthRoute,
  type Fixture,
  type Role,
} from './auth-routes.js';

/**
 * The auth matrix on every route of AUTH_ROUTES: each credential case against each route.
 * 401 always carries {"error":"unauthorized"} and a Basic challenge; 403 the roles message.
 */

type Expect = 'success' | 401 | 403;

interface Case {
  name: string;
  /** The Authorization header, or undefined for none. */
  header: (fx: Fixture, ctx: { h: Harness; route: AuthRoute }) => Promise<string | undefined> | string | undefined;
  expect: (route: AuthRoute) => Expect;
}

/** The role used when a case needs "a key that may call this route": the narrowest one that may. */
const permittedRole = (route: AuthRoute): Role => (['read', 'sdk', 'write'] as const).find((r) => rolesFor(route).includes(r))!;
const permittedKey = (fx: Fixture, route: AuthRoute) => fx.app.keys[permittedRole(route)];

const CASES: Case[] = [
  { name: 'no Authorization header', header: () => undefined, expect: () => 401 },
  { name: 'a Bearer token instead of Basic', header: (fx, { route }) => `Bearer ${permittedKey(fx, route)}`, expect: () => 401 },
  {
    name: 'Basic without a colon',
    header: (fx, { route }) => `Basic ${Buffer.from(permittedKey(fx, route)).toString('base64')}`,
    expect: () => 401,
  },
  { name: 'Basic with garbage', header: () => 'Basic !!!not-base64!!!', expect: () => 401 },
  { name: 'an empty key', header: (fx) => basic('', fx.app.app.bundle_id), expect: () => 401 },
  { name: 'an unknown key', header: () => basic(randomBytes(24).toString('base64url')), expect: () => 401 },
  {
    name: 'a revoked key',
    header: async (fx, { h, route }) => {
      const service = new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() });
      const { key } = await service.createKey(fx.app.app.id, permittedRole(route));
      await service.revokeKey(key);
      return basic(key);
    },
    expect: () => 401,
  },
  { name: 'a wrong username', header: (fx, { route }) => basic(permittedKey(fx, route), 'com.someone.else'), expect: () => 401 },
  {
    name: "another app's bundle id as username",
    header: async (fx, { h, route }) => basic(permittedKey(fx, route), (await h.createApp()).app.bundle_id),
    expect: () => 401,
  },
  {
    name: 'the bundle id with different case',
    header: (fx, { route }) => basic(permittedKey(fx, route), fx.app.app.bundle_id.toUpperCase()),
    expect: () => 401,
  },
  {
    name: 'username = bundle id',
    header: (fx, { route }) => basic(permittedKey(fx, route), fx.app.app.bundle_id),
    expect: () => 'success',
  },
  { name: 'empty username', header: (fx, { route }) => basic(permittedKey(fx, route), ''), expect: () => 'success' },
  {
    name: 'lower-case "basic" scheme',
    header: (fx, { route }) => basic(permittedKey(fx, route)).replace(/^Basic/, 'basic'),
    expect: () => 'success',
  },
  ...(['read', 'write', 'sdk'] as const).map((role): Case => ({
    name: `a ${role} key`,
    header: (fx) => basic(fx.app.keys[role], fx.app.app.bundle_id),
    expect: (route) => (rolesFor(route).includes(role) ? 'success' : 403),
  })),
];

function send(h: Harness, route: AuthRoute, fx: Fixture, authorization: string | undefined, override?: { path?: string; body?: unknown }) {
  const body = override && 'body' in override ? override.body : route.body?.(fx);
  return h.server.inject({
    method: route.method,
    url: override?.path ?? fillPath(route.path, fx.params),
    headers: {
      ...(authorization === undefined ? {} : { authorization }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
}

function expectOutcome(res: { statusCode: number; headers: Record<string, unknown>; body: string }, expected: Expect, route: AuthRoute) {
  if (expected === 401) {
    expect(res.statusCode).toBe(401);
    expect(JSON.parse(res.body)).toEqual({ error: 'unauthorized' });
    expect(res.headers['www-authenticate']).toBe('Basic realm="push"');
  } else if (expected === 403) {
    expect(res.statusCode).toBe(403);
    expect(JSON.parse(res.body)).toEqual({ error: 'your api client does not have the correct roles' });
  } else {
    expect(res.statusCode, res.body).toBe(route.success);
  }
}

describe('auth matrix', () => {
  const h = useHarness();

  describe.each(AUTH_ROUTES.map((r) => [`${r.method} ${r.path}`, r] as const))('%s', (_label, route) => {
    let fx: Fixture;
    beforeAll(async () => {
      fx = await prepareFixture(h);
    });

    it.each(CASES.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
      const target = route.fresh ? await prepareFixture(h) : fx;
      const res = await send(h, route, target, await c.header(target, { h, route }));
      expectOutcome(res, c.expect(route), route);
    });

    it('authentication comes before validation and lookup: no key + bad body / unknown id -> 401', async () => {
      const path = fillPath(route.path, Object.fromEntries(Object.keys(fx.params).map((k) => [k, 'does-not-exist'])));
      const res = await send(h, route, fx, undefined, { path, ...(route.body ? { body: { bogus: true } } : {}) });
      expectOutcome(res, 401, route);
    });

    // The public API has clients send `Content-Type: application/json` on every request, those without a body too.
    if (!route.body) {
      it('Content-Type: application/json with no body is a request without one', async () => {
        const target = route.fresh ? await prepareFixture(h) : fx;
        const res = await h.server.inject({
          method: route.method,
          url: fillPath(route.path, target.params),
          headers: { authorization: basic(permittedKey(target, route)), 'content-type': 'application/json' },
          payload: '',
        });
        expectOutcome(res, 'success', route);
      });
    }

    // Routes every role may call (GET /v6/devices/:id) have nobody to refuse: no test rather than a skipped one.
    const denied = (['read', 'write', 'sdk'] as const).find((r) => !rolesFor(route).includes(r));
    if (denied) {
      it('permission comes before validation: a key without the role + bad body -> 403', async () => {
        const res = await send(h, route, fx, basic(fx.app.keys[denied]), route.body ? { body: { bogus: true } } : undefined);
        expectOutcome(res, 403, route);
      });
    }
  });

  describe.each(PUBLIC_ROUTES.map((r) => [`${r.method} ${r.path}`, r] as const))('%s (no key needed)', (_label, route) => {
    it('answers every role, a bad credential and none alike, never 401 or 403', async () => {
      const { keys } = await h.createApp();
      const headers = [undefined, basic(keys.read), basic(keys.write), basic(keys.sdk), 'Basic !!!not-base64!!!', basic('unknown')];
      const statuses: number[] = [];
      for (const authorization of headers) {
        const res = await h.server.inject({
          method: route.method,
          url: route.url ?? route.path,
          headers: authorization ? { authorization } : {},
        });
        statuses.push(res.statusCode);
      }
      expect(statuses[0]).not.toBe(401);
      expect(statuses[0]).not.toBe(403);
      expect(statuses).toEqual(headers.map(() => statuses[0]));
    });
  });

  it('has a row for every route the server registered, and no row for a route it does not have', () => {
    const registered = registeredRoutes(h.server.printRoutes({ commonPrefix: false })).map((r) => `${r.method} ${r.path}`);
    expect(registered).toContain('GET /v6/notifications/:id'); // the tree parser sees nested routes
    const listed = [...AUTH_ROUTES, ...PUBLIC_ROUTES].map((r) => `${r.method} ${r.path.replace(/:[A-Za-z]+/g, ':id')}`);
    expect(new Set(listed).size, 'a route listed twice').toBe(listed.length);
    for (const r of registered) expect(listed, `${r} has no row in AUTH_ROUTES or PUBLIC_ROUTES`).toContain(r);
    for (const r of listed) expect(registered, `${r} is listed but the server has no such route`).toContain(r);
  });
});
