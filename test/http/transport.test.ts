import http from 'node:http';
import net from 'node:net';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardTransport, LINGER_IDLE_MS, LINGER_MAX_MS } from '../../src/http/transport.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { rawExchange, requestHead as head, type RawExchange } from './raw-http.js';

const JSON_TYPE = 'application/json; charset=utf-8';
const LONG_PATH = `/${'a'.repeat(17_000)}`;
const PARSER_TOO_LARGE = { error: 'request: the request line and headers are larger than 16384 bytes' };

/**
 * The edges of HTTP/1.1 below the routes, on a real listening server spoken to over raw sockets: what the HTTP parser
 * refuses, what Node answers on its own, bytes no request declared, and closing a connection while the client still
 * sends.
 */
describe('HTTP transport edges', () => {
  let h: Harness;
  let port: number;
  let key: string;
  beforeAll(async () => {
    h = await createHarness();
    key = (await h.createApp()).keys.write;
    // read when the server starts listening: how often Node looks for heads that did not come in time
    (h.server.server as unknown as { connectionsCheckingInterval: number }).connectionsCheckingInterval = 100;
    await h.server.listen({ host: '127.0.0.1', port: 0 });
    port = (h.server.server.address() as net.AddressInfo).port;
  });
  afterAll(async () => h?.close());

  /** The connection's one answer, its JSON body, and that the server closed the connection after it. */
  const onlyAnswer = (x: RawExchange) => {
    expect(x.error).toBeUndefined();
    expect(x.answers).toHaveLength(1);
    expect(x.rest).toBe('');
    return x.answers[0]!;
  };
  const json = (body: string) => JSON.parse(body) as unknown;

  describe('what the HTTP parser refuses is answered {"error"} and the connection closed', () => {
    it('a request line and headers over 16 KB: 431', async () => {
      const x = await rawExchange(port, [head(`GET ${LONG_PATH} HTTP/1.1`, 'host: x')]);
      const answer = onlyAnswer(x);
      expect(answer.status).toBe(431);
      expect(answer.headers['content-type']).toBe(JSON_TYPE);
      expect(answer.headers.connection).toBe('close');
      expect(json(answer.body)).toEqual(PARSER_TOO_LARGE);
      expect(x.closed).toBe(true);
    });

    it('the same as HEAD: 431 without a body', async () => {
      const x = await rawExchange(port, [head(`HEAD ${LONG_PATH} HTTP/1.1`, 'host: x')], { head: true });
      const answer = onlyAnswer(x);
      expect(answer.status).toBe(431);
      expect(answer.headers['content-length']).toBe(String(JSON.stringify(PARSER_TOO_LARGE).length));
      expect(x.closed).toBe(true); // and nothing came after the head: `rest` is empty
    });

    it.each([
      ['an invalid header name', head('GET /health HTTP/1.1', 'host: x', 'bad header: y'), 'Invalid header token'],
      ['a request line that is no request line', head('HELLO'), 'Invalid method encountered'],
      [
        'both Transfer-Encoding and Content-Length',
        head('POST /v6/notifications HTTP/1.1', 'host: x', 'transfer-encoding: chunked', 'content-length: 3') + '0\r\n\r\n',
        "Content-Length can't be present with Transfer-Encoding",
      ],
    ])('%s: 400 naming the reason', async (_what, request, reason) => {
      const x = await rawExchange(port, [request]);
      const answer = onlyAnswer(x);
      expect(answer.status).toBe(400);
      expect(answer.headers.connection).toBe('close');
      expect(json(answer.body)).toEqual({ error: `request: is not valid HTTP/1.1 (${reason})` });
      expect(x.closed).toBe(true);
    });

    const chunkedPost = () =>
      head(
        'POST /v6/notifications HTTP/1.1',
        'host: x',
        `authorization: ${basic(key)}`,
        'content-type: application/json',
        'transfer-encoding: chunked',
      );
    it.each([
      ['while the route reads it', () => [chunkedPost() + '2\r\n{}\r\n', 100, 'zz\r\n']],
      ['before the route reads it (in the bytes of its head)', () => [chunkedPost() + '2\r\n{}\r\nzz\r\n']],
    ])('a body whose chunks break %s: 400 through the route, once', async (_when, parts) => {
      const x = await rawExchange(port, parts());
      const answer = onlyAnswer(x);
      expect(answer.status).toBe(400);
      expect(answer.headers.connection).toBe('close');
      expect(json(answer.body)).toEqual({ error: 'request: is not valid HTTP/1.1 (Invalid character in chunk size)' });
      expect(x.closed).toBe(true);
    });

    it('chunk extensions over 16 KB: 413 through the route', async () => {
      const x = await rawExchange(port, [chunkedPost() + `2;${'x'.repeat(20_000)}\r\n{}\r\n0\r\n\r\n`]);
      const answer = onlyAnswer(x);
      expect(answer.status).toBe(413);
      expect(json(answer.body)).toEqual({ error: 'body: chunk extensions are too large' });
      expect(x.closed).toBe(true);
    });

    // Node reports no bytes with it: the request may be a HEAD, so the answer has no body
    it('a head that does not come in time: 408, without a body', async () => {
      const headersTimeout = h.server.server.headersTimeout;
      h.server.server.headersTimeout = 500;
      try {
        const x = await rawExchange(port, ['GET /health HTTP/1.1\r\nhost: x\r\n'], { waitMs: 3000 });
        const answer = onlyAnswer(x);
        expect(answer.status).toBe(408);
        expect(answer.headers['content-length']).toBe('0');
        expect(x.closed).toBe(true);
      } finally {
        h.server.server.headersTimeout = headersTimeout;
      }
    });
  });

  describe('what Node answers on its own is answered {"error"}', () => {
    it('an HTTP/1.1 request without Host: 400', async () => {
      const answer = onlyAnswer(await rawExchange(port, [head('GET /health HTTP/1.1')], { waitMs: 500 }));
      expect(answer.status).toBe(400);
      expect(json(answer.body)).toEqual({ error: 'host: header is required in HTTP/1.1' });
    });

    it("HEAD refused by the router (a path that is not UTF-8): 400 without a body, like the parser's", async () => {
      const x = await rawExchange(port, [head('HEAD /v6/notifications/%ff HTTP/1.1', 'host: x')], { head: true, waitMs: 500 });
      const answer = onlyAnswer(x);
      expect(answer.status).toBe(400);
      expect(answer.headers['content-length']).toBe(String(JSON.stringify({ error: 'path: is not valid percent-encoded UTF-8' }).length));
    });

    it('an Expect other than 100-continue: 417', async () => {
      const answer = onlyAnswer(await rawExchange(port, [head('GET /health HTTP/1.1', 'host: x', 'expect: later')], { waitMs: 500 }));
      expect(answer.status).toBe(417);
      expect(json(answer.body)).toEqual({ error: 'expect: later is not supported (only 100-continue)' });
    });

    it('CONNECT: 404 like any method no route answers, where Node closed without an answer', async () => {
      const x = await rawExchange(port, [head('CONNECT example.com:443 HTTP/1.1', 'host: example.com:443')]);
      const answer = onlyAnswer(x);
      expect(answer.status).toBe(404);
      expect(json(answer.body)).toEqual({ error: 'not found' });
      expect(x.closed).toBe(true);
    });
  });

  describe('bytes no request declared get no answer of their own: the request is answered once, then the connection closes', () => {
    it.each([
      ['a GET with a body and no length', head('GET /health HTTP/1.1', 'host: x') + '{"a":1}'],
      ['bytes after a request that asked to close', head('GET /health HTTP/1.1', 'host: x', 'connection: close') + 'hello'],
      [
        'a request after one that asked to close',
        head('GET /health HTTP/1.1', 'host: x', 'connection: close') + head('GET /health HTTP/1.1', 'host: x'),
      ],
    ])('%s', async (_what, request) => {
      const x = await rawExchange(port, [request]);
      const answer = onlyAnswer(x);
      expect(answer.status).toBe(200);
      expect(answer.headers.connection).toBe('close');
      expect(json(answer.body)).toEqual({ status: 'ok' });
      expect(x.closed).toBe(true);
    });

    it('a large body without a length on /documentation/json: the whole document, 20 times in 20', async () => {
      const body = Buffer.alloc(2 * 1024 * 1024, '{');
      const outcomes = [];
      for (let i = 0; i < 20; i++) {
        const x = await rawExchange(port, [head('GET /documentation/json HTTP/1.1', 'host: x'), body], {
          until: (r) => r.answers.length > 0,
        });
        const answer = x.answers[0];
        outcomes.push({ status: answer?.status, error: x.error, whole: answer ? json(answer.body) !== null : false });
      }
      expect(outcomes).toEqual(Array.from({ length: 20 }, () => ({ status: 200, error: undefined, whole: true })));
    });
  });

  describe('a body over BODY_LIMIT_BYTES', () => {
    const post = (length: number) =>
      head(
        'POST /v6/notifications HTTP/1.1',
        'host: x',
        `authorization: ${basic(key)}`,
        'content-type: application/json',
        `content-length: ${length}`,
      );

    it('an 11 MB POST reads its 413 {"error"}, 10 times in 10, also where the client sends it all before reading', async () => {
      const body = Buffer.alloc(11 * 1024 * 1024, ' ');
      const outcomes = [];
      for (let i = 0; i < 10; i++) {
        for (const readAfterSending of [false, true]) {
          const x = await rawExchange(port, [post(body.length), body], { readAfterSending, until: (r) => r.answers.length > 0 });
          outcomes.push({ error: x.error, answers: x.answers.map((a) => ({ status: a.status, body: json(a.body) })) });
        }
      }
      const refused = { error: undefined, answers: [{ status: 413, body: { error: 'body is too large' } }] };
      expect(outcomes).toEqual(Array.from({ length: 20 }, () => refused));
    });

    it('the same through fetch, 10 times in 10', async () => {
      const statuses = [];
      for (let i = 0; i < 10; i++) {
        const res = await fetch(`http://127.0.0.1:${port}/v6/notifications`, {
          method: 'POST',
          headers: { authorization: basic(key), 'content-type': 'application/json' },
          body: Buffer.alloc(11 * 1024 * 1024, ' '),
        });
        statuses.push([res.status, await res.json()]);
      }
      expect(statuses).toEqual(Array.from({ length: 10 }, () => [413, { error: 'body is too large' }]));
    });

    // The server's reset, once it stops reading, is what fails the client's next write.
    it('a client that goes on sending is read from until LINGER_MAX_MS after the answer, then reset', async () => {
      const trickle = Array.from({ length: (LINGER_MAX_MS + 2000) / 250 }, () => [250, Buffer.alloc(1024, ' ')]).flat();
      const x = await rawExchange(port, [post(100 * 1024 * 1024), '{}', ...trickle], {
        keepSending: true,
        waitMs: LINGER_MAX_MS + 3000,
      });
      expect(x.answers.map((a) => a.status)).toEqual([413]);
      expect(x.error).toMatch(/ECONNRESET|EPIPE/);
      expect(x.errorAfterMs).toBeGreaterThanOrEqual(LINGER_MAX_MS - 300);
      expect(x.errorAfterMs).toBeLessThan(LINGER_MAX_MS + 1500);
    });

    it('one that sends nothing more for LINGER_IDLE_MS is reset then', async () => {
      const within = [500, ' ', 500, ' ', 500, ' '];
      const x = await rawExchange(port, [post(100 * 1024 * 1024), '{}', ...within, LINGER_IDLE_MS + 1000, ' ', 500, ' '], {
        keepSending: true,
        waitMs: LINGER_IDLE_MS + 5000,
      });
      expect(x.answers.map((a) => a.status)).toEqual([413]);
      expect(x.error).toMatch(/ECONNRESET|EPIPE/);
      // not the writes in the first 1.5 s: those after LINGER_IDLE_MS without any
      expect(x.errorAfterMs).toBeGreaterThanOrEqual(1500 + LINGER_IDLE_MS);
    });
  });
});

describe('a closing server', () => {
  it('does not wait for keep-alive connections busy when it began closing: each ends once answered', async () => {
    const app = Fastify({ keepAliveTimeout: 30_000 });
    guardTransport(app);
    app.get('/slow', async () => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      return 'done';
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const port = (app.server.address() as net.AddressInfo).port;
    const agent = new http.Agent({ keepAlive: true });
    let lastAnswer = 0;
    const answers = Array.from(
      { length: 5 },
      () =>
        new Promise<string>((resolve, reject) => {
          http
            .get({ port, path: '/slow', agent }, (res) => {
              let body = '';
              res.on('data', (chunk: Buffer) => (body += chunk.toString()));
              res.on('end', () => {
                lastAnswer = performance.now();
                resolve(body);
              });
            })
            .on('error', reject);
        }),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));

    await app.close();
    const closedAt = performance.now();
    expect(await Promise.all(answers)).toEqual(Array(5).fill('done'));
    // Node's own close alone waits out the 30 s keepAliveTimeout
    expect(closedAt - lastAnswer).toBeLessThan(1_000);
    agent.destroy();
  }, 15_000);
});
