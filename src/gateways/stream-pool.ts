/**
 * Connections to one gateway and the streams each carries. A connection takes as many streams as its peer
 * announces (SETTINGS_MAX_CONCURRENT_STREAMS: APNs 1,000, FCM 100 or so); another connection opens only when
 * every open one is full, up to `maxConnections`; past that, chunks wait their turn in order.
 *
 * How many streams are open across connections follows the round trip, as TCP's window does: a far gateway
 * needs pushes-per-second × round-trip streams in flight to stay busy, a near one only a few. The window is
 * twice that product, measured (the fastest round trip seen, so queueing does not inflate it), between
 * `minInFlight` and `maxInFlight`. While the window limits the rate, the rate doubles every round trip; once
 * something else does (CPU, the gateway), extra streams would only queue and time out, so none are opened.
 * A chunk that took longer than `queueingMs` waited in a queue (no gateway is that far away): the window is
 * halved, as TCP halves on loss, and grows back a quarter a tick while chunks are answered sooner.
 * When a whole tick's chunks take over twice the fastest round trip, the gateway may have moved further (a quiet
 * gateway answers sooner than a busy one): the window drops to one chunk until the streams open before have
 * answered, and the first chunk sent alone gives the round trip anew (BBR's ProbeRTT). Without it, a minimum
 * learned from one-device sends at 1 ms held a later broadcast to the floor when the gateway answered in 100 ms.
 * The widest window a gateway took without queueing, and its round trip, are kept per origin for the life of the
 * process: a run with more chunks than the window (a broadcast) starts at half that window, not at what the sends
 * between broadcasts left, and a gateway built anew for the same origin starts from them too. The first broadcast,
 * on a connection whose peer has announced its streams, starts at what the gateway offers (that many streams on
 * each of `maxConnections` connections, within `maxInFlight`), as a bare HTTP/2 client would: see `burst`.
 */
export interface StreamPoolOptions {
  maxConnections: number;
  /** The most streams open across connections, whatever the round trip: bounds memory. */
  maxInFlight: number;
  /** The window before anything is measured, and its floor. Default 200 (or maxInFlight when lower). */
  minInFlight?: number;
  /** Tokens per chunk: one slot acquisition and one send call per chunk, not per token. Default 10. */
  chunkSize?: number;
  /** A chunk answered slower than this waited in a queue, not on the way: the window backs off. Default 1000 ms. */
  queueingMs?: number;
  /** The gateway's origin: what this pool learns of its window is remembered under it for the other pools. */
  origin?: string;
}

/** A gateway's widest window answered without queueing, and its fastest round trip. */
interface GoodWindow {
  window: number;
  rttMs: number;
  /** A broadcast was measured here: later ones start from `window`, even when the gateway needed less than the floor. */
  measured: boolean;
}

/**
 * Per process, by origin. Not kept across restarts: once a connection is up a broadcast starts at what the gateway
 * offers (`burst`), which a stored window would not raise at the default bounds, for a write per broadcast.
 */
const goodWindows = new Map<string, GoodWindow>();

/** How often the window is recomputed. */
const WINDOW_TICK_MS = 100;
/** A tick whose fastest chunk took this many times the fastest round trip starts a probe of the round trip. */
const PROBE_WHEN_SLOWER = 2;
/** The least time between probes: one costs a round trip with a single chunk in flight. */
const PROBE_INTERVAL_MS = 2000;

/** Pushes per second × the fastest round trip seen, from the chunks that completed. */
export class WindowEstimator {
  private rate = 0;
  private completed = 0;
  private tickStart = performance.now();
  /**
   * The fastest round trip seen: the gateway's distance. Not forgotten with time, because on a busy host every
   * recent sample includes queueing, and a window sized on those would grow the queue it measures; a probe,
   * with nothing else in flight, replaces it.
   */
  private minRtt = Infinity;
  /** The slowest and the fastest chunk of this tick. */
  private slowest = 0;
  private fastest = Infinity;
  /** Where the window stops while it backs off from queueing; `max` when nothing queued. */
  private ceiling: number;
  /** Set while probing: chunks started from then on went out with little or nothing ahead of them. */
  private probeSince: number | undefined;
  private lastProbeAt = -Infinity;
  /** Set from a burst until a tick after it is measured (a probe's tick is not). */
  private bursting = false;
  /** What this estimator (or another for the same origin) learned: shared by reference with `goodWindows`. */
  private readonly good: GoodWindow;
  window: number;

  private readonly min: number;
  private readonly max: number;
  private readonly queueingMs: number;
  private readonly probeWindow: number;

  constructor(bounds: { min: number; max: number; queueingMs: number; probeWindow: number; origin?: string | undefined }) {
    ({ min: this.min, max: this.max, queueingMs: this.queueingMs, probeWindow: this.probeWindow } = bounds);
    this.window = this.min;
    this.ceiling = this.max;
    const origin = bounds.origin;
    const known = origin === undefined ? undefined : goodWindows.get(origin);
    this.good = known ?? { window: 0, rttMs: Infinity, measured: false };
    if (origin !== undefined && !known) goodWindows.set(origin, this.good);
    this.minRtt = this.good.rttMs;
  }

  /**
   * More chunks are waiting than the window holds. With a window learned (a broadcast before), open it to half the
   * widest good one, as if the rate that filled it were measured now: half, because the gateway may be busier than
   * when it was learned; the window doubles from there while it limits the rate, and backs off if answers queue.
   * With none (one-device sends only), open it to `offered`, the streams the gateway's SETTINGS allow on the
   * connections the pool may open, because a peer's SETTINGS_MAX_CONCURRENT_STREAMS is what it says it accepts
   * (growing from the floor instead held a first broadcast to 0.6–0.7 of a bare client that opens them at once);
   * not once one is learned, or each batch of a broadcast would reopen the window past what its rate needs.
   */
  burst(offered = 0): void {
    const learned = this.good.measured || this.good.window >= this.min;
    const start = Math.round(Math.min(this.ceiling, this.max, learned ? this.good.window / 2 : offered));
    if (this.probeSince !== undefined || start <= this.window || !(this.minRtt < Infinity)) return;
    this.rate = Math.max(this.rate, (start * 1000) / (2 * this.minRtt));
    this.completed = 0;
    this.slowest = 0;
    this.fastest = Infinity;
    this.tickStart = performance.now();
    this.window = start;
    this.bursting = true;
  }

  record(tokens: number, rttMs: number, startedAt: number): void {
    const now = performance.now();
    if (this.probeSince !== undefined) {
      if (startedAt < this.probeSince) return;
      this.minRtt = rttMs;
      this.endProbe(now);
      return;
    }
    this.completed += tokens;
    this.minRtt = Math.min(this.minRtt, rttMs);
    this.slowest = Math.max(this.slowest, rttMs);
    this.fastest = Math.min(this.fastest, rttMs);
    const elapsed = now - this.tickStart;
    if (elapsed < WINDOW_TICK_MS) return;
    if (this.fastest > PROBE_WHEN_SLOWER * this.minRtt && now - this.lastProbeAt >= PROBE_INTERVAL_MS) {
      this.probeSince = now;
      this.window = this.probeWindow;
      return;
    }
    const rate = (this.completed * 1000) / elapsed;
    // A rise is taken at once, a fall smoothed: averaged with the trickle before a burst, the window grew half as
    // fast as the rate it limits, and a broadcast spent its first round trips below a bare client's window.
    this.rate = rate > this.rate ? rate : 0.5 * this.rate + 0.5 * rate;
    const queued = this.slowest > this.queueingMs;
    this.ceiling = queued ? Math.max(this.min, this.window / 2) : Math.min(this.max, this.ceiling * 1.25);
    this.startTick(now);
    // Only the window this tick's own rate asks for counts as taken: the smoothed rate lags a burst's end.
    const taken = Math.min(this.window, Math.round((2 * rate * this.minRtt) / 1000));
    this.good.window = queued ? Math.min(this.good.window, this.window) : Math.max(this.good.window, taken);
    this.good.rttMs = this.minRtt;
    this.good.measured ||= this.bursting;
    this.bursting = false;
  }

  /** The probe's round trip is the gateway's distance now; the rate measured before it still holds. */
  private endProbe(now: number): void {
    this.probeSince = undefined;
    this.lastProbeAt = now;
    this.startTick(now);
  }

  private startTick(now: number): void {
    this.completed = 0;
    this.slowest = 0;
    this.fastest = Infinity;
    this.tickStart = now;
    this.window = Math.round(Math.min(this.ceiling, Math.max(this.min, (2 * this.rate * this.minRtt) / 1000)));
  }
}

interface Slot<C> {
  conn: C;
  active: number;
}

export class StreamPool<C> {
  private readonly slots: Slot<C>[] = [];
  private inFlight = 0;
  private waiting: { n: number; grant: (slot: Slot<C>) => void }[] = [];
  private readonly chunkSize: number;
  private readonly estimator: WindowEstimator;
  /** Set while chunks wait on a connection whose peer has not announced its window yet. */
  private settlePoll: NodeJS.Timeout | undefined;

  /**
   * `open` makes a connection (one that reconnects by itself); `windowOf` reads the streams its peer allows now,
   * undefined while unknown (not connected yet).
   */
  constructor(
    private readonly open: () => C,
    private readonly windowOf: (conn: C) => number | undefined,
    private readonly options: StreamPoolOptions,
  ) {
    if (!(options.maxConnections >= 1 && options.maxInFlight >= 1)) throw new RangeError('maxConnections and maxInFlight must be >= 1');
    this.chunkSize = Math.max(1, Math.min(options.chunkSize ?? 10, options.maxInFlight));
    this.estimator = new WindowEstimator({
      min: Math.min(options.minInFlight ?? 200, options.maxInFlight),
      max: options.maxInFlight,
      queueingMs: options.queueingMs ?? 1000,
      probeWindow: this.chunkSize,
      origin: options.origin,
    });
  }

  /** The streams that may be open across connections now. */
  get window(): number {
    return this.estimator.window;
  }

  /** The connections opened so far. */
  get connections(): C[] {
    return this.slots.map((s) => s.conn);
  }

  /** Runs `send` for consecutive chunks of `indexes`, each on a connection with room for it. */
  async run(indexes: readonly number[], send: (conn: C, chunk: number[]) => Promise<void>): Promise<void> {
    const chunks: number[][] = [];
    for (let i = 0; i < indexes.length; i += this.chunkSize) chunks.push(indexes.slice(i, i + this.chunkSize));
    if (indexes.length > this.estimator.window) this.estimator.burst(this.offered());
    let next = 0;
    const lane = async () => {
      for (let c = next++; c < chunks.length; c = next++) {
        const chunk = chunks[c]!;
        const slot = await this.acquire(chunk.length);
        const started = performance.now();
        try {
          await send(slot.conn, chunk);
        } finally {
          this.estimator.record(chunk.length, performance.now() - started, started);
          this.release(slot, chunk.length);
        }
      }
    };
    // Lanes for the widest window; those beyond the current one wait in acquire().
    const lanes = Math.min(chunks.length, Math.ceil(this.options.maxInFlight / this.chunkSize));
    await Promise.all(Array.from({ length: lanes }, lane));
  }

  /** The streams the gateway offers: as many on each connection the pool may open as the open ones' peers allow. */
  private offered(): number {
    let most = 0;
    for (const slot of this.slots) most = Math.max(most, this.windowOf(slot.conn) ?? 0);
    return most * this.options.maxConnections;
  }

  private acquire(n: number): Promise<Slot<C>> {
    const slot = this.waiting.length === 0 ? this.tryAcquire(n) : undefined;
    if (slot) return Promise.resolve(slot);
    return new Promise((grant) => {
      this.waiting.push({ n, grant });
      this.pollWhileSettling();
    });
  }

  /**
   * Nothing is released when a peer's settings arrive, so chunks waiting for them look again shortly instead
   * of waiting for the first answer (which a slow gateway gives only after a round trip).
   */
  private pollWhileSettling(): void {
    if (this.settlePoll || !this.slots.some((s) => this.windowOf(s.conn) === undefined)) return;
    this.settlePoll = setTimeout(() => {
      this.settlePoll = undefined;
      this.grantWaiting();
      if (this.waiting.length > 0) this.pollWhileSettling();
    }, 5);
    this.settlePoll.unref();
  }

  private tryAcquire(n: number): Slot<C> | undefined {
    if (this.inFlight > 0 && this.inFlight + n > this.estimator.window) return undefined;
    let settling = false;
    for (const slot of this.slots) {
      const window = this.windowOf(slot.conn);
      if (window === undefined) settling = true;
      // An idle connection takes a chunk however small its window. One whose peer has not said yet takes only
      // that first chunk: a server refuses the streams above its limit, and its settings arrive before the answers.
      if (slot.active === 0 || (window !== undefined && slot.active + n <= window)) return this.take(slot, n);
    }
    // A connection still connecting may allow far more than one chunk: wait for it before opening another.
    if (settling || this.slots.length >= this.options.maxConnections) return undefined;
    const slot = { conn: this.open(), active: 0 };
    this.slots.push(slot);
    return this.take(slot, n);
  }

  private take(slot: Slot<C>, n: number): Slot<C> {
    slot.active += n;
    this.inFlight += n;
    return slot;
  }

  private release(slot: Slot<C>, n: number): void {
    slot.active -= n;
    this.inFlight -= n;
    this.grantWaiting();
  }

  private grantWaiting(): void {
    while (this.waiting.length > 0) {
      const granted = this.tryAcquire(this.waiting[0]!.n);
      if (!granted) break;
      this.waiting.shift()!.grant(granted);
    }
  }
}
