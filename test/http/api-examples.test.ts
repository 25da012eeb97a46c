import { beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLE_IDS } from '../../src/http/api-examples.js';
import { basic, useHarness } from '../helpers/harness.js';
import { AUTH_ROUTES, fillPath, prepareFixture, rolesFor, type AuthRoute, type Fixture } from './auth-routes.js';

/**
 * Every request body of the OpenAPI document has an example, and each example, sent as a client copies it from /docs
 * to a listening server, answers what a well-formed request to that route answers (the auth matrix's `success`).
 * The ids an example names stand for objects of the app: each is swapped for one the fixture created.
 */
interface Media {
  example?: unknown;
  examples?: Record<string, { value: unknown }>;
}
type Document = { paths: Record<string, Record<string, { requestBody?: { content: Record<string, Media> } }>> };

const normal = (method: string, path: string) => `${method.toUpperCase()} ${path.replace(/\{[^}]+\}|:[A-Za-z_]+/g, ':id')}`;

/** Which fixture object each example id stands for. */
const FIXTURE_FOR: Record<keyof typeof EXAMPLE_IDS, keyof Fixture['params']> = {
  notification: 'notificationId',
  message: 'messageId',
  activity: 'activityId',
  device: 'deviceId',
  user: 'userId',
};

describe('the request body examples of the API reference', () => {
  const h = useHarness();
  let doc: Document;
  let base: string;
  beforeAll(async () => {
    base = await h.server.listen({ host: '127.0.0.1', port: 0 });
    doc = (await (await fetch(`${base}/documentation/json`)).json()) as Document;
  });

  const withBodies = () =>
    Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([, op]) => op.requestBody)
        .map(([method, op]) => ({ route: normal(method, path), media: op.requestBody!.content['application/json'] })),
    );
  const examplesOf = (media: Media | undefined) => [
    ...Object.values(media?.examples ?? {}).map((e) => e.value),
    ...(media && 'example' in media ? [media.example] : []),
  ];

  it('exist for every route that takes a body', () => {
    const routes = withBodies();
    expect(routes.length).toBeGreaterThan(25);
    expect(routes.filter((r) => examplesOf(r.media).length === 0).map((r) => r.route)).toEqual([]);
  });

  it('each answer, sent to the server, what a well-formed request answers', async () => {
    const failures: string[] = [];
    let sent = 0;
    for (const { route, media } of withBodies()) {
      const row = AUTH_ROUTES.find((r) => normal(r.method, r.path) === route);
      if (!row) {
        failures.push(`${route}: no row in the auth matrix to say what it answers`);
        continue;
      }
      for (const [i, example] of examplesOf(media).entries()) {
        // a fixture of its own each time: an example may change or take what it names
        const fx = await prepareFixture(h);
        const res = await send(row, fx, example);
        sent++;
        if (res.status !== row.success) failures.push(`${route} example ${i + 1}: ${res.status} ${await res.text()}`);
      }
    }
    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThan(25);
  }, 180_000);

  async function send(row: AuthRoute, fx: Fixture, example: unknown): Promise<Response> {
    let body = JSON.stringify(example);
    for (const [name, id] of Object.entries(EXAMPLE_IDS))
      body = body.replaceAll(id, fx.params[FIXTURE_FOR[name as keyof typeof EXAMPLE_IDS]]!);
    // the key an integrator uses for it: the sdk key where a phone calls, else the least that may
    const role = (['sdk', 'read', 'write'] as const).find((r) => rolesFor(row).includes(r))!;
    return fetch(`${base}${fillPath(row.path, fx.params)}`, {
      method: row.method,
      headers: { authorization: basic(fx.app.keys[role]), 'content-type': 'application/json' },
      body,
    });
  }
});
