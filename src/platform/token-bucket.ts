import type { Cluster, Redis } from 'ioredis';
import type { Logger } from './logger.js';
import { redisClient, type RedisTarget } from './redis.js';

/** A bucket holds at most `burst` tokens and gains `perSecond` tokens a second; a request takes one. */
export interface BucketLimit {
  perSecond: number;
  burst: number;
}

/** `retryAfterMs`: when the next token will be there (0 when the request was allowed). */
export interface TakeResult {
  allowed: boolean;
  retryAfterMs: number;
}

export interface TokenBuckets {
  take(bucket: string, limit: BucketLimit): Promise<TakeResult>;
  /** Waits (at most `timeoutMs`) until the shared store answers, so a started server applies its limits there. */
  ready(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

interface BucketState {
  tokens: number;
  atMs: number;
}

/**
 * The refill-and-take step for `count` requests in a row, the same arithmetic as TAKE_SCRIPT below (that one runs
 * inside Redis, and may also take a lease ahead): the first `granted` are allowed, the rest refused. A refused
 * request takes nothing, so every one of them waits as long as the first. A bucket seen for the first time is full.
 */
export function takeTokens(
  state: BucketState | undefined,
  limit: BucketLimit,
  nowMs: number,
  count: number,
): { state: BucketState; granted: number; retryAfterMs: number } {
  const elapsedMs = state ? Math.max(0, nowMs - state.atMs) : 0;
  const tokens = state ? Math.min(limit.burst, state.tokens + (elapsedMs * limit.perSecond) / 1000) : limit.burst;
  const granted = Math.min(count, Math.floor(tokens));
  const left = tokens - granted;
  const retryAfterMs = granted < count ? Math.ceil(((1 - left) * 1000) / limit.perSecond) : 0;
  return { state: { tokens: left, atMs: nowMs }, granted, retryAfterMs };
}

/** One request's refill-and-take. */
export function takeToken(state: BucketState | undefined, limit: BucketLimit, nowMs: number): { state: BucketState; result: TakeResult } {
  const { state: after, granted, retryAfterMs } = takeTokens(state, limit, nowMs, 1);
  return { state: after, result: { allowed: granted === 1, retryAfterMs } };
}

/** How long an untouched bucket takes to fill up again; after that, forgetting it changes nothing. */
const refillMs = (limit: BucketLimit) => Math.ceil((limit.burst * 1000) / limit.perSecond);

/** Buckets in this process's memory: for a single API process (no Redis). */
export class MemoryTokenBuckets implements TokenBuckets {
  private readonly buckets = new Map<string, BucketState & { forgetAtMs: number }>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(sweepEveryMs = 60_000) {
    this.sweeper = setInterval(() => this.sweep(Date.now()), sweepEveryMs);
    this.sweeper.unref();
  }

  async take(bucket: string, limit: BucketLimit): Promise<TakeResult> {
    const now = Date.now();
    const { state, result } = takeToken(this.buckets.get(bucket), limit, now);
    this.buckets.set(bucket, { ...state, forgetAtMs: now + refillMs(limit) });
    return result;
  }

  async ready(): Promise<void> {}

  /** Buckets that have filled up again are dropped, so memory follows the active clients only. */
  private sweep(now: number): void {
    for (const [bucket, state] of this.buckets) if (state.forgetAtMs <= now) this.buckets.delete(bucket);
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.buckets.clear();
  }
}

/**
 * One atomic refill-and-take of up to n tokens on a hash {tokens, at}, timed by the Redis server's clock so that
 * every API process sees the same time, and when all n were granted up to `lease` more, but only from the upper half
 * of the burst: tokens taken ahead never leave a bucket less than half full. KEYS[1] bucket; ARGV per second, burst,
 * expiry in ms, n, lease. Returns {granted 0..n, retry after ms for the refused (0 when all were granted), leased}.
 */
const TAKE_SCRIPT = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local wanted = tonumber(ARGV[4])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local saved = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = burst
if saved[1] then
  tokens = math.min(burst, tonumber(saved[1]) + math.max(0, now - tonumber(saved[2])) * rate / 1000)
end
local granted = math.min(wanted, math.floor(tokens))
tokens = tokens - granted
local leased = 0
if granted == wanted then
  leased = math.max(0, math.min(tonumber(ARGV[5]), math.floor(tokens - burst / 2)))
  tokens = tokens - leased
end
local retry = 0
if granted < wanted then
  retry = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {granted, retry, leased}
`;

type RedisWithTake = (Redis | Cluster) & {
  takeTokens(
    bucket: string,
    perSecond: number,
    burst: number,
    expireMs: number,
    count: number,
    lease: number,
  ): Promise<[number, number, number]>;
};

/** A take waiting for its bucket's call to Redis. */
interface Waiter {
  resolve(result: TakeResult): void;
}

const ALLOWED: TakeResult = { allowed: true, retryAfterMs: 0 };

/** How many milliseconds of a bucket's rate a call to Redis takes ahead, to spend in this process. */
const LEASE_SPAN_MS = 20;
/** Tokens taken ahead and not spent within this are dropped: a process cannot save them for a later burst. */
const LEASE_LIFE_MS = 1000;

/**
 * The tokens one call asks beyond its waiters: 20 ms of the rate, at most a tenth of the burst, so a busy key of
 * 5,000 a second goes to Redis about once in 100 requests, and a slow bucket (an sdk key's 10 a second) every request.
 */
export const leaseOf = (limit: BucketLimit) =>
  Math.max(0, Math.min(Math.floor((limit.perSecond * LEASE_SPAN_MS) / 1000), Math.floor(limit.burst / 10)));

/**
 * Buckets in Redis, shared by every API process on it. When Redis cannot answer (not connected yet, an outage),
 * each process counts in buckets of its own meanwhile: a limit protects the service, so it must neither take it
 * down with Redis nor lift while Redis is away (at worst it is one limit per API process). The outage is logged
 * once a minute.
 */
export class RedisTokenBuckets implements TokenBuckets {
  private readonly redis: RedisWithTake;
  private readonly meanwhile = new MemoryTokenBuckets();
  private lastWarningMs = 0;
  /** Per bucket (and limit) with a call to Redis in flight: the takes that came since, for the next call. */
  private readonly waiting = new Map<string, Waiter[]>();
  /** Per bucket (and limit): tokens a call took ahead (`leaseOf`), spent here until used up or too old. */
  private readonly leased = new Map<string, { tokens: number; untilMs: number }>();
  private readonly sweeper: NodeJS.Timeout;

  /**
   * `prefix` in braces on a Redis Cluster puts every bucket in one slot, with the queues, unless `spread`
   * (QUEUE_PARTITIONS above 1): then each bucket is a hash tag of its own, and the buckets spread over the masters.
   */
  constructor(
    target: RedisTarget,
    private readonly prefix: string,
    private readonly log: Logger,
    private readonly keys: { spread: boolean } = { spread: false },
  ) {
    // No offline queue and one retry: while Redis is away a request fails open at once instead of waiting for it.
    this.redis = redisClient(target, { offlineQueue: false, maxRetriesPerRequest: 1 }) as RedisWithTake;
    this.redis.defineCommand('takeTokens', { numberOfKeys: 1, lua: TAKE_SCRIPT });
    this.redis.on('error', (err) => this.warn(err, 'rate limit store unreachable'));
    // leases of buckets not seen again (one per client address, say) are forgotten
    this.sweeper = setInterval(() => {
      const now = Date.now();
      for (const [call, lease] of this.leased) if (lease.untilMs <= now) this.leased.delete(call);
    }, 10 * LEASE_LIFE_MS);
    this.sweeper.unref();
  }

  async take(bucket: string, limit: BucketLimit): Promise<TakeResult> {
    if (this.redis.status !== 'ready') return this.meanwhile.take(bucket, limit);
    const key = this.keys.spread ? `${this.prefix.replace(/[{}]/g, '')}:ratelimit:{${bucket}}` : `${this.prefix}:ratelimit:${bucket}`;
    const call = `${limit.perSecond}/${limit.burst} ${key}`;
    if (this.spendLease(call, 1) === 1) return ALLOWED;
    return new Promise((resolve) => {
      const waiting = this.waiting.get(call);
      if (waiting) waiting.push({ resolve });
      else {
        this.waiting.set(call, []);
        void this.send({ call, key, bucket, limit }, [{ resolve }]);
      }
    });
  }

  /**
   * One script call takes for every waiter of a bucket, answered in arrival order, and from a bucket more than half
   * full a lease ahead (`leaseOf`); whoever came meanwhile spends the lease, or goes in the next call. So a hot bucket
   * costs a Redis round trip once in many requests, and the shared bucket never grants more than it holds: a lease is
   * taken from it like any request, and a client near its limit is answered by Redis each time.
   */
  private async send(to: { call: string; key: string; bucket: string; limit: BucketLimit }, waiters: Waiter[]): Promise<void> {
    const { limit } = to;
    try {
      const [granted, retryAfterMs, leased] = await this.redis.takeTokens(
        to.key,
        limit.perSecond,
        limit.burst,
        refillMs(limit) + 1000,
        waiters.length,
        leaseOf(limit),
      );
      waiters.forEach((w, i) => w.resolve(i < granted ? ALLOWED : { allowed: false, retryAfterMs }));
      // a call is made only without a lease in time: one left is too old to spend
      if (leased > 0) this.leased.set(to.call, { tokens: leased, untilMs: Date.now() + LEASE_LIFE_MS });
      else this.leased.delete(to.call);
    } catch (err) {
      this.leased.delete(to.call);
      this.warn(err, 'rate limits counted per process: Redis did not answer');
      for (const w of waiters) w.resolve(await this.meanwhile.take(to.bucket, limit));
    }
    const next = this.waiting.get(to.call) ?? [];
    // those who came meanwhile spend the lease first
    for (const w of next.splice(0, this.spendLease(to.call, next.length))) w.resolve(ALLOWED);
    if (next.length === 0) this.waiting.delete(to.call);
    else {
      this.waiting.set(to.call, []);
      void this.send(to, next);
    }
  }

  /** Takes up to `wanted` tokens of the bucket's lease while it is in time: how many it had. */
  private spendLease(call: string, wanted: number): number {
    const lease = this.leased.get(call);
    if (!lease || lease.untilMs <= Date.now()) return 0;
    const spent = Math.min(wanted, Math.floor(lease.tokens));
    lease.tokens -= spent;
    if (lease.tokens < 1) this.leased.delete(call);
    return spent;
  }

  async ready(timeoutMs: number): Promise<void> {
    if (this.redis.status === 'ready') return;
    let timer: NodeJS.Timeout | undefined;
    const connected = new Promise<boolean>((resolve) => this.redis.once('ready', () => resolve(true)));
    const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
    if (!(await Promise.race([connected, late]))) this.log.warn({ timeoutMs }, 'rate limits counted per process until Redis answers');
    clearTimeout(timer);
  }

  private warn(err: unknown, message: string): void {
    const now = Date.now();
    if (now - this.lastWarningMs < 60_000) return;
    this.lastWarningMs = now;
    this.log.warn({ err }, message);
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    await this.meanwhile.close();
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
