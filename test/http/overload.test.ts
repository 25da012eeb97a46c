import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createHarness, metricsAuth, TEST_METRICS_TOKEN, type Harness } from '../helpers/harness.js';

/**
 * Load shedding on a real listening server with room for 2 API requests in progress. Two notifications are held
 * in their handler (the test locks the notifications table); a third request is answered 503 at once, health is
 * not counted, and once the two are answered requests go through again. A request whose body never comes holds
 * no place.
 */
describe('load shedding', () => {
  let h: Harness;
  let base: string;
  let key: string;
  beforeAll(async () => {
    h = await createHarness({ env: { MAX_REQUESTS_IN_FLIGHT: '2', METRICS_TOKEN: TEST_METRICS_TOKEN } });
    key = (await h.createApp()).keys.write;
    await h.server.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(h.server.server.address() as net.AddressInfo).port}`;
  });
  afterAll(async () => h?.close());

  const readKey = () => fetch(`${base}/v6/key`, { headers: { authorization: basic(key) } });
  const post = (alert: string) =>
    fetch(`${base}/v6/notifications`, {
      method: 'POST',
      headers: { authorization: basic(key), 'content-type': 'application/json' },
      body: JSON.stringify({ notification: { to: [{ name: 'user_id', criteria: ['u1'] }], payload: { alert } } }),
    });
  const gauge = async (name: string) => {
    const text = await (await fetch(`${base}/metrics`, { headers: metricsAuth })).text();
    return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
  };
  const until = async (check: () => Promise<boolean>) => {
    for (let i = 0; i < 250 && !(await check()); i++) await new Promise((r) => setTimeout(r, 20));
  };

  it('answers 503 {"error"} with Retry-After past the limit, and takes requests again once they are answered', async () => {
    const locker = new pg.Client({ connectionString: h.databaseUrl });
    await locker.connect();
    let held: Promise<Response>[] = [];
    try {
      await locker.query('begin');
      await locker.query('lock table notifications in access exclusive mode');
      held = [post('one'), post('two')];
      await until(async () => (await gauge('pushd_http_requests_in_flight')) === 2);
      expect(await gauge('pushd_http_requests_in_flight')).toBe(2);

      const refused = await readKey();
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(await refused.json()).toEqual({ error: 'overloaded: 2 requests are in progress on this server; retry after 1 s' });
      expect(await gauge('pushd_http_requests_shed_total')).toBe(1);
      // health and readiness are not API requests: they answer whatever the load
      expect((await fetch(`${base}/health`)).status).toBe(200);
    } finally {
      await locker.query('rollback');
      await locker.end();
    }
    // the two held were only slow: both are created
    expect((await Promise.all(held)).map((r) => r.status)).toEqual([201, 201]);
    await until(async () => (await gauge('pushd_http_requests_in_flight')) === 0);
    expect((await readKey()).status).toBe(200);
  });

  it('gives no place to a request whose body never comes', async () => {
    const { port } = h.server.server.address() as net.AddressInfo;
    const sockets = await Promise.all(
      [1, 2, 3].map(async () => {
        const socket = net.connect(port, '127.0.0.1');
        await new Promise((resolve) => socket.once('connect', resolve));
        const answer = new Promise<string>((resolve) => socket.once('data', (d) => resolve(d.toString())));
        // Expect: 100-continue: the server answers once it has taken the request in
        socket.write(
          `POST /v6/notifications HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: ${basic(key)}\r\n` +
            'content-type: application/json\r\ncontent-length: 100\r\nexpect: 100-continue\r\n\r\n',
        );
        expect(await answer).toMatch(/^HTTP\/1\.1 100 Continue/);
        return socket;
      }),
    );
    try {
      expect(await gauge('pushd_http_requests_in_flight')).toBe(0);
      expect((await readKey()).status).toBe(200);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });

  it('counts a request only while it is in progress: many in a row all go through', async () => {
    const statuses = [];
    for (let i = 0; i < 20; i++) statuses.push((await readKey()).status);
    expect(statuses.every((s) => s === 200)).toBe(true);
  });
});

/**
 * The connection cap on a real listening server with room for 3 client connections: a fourth is closed at once,
 * unanswered, and counted; once one of the three closes, a new connection is served.
 */
describe('connection cap', () => {
  let h: Harness;
  let port: number;
  beforeAll(async () => {
    h = await createHarness({ env: { MAX_CONNECTIONS: '3', METRICS_TOKEN: TEST_METRICS_TOKEN } });
    await h.server.listen({ host: '127.0.0.1', port: 0 });
    port = (h.server.server.address() as net.AddressInfo).port;
  });
  afterAll(async () => h?.close());

  /** A keep-alive connection; `get` sends one request on it and answers what came back until the body's end. */
  const connection = async () => {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    let received = '';
    socket.on('data', (d) => (received += d.toString()));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const get = async (path: string) => {
      received = '';
      socket.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: ${metricsAuth.authorization}\r\n\r\n`);
      for (let i = 0; i < 250; i++) {
        const length = Number(/content-length: (\d+)/i.exec(received)?.[1] ?? NaN);
        const body = received.split('\r\n\r\n')[1];
        if (body !== undefined && Buffer.byteLength(body) >= length) return received;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error(`no whole answer to ${path}: ${received}`);
    };
    return { socket, get, closed, received: () => received };
  };

  it('closes a connection past the cap unanswered, counts it, and serves new ones once one closes', async () => {
    const open = await Promise.all([connection(), connection(), connection()]);
    for (const c of open) expect(await c.get('/health')).toMatch(/^HTTP\/1\.1 200/);

    const fourth = await connection();
    fourth.socket.write('GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
    await fourth.closed;
    expect(fourth.received()).toBe('');
    expect(await open[0]!.get('/metrics')).toMatch(/^pushd_http_connections_dropped_total 1$/m);

    open[2]!.socket.destroy();
    await open[2]!.closed;
    let served = '';
    for (let i = 0; i < 50 && !served; i++) {
      const c = await connection();
      served = await Promise.race([c.get('/health').catch(() => ''), c.closed.then(() => '')]);
      if (!served) await new Promise((r) => setTimeout(r, 20));
      else c.socket.destroy();
    }
    expect(served).toMatch(/^HTTP\/1\.1 200/);
    for (const c of open.slice(0, 2)) c.socket.destroy();
  });
});
