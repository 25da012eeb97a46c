/**
 * A counting semaphore. Gateways share one per connection pool so that a burst (20,000 tokens, or
 * several batches sent at once by the worker) never opens more HTTP/2 streams than the session can
 * carry: too many open streams blow Node's per-session memory cap (ENHANCE_YOUR_CALM) and time out
 * requests queued behind the peer's SETTINGS_MAX_CONCURRENT_STREAMS.
 */
export class Limiter {
  private active = 0;
  // FIFO of waiters read from `head`: thousands queue up when batches arrive together, and Array#shift on
  // a long array would move every remaining element each time a slot frees.
  private waiting: Array<() => void> = [];
  private head = 0;

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`limit must be a positive integer, got ${max}`);
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active < this.max) this.active += 1;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await task();
    } finally {
      // Hand the slot straight to the next waiter so `active` never over-counts.
      const next = this.nextWaiter();
      if (next) next();
      else this.active -= 1;
    }
  }

  private nextWaiter(): (() => void) | undefined {
    if (this.head >= this.waiting.length) return undefined;
    const next = this.waiting[this.head++];
    if (this.head === this.waiting.length) {
      this.waiting = [];
      this.head = 0;
    } else if (this.head >= 4096 && this.head * 2 >= this.waiting.length) {
      this.waiting = this.waiting.slice(this.head); // drop the consumed prefix now and then
      this.head = 0;
    }
    return next;
  }
}

/**
 * Runs `task` for every item through `limiter`; results keep the input order. A few lanes pull items in
 * turn instead of one waiting promise per item: a 1,000-token batch then keeps dozens of closures alive,
 * not a thousand that outlive young-generation GC and fill the old generation.
 */
export async function mapLimited<T, R>(limiter: Limiter, items: readonly T[], task: (item: T) => Promise<R>, lanes = 64): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < items.length; i = next++) {
      const item = items[i] as T;
      results[i] = await limiter.run(() => task(item));
    }
  };
  await Promise.all(Array.from({ length: Math.min(lanes, items.length) }, lane));
  return results;
}

/**
 * Bounds the streams a gateway has open by admitting tokens in chunks: each Limiter slot stands for a
 * chunk of up to `chunkSize` tokens. Per-token promise and closure churn through the limiter cost more
 * CPU than the HTTP/2 request itself at thousands of pushes a second; per chunk it is small.
 */
export class ChunkedLimiter {
  readonly chunkSize: number;
  private readonly limiter: Limiter;

  constructor(maxStreams: number, preferredChunk = 10) {
    this.chunkSize = Math.max(1, Math.min(preferredChunk, maxStreams));
    this.limiter = new Limiter(Math.max(1, Math.floor(maxStreams / this.chunkSize)));
  }

  /** Runs `send` for consecutive runs of `indexes`, never more than `maxStreams` indexes in flight. */
  async run(indexes: readonly number[], send: (chunk: number[]) => Promise<void>): Promise<void> {
    const chunks: number[][] = [];
    for (let i = 0; i < indexes.length; i += this.chunkSize) chunks.push(indexes.slice(i, i + this.chunkSize));
    await mapLimited(this.limiter, chunks, send);
  }
}

/**
 * Tracks running operations so `close()` can stop taking new work and wait for what is in flight,
 * instead of cutting streams (a cut stream would be reported as a retry, wasting a delivery attempt).
 */
export class Drain {
  private readonly running = new Set<Promise<unknown>>();
  private closed = false;

  /** Runs `op` unless closed; returns undefined when closed so the caller can answer "retry later". */
  track<T>(op: () => Promise<T>): Promise<T> | undefined {
    if (this.closed) return undefined;
    const p = op();
    this.running.add(p);
    const forget = () => this.running.delete(p);
    p.then(forget, forget);
    return p;
  }

  /** Refuses new work and resolves once everything in flight has settled. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.running]);
  }
}
