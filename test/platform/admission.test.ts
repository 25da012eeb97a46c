import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitInTime } from '../../src/http/overload.js';
import { Admission, ANSWER_WINDOW_MS, ANSWERS_PER_WINDOW } from '../../src/platform/admission.js';
import { Metrics } from '../../src/platform/metrics.js';

/**
 * The standing-queue reading of the answers, on a clock of its own: a window whose fastest answer is slow says
 * every request of it waited; two such windows in a row refuse new requests, and a window with too few answers
 * (an idle server's one slow request, or one refusing everything) takes the refusal back.
 */
describe('admission: a standing queue read from the answers', () => {
  const BOUND_MS = 1000;
  // whole ms, so window edges add up exactly
  const t0 = Math.round(performance.now()) + 10_000_000;
  /** an admission that has seen two windows of 50 answers of `ms` each: a standing queue when `ms` is past half the bound */
  const afterTwoWindows = (ms: number, bound = BOUND_MS) => {
    const a = new Admission(bound);
    answer(a, t0, 50, ms);
    answer(a, t0 + ANSWER_WINDOW_MS, 50, ms);
    return a;
  };
  /** `count` answers of `ms` each, spread over the window that starts at `from` */
  const answer = (a: Admission, from: number, count: number, ms: number) => {
    for (let i = 0; i < count; i++) a.answered(ms, from + (i * (ANSWER_WINDOW_MS - 1)) / count);
  };

  it('refuses after two windows whose fastest answer took over half the bound, and admits once they are fast', () => {
    const a = new Admission(BOUND_MS);
    answer(a, t0, 50, 600);
    expect(a.overloaded(t0 + ANSWER_WINDOW_MS)).toBe(false); // one slow window: a burst answered at once
    answer(a, t0 + ANSWER_WINDOW_MS, 50, 600);
    expect(a.overloaded(t0 + 2 * ANSWER_WINDOW_MS)).toBe(true);
    expect(a.standingMs(t0 + 2 * ANSWER_WINDOW_MS)).toBe(600);
    // the backlog answered while refusing: still slow, still refused
    answer(a, t0 + 2 * ANSWER_WINDOW_MS, 30, 700);
    expect(a.overloaded(t0 + 3 * ANSWER_WINDOW_MS)).toBe(true);
    // one fast answer in a window is enough to say no queue stands
    answer(a, t0 + 3 * ANSWER_WINDOW_MS, 29, 700);
    a.answered(20, t0 + 3 * ANSWER_WINDOW_MS + 10);
    expect(a.overloaded(t0 + 4 * ANSWER_WINDOW_MS)).toBe(false);
  });

  it('takes the refusal back when a window has too few answers to tell (everything refused, the backlog gone)', () => {
    const a = afterTwoWindows(800);
    expect(a.overloaded(t0 + 2 * ANSWER_WINDOW_MS)).toBe(true);
    answer(a, t0 + 2 * ANSWER_WINDOW_MS, ANSWERS_PER_WINDOW - 1, 800);
    expect(a.overloaded(t0 + 3 * ANSWER_WINDOW_MS)).toBe(false);
  });

  it('does not refuse for slow answers an idle server gives one at a time, nor for answers within the share', () => {
    const a = new Admission(BOUND_MS);
    for (let w = 0; w < 4; w++) answer(a, t0 + w * ANSWER_WINDOW_MS, 3, 900);
    expect(a.overloaded(t0 + 4 * ANSWER_WINDOW_MS)).toBe(false);
    const b = new Admission(BOUND_MS);
    for (let w = 0; w < 4; w++) answer(b, t0 + w * ANSWER_WINDOW_MS, 100, 490);
    expect(b.overloaded(t0 + 4 * ANSWER_WINDOW_MS)).toBe(false);
  });

  it('forgets a slow stretch once windows passed without answers', () => {
    expect(afterTwoWindows(800).overloaded(t0 + 5 * ANSWER_WINDOW_MS)).toBe(false);
  });

  it('is off with a bound of 0', () => {
    expect(afterTwoWindows(5000, 0).overloaded(t0 + 2 * ANSWER_WINDOW_MS)).toBe(false);
  });
});

/**
 * The same over real HTTP, through the plugin that tells the admission each answer's time: a route whose answers
 * take 600–900 ms (a wait no queue reports, as a slow flush or a starved CPU makes) against a 1 s bound.
 */
describe('admission: the answers of a real server', () => {
  let app: FastifyInstance;
  let base: string;
  const admission = new Admission(1000);
  const metrics = new Metrics();

  beforeAll(async () => {
    app = Fastify();
    await app.register(admitInTime, { admission, metrics });
    app.post('/v6/slow', async () => {
      await new Promise((r) => setTimeout(r, 600 + Math.random() * 300));
      return { ok: true };
    });
    // as a transactional send's answer waits for its gateway
    app.post('/v6/remote', { config: { answersAfterRemote: true } }, async () => {
      await new Promise((r) => setTimeout(r, 600 + Math.random() * 300));
      return { ok: true };
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(() => app.close());

  const timedPost = async (path = '/v6/slow') => {
    const t0 = performance.now();
    const res = await fetch(`${base}${path}`, { method: 'POST' });
    const body = await res.json();
    return { res, body, ms: performance.now() - t0 };
  };

  it('refuses new requests at once while every answer is slow, and takes them again once the slow ones are gone', async () => {
    const refused: number[] = [];
    let accepted = 0;
    const until = performance.now() + 3000;
    await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        // started apart, so the answers come spread out as under real load rather than 40 at a time
        await new Promise((r) => setTimeout(r, i * 20));
        while (performance.now() < until) {
          const { res, body, ms } = await timedPost();
          if (res.status === 201 || res.status === 200) accepted += 1;
          else {
            expect(res.status).toBe(503);
            expect(res.headers.get('retry-after')).toBe('1');
            expect(body).toEqual({ error: 'overloaded: work waits more than 1000 ms on this server; retry after 1 s' });
            refused.push(ms);
            await new Promise((r) => setTimeout(r, 100));
          }
        }
      }),
    );
    expect(accepted).toBeGreaterThanOrEqual(40);
    expect(refused.length).toBeGreaterThan(0);
    // refused on arrival, not after the route's 600 ms or more
    expect(Math.max(...refused)).toBeLessThan(350);
    // windows without answers take the refusal back
    await new Promise((r) => setTimeout(r, 2 * ANSWER_WINDOW_MS + 100));
    expect((await timedPost()).res.status).toBe(200);
  });

  it('does not count answers that wait for a gateway or a receiver elsewhere', async () => {
    const statuses: number[] = [];
    const until = performance.now() + 2500;
    await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        await new Promise((r) => setTimeout(r, i * 20));
        while (performance.now() < until) statuses.push((await timedPost('/v6/remote')).res.status);
      }),
    );
    expect(statuses.length).toBeGreaterThanOrEqual(80);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
  });
});
