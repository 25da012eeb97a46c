import { beforeAll, describe, expect, it } from 'vitest';
import { basic, useHarness, type Harness } from '../helpers/harness.js';
import { AUTH_ROUTES, PUBLIC_ROUTES, fillPath, prepareFixture, registeredRoutes, rolesFor, type AuthRoute } from './auth-routes.js';

/**
 * The OpenAPI document describes every answer. Generic over the routes the server registered (as the auth matrix
 * is): each route is in the document with a JSON schema for every status it lists; each lists what its kind of
 * route may answer (a key's refusals, a body's errors, an unknown id); and each status that requests built from
 * the auth matrix's rows actually get back is one the document lists for that route.
 */
interface Operation {
  parameters?: { in: string }[];
  requestBody?: unknown;
  responses?: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}

/**
 * Routes that answer no JSON, kept out of the document: the document itself, Prometheus text, the console's files,
 * the web push scripts, the API reference page and its files.
 */
const NOT_JSON = [
  ...['', '/', '/static/index.html', '/static/swagger-initializer.js', '/*', '/json', '/yaml'].map((p) => `GET /docs${p}`),
  'GET /documentation/json',
  'GET /metrics',
  'GET /console',
  'GET /console/',
  'GET /console/:id',
  'GET /web-push/sw.js',
  'GET /web-push/sdk.js',
];

const BODY_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'];
/** `/v6/devices/{id}` and `/v6/devices/:deviceId` alike: `/v6/devices/:id`. */
const routeKey = (method: string, path: string) => `${method.toUpperCase()} ${path.replace(/\{[^}]+\}|:[A-Za-z_]+/g, ':id')}`;

describe('GET /documentation/json', () => {
  const h = useHarness();
  let operations: Map<string, Operation>;
  beforeAll(async () => {
    const doc = (await h.server.inject({ method: 'GET', url: '/documentation/json' })).json() as {
      paths: Record<string, Record<string, Operation>>;
    };
    operations = new Map(
      Object.entries(doc.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => [routeKey(method, path), op])),
    );
  });
  const described = (route: string) => Object.keys(operations.get(route)?.responses ?? {});

  it('has every route the server registered, each status it lists with a JSON schema, a 2xx among them', () => {
    const registered = registeredRoutes(h.server.printRoutes({ commonPrefix: false })).map((r) => routeKey(r.method, r.path));
    expect(registered.length).toBeGreaterThan(25);
    expect(registered.filter((r) => !NOT_JSON.includes(r) && !operations.has(r))).toEqual([]);
    expect([...operations.keys()].filter((r) => !registered.includes(r))).toEqual([]);

    const unschemed = [...operations].flatMap(([route, op]) =>
      Object.entries(op.responses ?? {})
        .filter(([, r]) => !r.content?.['application/json']?.schema)
        .map(([status]) => `${route} ${status}`),
    );
    expect(unschemed).toEqual([]);
    expect([...operations].filter(([, op]) => !Object.keys(op.responses ?? {}).some((s) => /^2\d\d$/.test(s))).map(([r]) => r)).toEqual([]);
  });

  it("lists what each kind of route may answer: a key's refusals, a body's errors, an unknown id's 404", () => {
    const missing: string[] = [];
    for (const [route, op] of operations) {
      const [method, path] = route.split(' ') as [string, string];
      const expected = [
        ...(/^\/v\d+\//.test(path) ? ['401', '403', '429'] : []),
        // Fastify reads a body on these methods whatever the route: bad JSON, too large, not JSON
        ...(BODY_METHODS.includes(method) ? ['400', '413', '415'] : []),
        ...(op.parameters?.some((p) => p.in === 'query') ? ['400'] : []),
        ...(op.parameters?.some((p) => p.in === 'path') ? ['404'] : []),
      ];
      for (const status of new Set(expected)) if (!described(route).includes(status)) missing.push(`${route} ${status}`);
    }
    expect(missing).toEqual([]);
  });

  it('has a row in the auth matrix (auth-routes.ts) for every route it describes, so the probes below reach each one', () => {
    const rows = [...AUTH_ROUTES, ...PUBLIC_ROUTES].map((r) => routeKey(r.method, r.path));
    expect([...operations.keys()].filter((r) => !rows.includes(r))).toEqual([]);
  });

  describe.each(AUTH_ROUTES.map((r) => [`${r.method} ${r.path}`, r] as const))('%s answers only statuses it describes', (_label, route) => {
    it('to good and bad requests', async () => {
      const statuses = await probe(h, route);
      const key = routeKey(route.method, route.path);
      expect(statuses.filter((s) => !described(key).includes(String(s)))).toEqual([]);
    });
  });

  it.each(PUBLIC_ROUTES.filter((r) => !NOT_JSON.includes(routeKey(r.method, r.path))).map((r) => [r.path, r] as const))(
    '%s answers a status it describes',
    async (_path, route) => {
      const res = await h.server.inject({ method: route.method, url: route.url ?? route.path });
      expect(described(routeKey(route.method, route.path))).toContain(String(res.statusCode));
    },
  );
});

/**
 * The statuses one route answers to: its well-formed request, no key, a key without the role, unknown ids, and for
 * a route that reads a body, a wrong one, invalid JSON, another content type and one over the size limit.
 */
async function probe(h: Harness, route: AuthRoute): Promise<number[]> {
  const fx = await prepareFixture(h);
  const permitted = (['read', 'sdk', 'write'] as const).find((r) => rolesFor(route).includes(r))!;
  const denied = (['read', 'write', 'sdk'] as const).find((r) => !rolesFor(route).includes(r));
  const send = async (opts: { key?: string; path?: string; body?: string; type?: string; fixture?: typeof fx }) => {
    const target = opts.fixture ?? fx;
    const body = opts.body ?? (route.body ? JSON.stringify(route.body(target)) : undefined);
    const res = await h.server.inject({
      method: route.method,
      url: opts.path ?? fillPath(route.path, target.params),
      headers: {
        ...(opts.key ? { authorization: basic(opts.key) } : {}),
        ...(body === undefined ? {} : { 'content-type': opts.type ?? 'application/json' }),
      },
      ...(body === undefined ? {} : { payload: body }),
    });
    return res.statusCode;
  };
  const key = fx.app.keys[permitted];
  const unknownIds = fillPath(route.path, Object.fromEntries(Object.keys(fx.params).map((k) => [k, 'does-not-exist'])));
  // a route that changes its target (erase, cancel) gets one of its own for the well-formed request
  const target = route.fresh ? await prepareFixture(h) : fx;
  const statuses = [
    await send({ key: target.app.keys[permitted], fixture: target }),
    await send({}),
    ...(denied ? [await send({ key: fx.app.keys[denied] })] : []),
    ...(route.path.includes(':') ? [await send({ key, path: unknownIds })] : []),
  ];
  if (route.method === 'GET') {
    statuses.push(await send({ key, path: `${fillPath(route.path, fx.params)}?per=0&page=0&days=0&cursor=x&from=x&to=x&state=x` }));
  } else {
    statuses.push(
      await send({ key, body: '{"bogus": true}' }),
      await send({ key, body: '{"not json' }),
      await send({ key, body: 'text', type: 'text/plain' }),
      await send({ key, body: JSON.stringify({ padding: 'x'.repeat(h.config.BODY_LIMIT_BYTES) }) }),
    );
  }
  expect(statuses[0], `${route.method} ${route.path}: the well-formed request`).toBe(route.success);
  return statuses;
}
