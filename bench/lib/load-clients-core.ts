import http from 'node:http';
import { Pool } from 'undici';
import type { Answers, ClientsOptions, Post } from './load-clients.js';

/** One post and its answer's status: the body read to its end, as a client does before reusing the connection. */
type PostOne = (post: Post) => Promise<number>;

/** undici's client costs about half of node:http's CPU a request, which it takes from the service's 2 cores */
function undiciPoster({ base, authorization, clients }: ClientsOptions): { postOne: PostOne; close(): Promise<void> } {
  const pool = new Pool(base, { connections: clients, pipelining: 1 });
  return {
    async postOne({ path, body }) {
      const answer = await pool.request({
        path,
        method: 'POST',
        headers: { authorization, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      await answer.body.dump();
      return answer.statusCode;
    },
    close: () => pool.close(),
  };
}

/** What most backends post with: node:http over a keep-alive http.Agent of `clients` sockets (HTTP/1.1). */
function httpPoster({ base, authorization, clients }: ClientsOptions): { postOne: PostOne; close(): Promise<void> } {
  // every socket kept open between posts (Node keeps 256 idle by default and closes the rest): a client that
  // reconnects for most posts measures its own and the kernel's connection setup, not the service
  const agent = new http.Agent({ keepAlive: true, maxSockets: clients, maxFreeSockets: clients });
  const url = new URL(base);
  return {
    postOne: ({ path, body }) =>
      new Promise((resolve, reject) => {
        const data = JSON.stringify(body);
        const request = http.request(
          {
            agent,
            hostname: url.hostname,
            port: url.port,
            path,
            method: 'POST',
            headers: { authorization, 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
          },
          (answer) => {
            answer.on('data', () => {});
            answer.on('end', () => resolve(answer.statusCode!));
            answer.on('error', reject);
          },
        );
        request.on('error', reject);
        request.end(data);
      }),
    close: async () => agent.destroy(),
  };
}

/** The clients of LoadClients, wherever they run: each of `clients` posts its next as soon as its last is answered. */
export function clientsPosting(options: ClientsOptions, onAnswered: () => void) {
  const poster = options.agent === 'http' ? httpPoster(options) : undiciPoster(options);
  return {
    async postAll(list: Post[], perSecond: number): Promise<Answers> {
      const latencies = new Float64Array(list.length);
      const statuses = new Uint16Array(list.length);
      const late = new Float64Array(list.length);
      let next = 0;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: options.clients }, async () => {
          while (next < list.length) {
            const i = next++;
            // paced, a post counts from when it was due: a wait for a free client is part of what it saw
            const dueAt = perSecond > 0 ? t0 + (i * 1000) / perSecond : performance.now();
            const wait = dueAt - performance.now();
            if (wait > 0) await new Promise((r) => setTimeout(r, wait));
            // a timer may fire up to a millisecond early: then the post counts from when it went
            const start = perSecond > 0 ? Math.min(dueAt, performance.now()) : performance.now();
            late[i] = performance.now() - start;
            // a connection closed or reset unanswered counts as status 0, as a client's error: the run goes on
            statuses[i] = await poster.postOne(list[i]!).catch(() => 0);
            latencies[i] = performance.now() - start;
            onAnswered();
          }
        }),
      );
      // epoch ms: each process's and thread's performance.now() counts from when it started
      return { latencies, statuses, late, startedAt: performance.timeOrigin + t0, endedAt: performance.timeOrigin + performance.now() };
    },
    close: () => poster.close(),
  };
}
