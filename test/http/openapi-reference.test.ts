import { describe, expect, it, vi } from 'vitest';
import type { z } from 'zod';
import { useHarness } from '../helpers/harness.js';

/** Every route the server registers, as fastify's onRoute hook hands it over (the server's own list, not a copy). */
const seen = vi.hoisted(() => [] as { method: string; url: string; schema?: Record<string, unknown> }[]);
vi.mock('fastify', async (importOriginal) => {
  const original = await importOriginal<typeof import('fastify')>();
  const withRouteLog = ((opts?: unknown) => {
    const app = (original.default as (o?: unknown) => ReturnType<typeof original.default>)(opts);
    app.addHook('onRoute', (route: { method: string | string[]; url: string; schema?: unknown }) => {
      for (const method of [route.method].flat()) seen.push({ method, url: route.url, schema: route.schema as Record<string, unknown> });
    });
    return app;
  }) as unknown as typeof original.default;
  return { ...original, default: withRouteLog, fastify: withRouteLog };
});

/** A media type: one example is `example`, more are `examples` by name. */
interface Media {
  example?: unknown;
  examples?: Record<string, { value: unknown }>;
}

interface Operation {
  security?: Record<string, string[]>[];
  requestBody?: { content: Record<string, Media> };
  responses: Record<string, { content?: Record<string, Media> }>;
}
type Document = { paths: Record<string, Record<string, Operation>>; components: { securitySchemes: Record<string, unknown> } };

/** The routes that are pages and files rather than API: the console, the reference page and its assets. */
const NOT_API = [/^\/console/, /^\/docs/, /^\/documentation\/json$/, /^\/web-push\/(sw|sdk)\.js$/, /^\/metrics$/];
const openApiPath = (url: string) => url.replace(/:([A-Za-z_]+)/g, '{$1}');

describe('the OpenAPI document as the reference page shows it', () => {
  const h = useHarness();
  const document = async () => (await h.server.inject({ method: 'GET', url: '/documentation/json' })).json() as Document;

  it('has every route the server registers, but the pages and their files', async () => {
    const doc = await document();
    const api = seen.filter((r) => r.method !== 'HEAD' && !NOT_API.some((re) => re.test(r.url)));
    expect(api.length).toBeGreaterThan(50);
    for (const r of api) expect(doc.paths[openApiPath(r.url)]?.[r.method.toLowerCase()], `${r.method} ${r.url}`).toBeDefined();
    const hidden = seen.filter((r) => r.method !== 'HEAD' && NOT_API.some((re) => re.test(r.url)));
    for (const r of hidden) expect(r.schema?.hide, `${r.method} ${r.url} is not API, so it is hidden`).toBe(true);
    const documented = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`));
    expect(documented.length).toBe(api.length);
  });

  it('declares for every operation its answers, its errors and the keys it takes', async () => {
    const doc = await document();
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['readKey', 'sdkKey', 'writeKey']);
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops)) {
        const name = `${method.toUpperCase()} ${path}`;
        const statuses = Object.keys(op.responses);
        expect(
          statuses.some((s) => /^2/.test(s)),
          `${name}: a success answer`,
        ).toBe(true);
        expect(op.security, `${name}: security`).toBeDefined();
        if (op.security!.length > 0) {
          expect(statuses, `${name}: the key errors`).toEqual(expect.arrayContaining(['401', '403', '429']));
          expect(op.security!.every((s) => Object.keys(s).every((k) => k in doc.components.securitySchemes))).toBe(true);
        } else expect(path, `${name} takes no key`).toMatch(/^\/(health|ready)$/);
        if (path.startsWith('/v'))
          expect(
            statuses.some((s) => /^4/.test(s)),
            `${name}: its 4xx`,
          ).toBe(true);
      }
  });

  it('names the key roles each route takes as the auth matrix does', async () => {
    const doc = await document();
    const keysOf = (method: string, path: string) => doc.paths[path]![method]!.security!.map((s) => Object.keys(s)[0]).sort();
    expect(keysOf('post', '/v6/notifications')).toEqual(['writeKey']);
    expect(keysOf('get', '/v6/notifications/{id}')).toEqual(['readKey', 'writeKey']);
    expect(keysOf('post', '/v6/devices')).toEqual(['sdkKey', 'writeKey']);
  });

  it('has examples, and each validates against the schema the route checks it with', async () => {
    const doc = await document();
    let count = 0;
    for (const r of seen.filter((s) => s.schema && !s.schema.hide && s.method !== 'HEAD')) {
      const op = doc.paths[openApiPath(r.url)]![r.method.toLowerCase()]!;
      const check = (schema: unknown, media: Media | undefined, where: string) => {
        const examples = Object.entries(media?.examples ?? {}).map(([name, { value }]) => [name, value] as const);
        if (media && 'example' in media) examples.push(['example', media.example]);
        for (const [name, value] of examples) {
          const parsed = (schema as z.ZodType).safeParse(value);
          expect(parsed.success, `${r.method} ${r.url} ${where} example ${name}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
          count++;
        }
      };
      check(r.schema!.body, op.requestBody?.content['application/json'], 'body');
      const responses = (r.schema!.response ?? {}) as Record<string, unknown>;
      for (const [status, answer] of Object.entries(op.responses))
        check(responses[status], answer.content?.['application/json'], `answer ${status}`);
    }
    expect(count).toBeGreaterThanOrEqual(20);
  });
});
