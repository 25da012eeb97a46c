import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { serverTls } from '../mocks/tls.js';

/** One request as the receiver got it, its signature checked with the public Standard Webhooks library. */
export interface ReceivedRequest {
  at: number;
  headers: Record<string, string>;
  body: string;
  events: { id: string; type: string; app_id: string; timestamp: string; data: Record<string, unknown> }[];
  /** which of the given secrets verified it */
  verifiedWith: string[];
}

/** What the receiver answers next: a status, a delay, headers; when none is queued, 204. */
export interface Answer {
  status: number;
  delayMs?: number;
  headers?: Record<string, string>;
}

/**
 * A webhook receiver over HTTPS (the test CA's localhost certificate), in the test process: it records each request
 * and answers what the test queued (`answerNext`) or `fallback`.
 */
export async function startReceiver() {
  const requests: ReceivedRequest[] = [];
  const queued: Answer[] = [];
  const secrets: string[] = [];
  let fallback: Answer = { status: 204 };
  const server: Server = createServer(serverTls(), (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
      const verifiedWith = secrets.filter((s) => {
        try {
          new Webhook(s).verify(body, headers);
          return true;
        } catch {
          return false;
        }
      });
      const answer = queued.shift() ?? fallback;
      const received = { at: Date.now(), headers, body, events: JSON.parse(body), verifiedWith };
      pending.add(received);
      const finish = () => {
        pending.delete(received);
        if (answer.status >= 200 && answer.status < 300)
          requests.push({ at: Date.now(), headers, body, events: JSON.parse(body), verifiedWith });
        else failures.push({ at: Date.now(), headers, body, events: JSON.parse(body), verifiedWith });
        if (!res.destroyed) res.writeHead(answer.status, answer.headers ?? {}).end(answer.status === 204 ? undefined : 'answer body');
      };
      if (answer.delayMs) setTimeout(finish, answer.delayMs);
      else finish();
    });
  });
  const failures: ReceivedRequest[] = [];
  const pending = new Set<ReceivedRequest>();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    origin: `https://localhost:${port}`,
    url: `https://localhost:${port}/hooks`,
    /** requests answered 2xx */
    requests,
    /** requests answered otherwise */
    failures,
    /** requests read whole and not answered yet (a delayed answer) */
    pending: () => [...pending],
    /** every event id received (2xx), in order */
    eventIds: () => requests.flatMap((r) => r.events.map((e) => e.id)),
    events: () => requests.flatMap((r) => r.events),
    verifyWith(...list: string[]) {
      secrets.splice(0, secrets.length, ...list);
    },
    answerNext(...answers: Answer[]) {
      queued.push(...answers);
    },
    answerAlways(answer: Answer) {
      fallback = answer;
    },
    reset() {
      requests.length = 0;
      failures.length = 0;
      queued.length = 0;
      fallback = { status: 204 };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
export type Receiver = Awaited<ReturnType<typeof startReceiver>>;
