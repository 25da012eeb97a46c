import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, useHarness } from '../helpers/harness.js';
import { prepareFixture, registeredRoutes, type Fixture } from './auth-routes.js';
import {
  fittingRole,
  mutatedJson,
  notification,
  requestSpec,
  SEEDS,
  token,
  type Framing,
  type RequestSpec,
  type Sent,
} from './fuzz-requests.js';

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
