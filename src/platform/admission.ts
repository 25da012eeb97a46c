import { DomainError } from '../domain/errors.js';

/** What a request refused for capacity is told: come back after this many seconds. */
export const RETRY_AFTER_SECONDS = 1;

/** A request refused because this server cannot start its work soon enough: a 503 with Retry-After. */
export class OverloadedError extends DomainError {
  readonly retryAfterSeconds = RETRY_AFTER_SECONDS;

  constructor(maxDelayMs: number) {
    super(`overloaded: work waits more than ${maxDelayMs} ms on this server; retry after ${RETRY_AFTER_SECONDS} s`, 503);
  }
}

/** How often the event loop's delay is sampled. */
const LOOP_SAMPLE_MS = 10;

/**
 * Admission control bounded in time. Each queue a request's work waits in (a group's turn, a database connection)
 * reports when its oldest waiting item came, and the event loop's delay counts as one more when it lasts (a request
 * read late has waited in the socket, where no queue of ours sees it): past `maxDelayMs` of the longest, new requests
 * are refused at once (`overloaded`), and a queue drops what has waited that long (`OverloadedError`). Offered more
 * than it absorbs, the server then answers the excess at once and the rest within the bound, instead of queueing all
 * of it longer and longer. 0 turns it off.
 */
export class Admission {
  private readonly queues: (() => number | undefined)[] = [];
  private lastTick = performance.now();
  /** how late the last two samples of the event loop came, in ms */
  private late: [number, number] = [0, 0];
  private timer: NodeJS.Timeout | null = null;

  constructor(readonly maxDelayMs: number) {}

  get on(): boolean {
    return this.maxDelayMs > 0;
  }

  /** A queue to watch: `oldestSince` answers when its oldest waiting item came (performance.now()), none when empty. */
  watch(oldestSince: () => number | undefined): void {
    if (this.on) this.queues.push(oldestSince);
  }

  /** The longest any work now waits, in ms: the oldest item of a queue, or the event loop's delay. */
  delayMs(now = performance.now()): number {
    // two late samples in a row: a pause of the loop alone (a collection, a moment off the CPU) is no queue
    let delay = Math.min(...this.late);
    for (const oldestSince of this.queues) {
      const since = oldestSince();
      if (since !== undefined && now - since > delay) delay = now - since;
    }
    return delay;
  }

  /** Whether a new request is refused: what waits already has waited past the bound. */
  overloaded(): boolean {
    return this.on && this.delayMs() > this.maxDelayMs;
  }

  /** Samples the event loop's delay until the returned function is called. */
  start(): () => void {
    if (!this.on || this.timer) return () => undefined;
    this.lastTick = performance.now();
    this.timer = setInterval(() => {
      const now = performance.now();
      this.late = [this.late[1], Math.max(0, now - this.lastTick - LOOP_SAMPLE_MS)];
      this.lastTick = now;
    }, LOOP_SAMPLE_MS).unref();
    return () => {
      clearInterval(this.timer!);
      this.timer = null;
      this.late = [0, 0];
    };
  }
}

/** No admission control: nothing is refused for time. */
export const NO_ADMISSION = new Admission(0);
