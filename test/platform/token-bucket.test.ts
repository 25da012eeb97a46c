import { describe, expect, it } from 'vitest';
import { addressBucket } from '../../src/http/rate-limit.js';
import { createLogger } from '../../src/platform/logger.js';
import { leaseOf, RedisTokenBuckets, takeToken, takeTokens } from '../../src/platform/token-bucket.js';
import { once } from 'node:events';
import { connect } from 'node:net';
import { Redis } from 'ioredis';
import { redisUrl } from '../helpers/harness.js';

describe('takeToken', () => {
  const limit = { perSecond: 4, burst: 2 };

  it('starts full, spends one token a request, and says when the next one comes', () => {
    let step = takeToken(undefined, limit, 1000);
    expect(step.result).toEqual({ allowed: true, retryAfterMs: 0 });
    step = takeToken(step.state, limit, 1000);
    expect(step.result.allowed).toBe(true);
    step = takeToken(step.state, limit, 1000);
    expect(step.result).toEqual({ allowed: false, retryAfterMs: 250 });
    step = takeToken(step.state, limit, 1100); // 0.4 tokens
    expect(step.result).toEqual({ allowed: false, retryAfterMs: 150 });
    step = takeToken(step.state, limit, 1250);
    expect(step.result.allowed).toBe(true);
  });

  it('never holds more than the burst, however long it waited', () => {
    let step = takeToken({ tokens: 0, atMs: 0 }, limit, 3_600_000);
    expect(step.state.tokens).toBe(1);
    step = takeToken(step.state, limit, 3_600_000);
    expect(takeToken(step.state, limit, 3_600_000).result.allowed).toBe(false);
  });

  it('ignores a clock that went backwards', () => {
    expect(takeToken({ tokens: 0.5, atMs: 5000 }, limit, 4000).state.tokens).toBe(0.5);
  });
});

describe('takeTokens', () => {
  const limit = { perSecond: 4, burst: 3 };

  it('grants what the bucket holds of n and makes the refused wait as long as the first refused one', () => {
    const step = takeTokens({ tokens: 2.5, atMs: 1000 }, limit, 1000, 5);
    expect(step).toEqual({ state: { tokens: 0.5, atMs: 1000 }, granted: 2, retryAfterMs: 125 });
    expect(takeTokens(step.state, limit, 1000, 1).retryAfterMs).toBe(125);
    expect(takeTokens(undefined, limit, 0, 2)).toEqual({ state: { tokens: 1, atMs: 0 }, granted: 2, retryAfterMs: 0 });
  });
});

describe('addressBucket', () => {
  it.each([
    ['203.0.113.9', '203.0.113.9'],
    ['::ffff:203.0.113.9', '203.0.113.9'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002::1', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['64:ff9b::192.0.2.33', '64:ff9b:0:0::/64'],
  ])('%s -> %s', (ip, bucket) => expect(addressBucket(ip)).toBe(bucket));
});

describe('RedisTokenBuckets', () => {
  const url = redisUrl();

  it.skipIf(!url)('ready() waits for Redis: the takes that follow are counted there, not in this process', async () => {
    const prefix = `ready-${process.pid}-${Date.now()}`;
    const buckets = new RedisTokenBuckets({ url: url!, cluster: false }, prefix, createLogger('silent'));
    const redis = new Redis(url!);
    try {
      await buckets.ready(10_000);
      expect(await buckets.take('k', { perSecond: 0.1, burst: 1 })).toEqual({ allowed: true, retryAfterMs: 0 });
      expect(await redis.exists(`${prefix}:ratelimit:k`)).toBe(1);
    } finally {
      await buckets.close();
      redis.disconnect();
    }
  });

  it('counts in this process while Redis does not answer: the limit holds', async () => {
    const buckets = new RedisTokenBuckets({ url: 'redis://127.0.0.1:1', cluster: false }, 'unreachable', createLogger('silent'));
    try {
      const started = Date.now();
      await buckets.ready(300);
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
      const taken = [];
      for (let i = 0; i < 3; i++) taken.push(await buckets.take('k', { perSecond: 1, burst: 2 }));
      expect(taken.map((t) => t.allowed)).toEqual([true, true, false]);
      expect(taken[2]!.retryAfterMs).toBeGreaterThan(0);
    } finally {
      await buckets.close();
    }
  });

  it.skipIf(!url)(
    'coalesces concurrent takes of one bucket into few Redis calls and grants exactly the burst, in arrival order',
    async () => {
      const prefix = `coalesce-${process.pid}-${Date.now()}`;
      const buckets = new RedisTokenBuckets({ url: url!, cluster: false }, prefix, createLogger('silent'));
      const seen = await scriptCalls(prefix);
      try {
        await buckets.ready(10_000);
        const limit = { perSecond: 0.001, burst: 50 };
        const taken = await Promise.all(Array.from({ length: 200 }, () => buckets.take('hot', limit)));
        expect(taken.map((t, i) => (t.allowed ? i : -1)).filter((i) => i >= 0)).toEqual(Array.from({ length: 50 }, (_, i) => i));
        for (const refused of taken.slice(50)) expect(refused.retryAfterMs).toBeGreaterThan(900_000);
        // one more, alone, after the others: still refused
        expect((await buckets.take('hot', limit)).allowed).toBe(false);
        await seen.settled();
        expect(seen.calls.length).toBeGreaterThanOrEqual(2);
        expect(seen.calls.length).toBeLessThanOrEqual(10);
      } finally {
        seen.close();
        await buckets.close();
      }
    },
  );

  /**
   * The bucket's script calls MONITOR saw; `settled` waits until it has reported every command run before it (an
   * ECHO it sends: MONITOR reports in the order Redis ran them). MONITOR is read on a plain socket: ioredis's
   * `monitor()` enters its monitoring mode a microtask after MONITOR's OK, so a line of a busy server's traffic in the
   * same read as the OK found no command waiting and threw "Command queue state error" (ioredis issue 1981).
   */
  async function scriptCalls(prefix: string) {
    const watcher = new Redis(url!);
    const calls: string[][] = [];
    const markers = new Map<string, () => void>();
    const { hostname, port } = new URL(url!);
    const socket = connect({ host: hostname, port: Number(port || 6379) });
    await once(socket, 'connect');
    let pending = '';
    let monitoring!: () => void;
    const ok = new Promise<void>((resolve) => (monitoring = resolve));
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (pending + chunk).split('\r\n');
      pending = lines.pop()!;
      for (const line of lines) {
        if (line === '+OK') monitoring();
        // +<time> [<db> <client>] "<command>" "<arg>" ...
        const quoted = line.startsWith('+') ? line.indexOf(' "') : -1;
        if (quoted < 0) continue;
        const args = line.slice(quoted + 2, -1).split('" "');
        if (/^eval(sha)?$/i.test(args[0] ?? '') && args.some((a) => a.startsWith(`${prefix}:ratelimit:`))) calls.push(args);
        if (args[0]?.toLowerCase() === 'echo') markers.get(args[1] ?? '')?.();
      }
    });
    socket.write('MONITOR\r\n');
    await ok;
    return {
      calls,
      settled: async () => {
        const marker = `${prefix}-settled-${markers.size}`;
        const seen = new Promise<void>((resolve) => markers.set(marker, resolve));
        await watcher.echo(marker);
        await seen;
      },
      close: () => (socket.destroy(), watcher.disconnect()),
    };
  }

  it.skipIf(!url)('a busy key goes to Redis about once in 100 requests: each call takes 20 ms of its rate ahead', async () => {
    const prefix = `lease-${process.pid}-${Date.now()}`;
    const buckets = new RedisTokenBuckets({ url: url!, cluster: false }, prefix, createLogger('silent'));
    const seen = await scriptCalls(prefix);
    try {
      await buckets.ready(10_000);
      const limit = { perSecond: 5000, burst: 10_000 };
      expect(leaseOf(limit)).toBe(100);
      for (let i = 0; i < 1000; i++) expect(await buckets.take('busy', limit)).toEqual({ allowed: true, retryAfterMs: 0 });
      // and those that come together while a call is out spend its lease, not another call
      const together = await Promise.all(Array.from({ length: 250 }, () => buckets.take('busy', limit)));
      expect(together.every((t) => t.allowed)).toBe(true);
      await seen.settled();
      expect(seen.calls.length).toBeGreaterThanOrEqual(10);
      expect(seen.calls.length).toBeLessThanOrEqual(14);
      expect(seen.calls.every((c) => c.at(-1) === '100')).toBe(true);
    } finally {
      seen.close();
      await buckets.close();
    }
  });

  it.skipIf(!url)('leases never overdraw the shared bucket, and one not spent within a second is dropped', async () => {
    const prefix = `overdraw-${process.pid}-${Date.now()}`;
    // two API processes on one key: 200 of burst, 2 a millisecond
    const a = new RedisTokenBuckets({ url: url!, cluster: false }, prefix, createLogger('silent'));
    const b = new RedisTokenBuckets({ url: url!, cluster: false }, prefix, createLogger('silent'));
    const seen = await scriptCalls(prefix);
    try {
      await Promise.all([a.ready(10_000), b.ready(10_000)]);
      const limit = { perSecond: 2000, burst: 200 };
      expect(leaseOf(limit)).toBe(20);
      const started = performance.now();
      const taken = await Promise.all(
        [a, b].map(async (buckets) => {
          let allowed = 0;
          for (let i = 0; i < 400; i++) if ((await buckets.take('shared', limit)).allowed) allowed += 1;
          return allowed;
        }),
      );
      const elapsedMs = performance.now() - started;
      const total = taken[0]! + taken[1]!;
      expect(total).toBeLessThanOrEqual(200 + Math.ceil(elapsedMs * 2));
      // at most a lease a process may be left unspent when its loop ends
      expect(total).toBeGreaterThanOrEqual(200 - 2 * 19);
      // a lease left over is spent within its second, not after
      await seen.settled();
      const before = seen.calls.length;
      expect((await a.take('idle', limit)).allowed).toBe(true);
      expect((await a.take('idle', limit)).allowed).toBe(true);
      await seen.settled();
      expect(seen.calls.length).toBe(before + 1);
      await new Promise((r) => setTimeout(r, 1100));
      expect((await a.take('idle', limit)).allowed).toBe(true);
      await seen.settled();
      expect(seen.calls.length).toBe(before + 2);
    } finally {
      seen.close();
      await Promise.all([a.close(), b.close()]);
    }
  });

  it.skipIf(!url)('takes no lease from a bucket half empty, and never spends one past its second', async () => {
    const prefix = `stale-${process.pid}-${Date.now()}`;
    const key = `${prefix}:ratelimit:k`;
    const a = new RedisTokenBuckets({ url: url!, cluster: false }, prefix, createLogger('silent'));
    const b = new RedisTokenBuckets({ url: url!, cluster: false }, prefix, createLogger('silent'));
    const redis = new Redis(url!);
    // a token every 20 ms, bursts of 40: a lease of 1
    const limit = { perSecond: 50, burst: 40 };
    // the bucket with `tokens` in it, refilling from `aheadMs` past now by the Redis server's clock; returns its `at`
    const setTokens = async (tokens: number, aheadMs = 0) => {
      const [seconds, micros] = await redis.time();
      const at = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) + aheadMs;
      await redis.hset(key, 'tokens', String(tokens), 'at', String(at));
      return at;
    };
    // what a take left, and the tokens it took: the bucket refilled from `at` to the take's own `at`, less what is left
    const takenSince = async (tokens: number, at: number) => {
      const [left, takenAt] = (await redis.hmget(key, 'tokens', 'at')).map(Number);
      return Math.min(limit.burst, tokens + ((takenAt! - at) * limit.perSecond) / 1000) - left!;
    };
    try {
      await Promise.all([a.ready(10_000), b.ready(10_000)]);
      expect(leaseOf(limit)).toBe(1);
      // full: the request's token and one ahead
      expect((await a.take('k', limit)).allowed).toBe(true);
      expect(Number(await redis.hget(key, 'tokens'))).toBeCloseTo(38, 0);
      // under half the burst (5 of 40, 300 ms of refill from half): the request's token only
      const at = await setTokens(5);
      expect((await b.take('k', limit)).allowed).toBe(true);
      expect(await takenSince(5, at)).toBeCloseTo(1, 6);
      // the first process's lease past its second, the bucket empty: its first request goes to Redis and is refused
      // (the stale lease would have granted it without asking); the two that wait for the next call may find a
      // token refilled meanwhile (one every 20 ms), so only the first is certain
      await new Promise((r) => setTimeout(r, 1100));
      await setTokens(0, 1000);
      const taken = await Promise.all(Array.from({ length: 3 }, () => a.take('k', limit)));
      expect(taken[0]!.allowed).toBe(false);
    } finally {
      redis.disconnect();
      await Promise.all([a.close(), b.close()]);
    }
  });

  it.skipIf(!url)('counts every waiter of a call Redis refused in this process: the limit holds', async () => {
    const prefix = `refused-${process.pid}-${Date.now()}`;
    const buckets = new RedisTokenBuckets({ url: url!, cluster: false }, prefix, createLogger('silent'));
    const redis = new Redis(url!);
    try {
      await buckets.ready(10_000);
      await redis.set(`${prefix}:ratelimit:k`, 'not a hash', 'PX', 60_000); // the script fails with WRONGTYPE
      const taken = await Promise.all(Array.from({ length: 5 }, () => buckets.take('k', { perSecond: 0.001, burst: 2 })));
      expect(taken.map((t) => t.allowed)).toEqual([true, true, false, false, false]);
      expect(taken[4]!.retryAfterMs).toBeGreaterThan(0);
    } finally {
      await buckets.close();
      redis.disconnect();
    }
  });
});
