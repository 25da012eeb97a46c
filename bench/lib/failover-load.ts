/**
 * The failover benchmark's clients (bench/failover.ts): one-device notifications at a steady rate, each retried after
 * a 503 as Retry-After says with its Idempotency-Key; the ceiling's clients posting as fast as answered; and a
 * broadcast posted the same careful way.
 */
import { percentile } from './setup.js';

/** a request's answer is given up on after this long: it counts as unanswered */
const ANSWER_TIMEOUT_MS = 30_000;
/** a client retries a 503 this long after the request first went out, then gives up (counted, not lost) */
export const CLIENT_PATIENCE_MS = 60_000;

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface Attempt {
  at: number;
  ms: number;
  /** the HTTP status, or 0 for no answer (an error or the timeout) */
  status: number;
}

/** A device the clients send to. */
export interface Target {
  id: string;
  token: string | null;
}

export type Post = (key: string, body: unknown, headers?: Record<string, string>) => Promise<Response>;

/** POST /v6/notifications of the service at `base`, with a write key. */
export function poster(base: string): Post {
  return (key, body, headers = {}) =>
    fetch(`${base}/v6/notifications`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`:${key}`).toString('base64')}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS),
    });
}

/** Answered 201 a second, the answers' p50 and p99, and the rest. */
export function summary(xs: Attempt[], seconds: number): string {
  const ms = xs.map((a) => a.ms).sort((a, b) => a - b);
  const ok = xs.filter((a) => a.status === 201).length;
  return (
    `${(ok / seconds).toFixed(0)} answered 201 a second, answers p50 ${percentile(ms, 50).toFixed(0)} ms / ` +
    `p99 ${percentile(ms, 99).toFixed(0)} ms, ${xs.filter((a) => a.status === 503).length} answered 503, ` +
    `${xs.filter((a) => a.status !== 201 && a.status !== 503).length} other or none`
  );
}

/** The clients run on this machine: what they take of its cores is not the service's. */
export const cpuShare = (cpuSeconds: number, seconds: number) =>
  `the clients' own CPU ${((100 * cpuSeconds) / seconds).toFixed(0)} % of a core`;

/** One-device notifications at `rate` a second, each to a target of its own, until stopped or the targets run out. */
export class UnicastLoad {
  readonly attempts: Attempt[] = [];
  /** the tokens of the notifications answered 201 */
  readonly accepted: string[] = [];
  /** the notifications their client gave up on (refused past its patience, or answered otherwise) */
  readonly gaveUp: number[] = [];
  sent = 0;
  private sending = true;
  private readonly inFlight = new Set<Promise<void>>();
  private running: Promise<void> | null = null;

  constructor(private readonly opts: { post: Post; key: string; targets: Target[]; rate: number }) {}

  start(): void {
    this.running = (async () => {
      const start = performance.now();
      const { targets, rate } = this.opts;
      while (this.sending && this.sent < targets.length) {
        const due = Math.floor(((performance.now() - start) / 1000) * rate);
        while (this.sent < due && this.sent < targets.length) {
          const p = this.one(this.sent++);
          this.inFlight.add(p);
          void p.finally(() => this.inFlight.delete(p));
        }
        await sleep(5);
      }
    })();
  }

  get ranOut(): boolean {
    return this.sent >= this.opts.targets.length;
  }

  /** No more begin; answers once those begun have their last answer. */
  async stop(): Promise<void> {
    this.sending = false;
    await this.running;
    await Promise.all(this.inFlight);
  }

  private async one(i: number): Promise<void> {
    const started = performance.now();
    const target = this.opts.targets[i]!;
    for (;;) {
      const at = performance.now();
      let status = 0;
      let retryAfter = 1;
      try {
        const res = await this.opts.post(
          this.opts.key,
          { notification: { to: [{ name: 'device_id', criteria: [target.id] }], payload: { alert: `unicast ${i}` } } },
          { 'idempotency-key': `failover-${i}` },
        );
        status = res.status;
        retryAfter = Number(res.headers.get('retry-after') ?? 1);
        await res.arrayBuffer();
      } catch {
        status = 0;
      }
      this.attempts.push({ at, ms: performance.now() - at, status });
      if (status === 201) return void this.accepted.push(target.token!);
      if (status !== 503 || performance.now() - started > CLIENT_PATIENCE_MS) return void this.gaveUp.push(i);
      await sleep(retryAfter * 1000);
    }
  }
}

/** `clients` clients, each posting its next one-device notification as soon as answered, for `seconds`. */
export async function measureCeiling(post: Post, key: string, targets: Target[], run: { seconds: number; clients: number }) {
  const attempts: Attempt[] = [];
  const accepted: string[] = [];
  const cpuBefore = process.cpuUsage();
  let next = 0;
  const until = performance.now() + run.seconds * 1000;
  await Promise.all(
    Array.from({ length: run.clients }, async () => {
      while (performance.now() < until && next < targets.length) {
        const target = targets[next++]!;
        const at = performance.now();
        let status = 0;
        try {
          const res = await post(key, {
            notification: { to: [{ name: 'device_id', criteria: [target.id] }], payload: { alert: 'ceiling' } },
          });
          status = res.status;
          await res.arrayBuffer();
        } catch {
          status = 0;
        }
        attempts.push({ at, ms: performance.now() - at, status });
        if (status === 201) accepted.push(target.token!);
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  const seconds = (attempts.reduce((end, a) => Math.max(end, a.at + a.ms), 0) - attempts[0]!.at) / 1000;
  console.log(
    `ceiling (${run.clients} clients as fast as answered, no broadcast, no fault, ${seconds.toFixed(1)} s): ` +
      `${summary(attempts, seconds)}; ${cpuShare((cpu.user + cpu.system) / 1e6, seconds)}`,
  );
  return { attempts, accepted };
}

/** A broadcast, posted as the one-device notifications are: with a key, again after a 503 or no answer, counted. */
export async function postBroadcast(post: Post, attempts: Attempt[], key: string, fault: string): Promise<string> {
  const started = performance.now();
  for (;;) {
    const at = performance.now();
    const res = await post(
      key,
      { notification: { to: '*', payload: { alert: `broadcast ${fault}` } } },
      { 'idempotency-key': fault },
    ).catch(() => undefined);
    attempts.push({ at, ms: performance.now() - at, status: res?.status ?? 0 });
    if (res?.status === 201) return ((await res.json()) as { id: string }).id;
    const why = res ? `${res.status}: ${await res.text()}` : 'no answer';
    if ((res && res.status !== 503) || performance.now() - started > CLIENT_PATIENCE_MS) throw new Error(`the ${fault} broadcast: ${why}`);
    await sleep(1000);
  }
}
