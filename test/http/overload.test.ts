import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';

/**
 * Load shedding on a real listening server with room for 2 API requests in progress: two requests whose bodies
 * have not arrived are in progress; a third is answered 503 at once, health is not counted, and once the two are
 * gone requests go through again.
 */
describe('load shedding', () => {
  let h: Harness;
  let base: string;
  let key: string;
  beforeAll(async () => {
    h = await createHarness({ env: { MAX_REQUESTS_IN_FLIGHT: '2' } });
    key = (await h.createApp()).keys.write;
    await h.server.listen({ host: '127.0.0.1', port: 0 });
    const { port } = h.server.server.address() as net.AddressInfo;
    base = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => h?.close());

  /**
   * A POST whose headers are sent and whose body never comes: in progress until its socket is closed. It asks to
   * be told to go on (Expect: 100-continue), which the server answers once it has taken the request in.
   */
  const pending = async (): Promise<net.Socket> => {
    const { port } = h.server.server.address() as net.AddressInfo;
    const socket = net.connect(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    const answer = new Promise<string>((resolve) => socket.once('data', (d) => resolve(d.toString())));
    socket.write(
      `POST /v6/notifications HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: ${basic(key)}\r\n` +
        'content-type: application/json\r\ncontent-length: 100\r\nexpect: 100-continue\r\n\r\n',
    );
    expect(await answer).toMatch(/^HTTP\/1\.1 100 Continue/);
    return socket;
  };
  const readKey = () => fetch(`${base}/v6/key`, { headers: { authorization: basic(key) } });

  it('answers 503 {"error"} with Retry-After past the limit, and takes requests again once they are answered', async () => {
    expect((await readKey()).status).toBe(200);
    const sockets = [await pending(), await pending()];
    try {
      const refused = await readKey();
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(await refused.json()).toEqual({ error: 'overloaded: 2 requests are in progress on this server; retry after 1 s' });
      // health and readiness are not API requests: they answer whatever the load
      expect((await fetch(`${base}/health`)).status).toBe(200);
    } finally {
      for (const s of sockets) s.destroy();
    }
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      status = (await readKey()).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 20));
    }
    expect(status).toBe(200);
  });

  it('counts a request as long as it is in progress, not after its answer: many in a row all go through', async () => {
    const statuses = [];
    for (let i = 0; i < 20; i++) statuses.push((await readKey()).status);
    expect(statuses.every((s) => s === 200)).toBe(true);
  });
});
