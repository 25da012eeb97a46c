import { describe, expect, it } from 'vitest';
import { useHarness } from '../helpers/harness.js';

/** The OpenAPI document describes every answer: each operation declares its success response with a schema. */
describe('GET /documentation/json', () => {
  const h = useHarness();

  it('lists every API route with a schema for its success answer', async () => {
    const doc = (await h.server.inject({ method: 'GET', url: '/documentation/json' })).json() as {
      paths: Record<string, Record<string, { responses?: Record<string, { content?: Record<string, { schema?: unknown }> }> }>>;
    };
    const operations = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({ route: `${method.toUpperCase()} ${path}`, responses: op.responses ?? {} })),
    );
    expect(operations.length).toBeGreaterThan(25);
    const missing = operations
      .filter(
        ({ responses }) =>
          !Object.entries(responses).some(([status, r]) => /^2\d\d$/.test(status) && r.content?.['application/json']?.schema),
      )
      .map((o) => o.route);
    expect(missing).toEqual([]);
    // the routes a key opens also document the refusals
    const unauthorised = operations.filter((o) => o.route.includes('/v6/') && !o.responses['401']).map((o) => o.route);
    expect(unauthorised).toEqual([]);
  });
});
