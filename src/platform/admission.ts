import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { DomainError } from '../domain/errors.js';
import { connectionsWithUnread } from './unread-requests.js';

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

/** The window whose fastest answer tells whether a queue stands: long enough that a burst alone is no queue. */
export const ANSWER_WINDOW_MS = 500;

/** A window with fewer answers says nothing of a queue: one slow request on an idle server is no overload. */
export const ANSWERS_PER_WINDOW = 20;

/** Two windows in a row whose fastest answer took more than half the bound: a queue stands somewhere. */
export const STANDING_SHARE = 0.5;

/** How often the event loop's utilisation is read and the share of new requests taken in is set anew. */
export const SHARE_WINDOW_MS = 250;

/** A loop busy this much of a window has no CPU left to read what waits in its sockets. */
export const SATURATED_UTILISATION = 0.95;

/**
 * Requests held (in progress, or unread in the kernel's socket buffers) below which a busy loop is at capacity, not
 * past it: what a closed set of clients keeps, each sending when answered (50 in an outside check). Past capacity,
 * offered work piles up beyond it.
 */
export const HELD_FLOOR = 100;

/** The least share of new requests taken in: some still go through, to tell when the CPU is free again. */
export const MIN_SHARE = 0.05;

/**
 * Admission control bounded in time. Each queue a request's work waits in (a group's turn, a database connection)
 * reports when its oldest waiting item came, and the event loop's delay counts as one more when it lasts (a request
 * read late has waited in the socket, where no queue of ours sees it): past `maxDelayMs` of the longest, new requests
 * are refused at once (`overloaded`), and a queue drops what has waited that long (`OverloadedError`). Offered more
 * than it absorbs, the server then answers the excess at once and the rest within the bound, instead of queueing all
 * of it longer and longer. A wait no queue reports (a gateway slow to answer, many stages each a little late) shows in
 * the answers themselves: when even the fastest answer of a window (`ANSWER_WINDOW_MS`) took more than
 * `STANDING_SHARE` of the bound, two windows in a row, a queue stands somewhere and new requests are refused until a
 * window is fast again (CoDel's reading of the minimum, not the mean: a burst answered at once is no overload).
 *
 * A wait no signal of this process sees: requests unread in the kernel's socket buffers while the taken-in work has
 * the whole CPU (refusing costs CPU too, and there is none left). So while the loop is saturated
 * (`SATURATED_UTILISATION`) holding more requests than clients at capacity keep (`HELD_FLOOR`), only a
 * share of new requests is taken in, cut by 30 % a window (`SHARE_WINDOW_MS`) and given back 10 points a window once
 * the loop has room (TCP's AIMD): the taken-in work then leaves the CPU to read and refuse the rest at once. 0 turns
 * it all off.
 */
export class Admission {
  private readonly queues: (() => number | undefined)[] = [];
  private lastTick = performance.now();
  /** how late the last two samples of the event loop came, in ms */
  private late: [number, number] = [0, 0];
  private timer: NodeJS.Timeout | null = null;
  private windowStart = performance.now();
  private windowFastest = Infinity;
  private windowAnswers = 0;
  /** the fastest answer of each of the last two windows, in ms; 0 for one with too few answers to tell */
  private standing: [number, number] = [0, 0];
  /** the share of new requests taken in (1: all), and what the ones refused so far have earned towards the next */
  private shareTaken = 1;
  private credit = 0;
  private shareWindowStart = performance.now();
  private utilisationMark: EventLoopUtilization = performance.eventLoopUtilization();
  private inFlight = 0;
  private listeningPort: number | undefined;

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

  /** An API request taken in (not refused) was answered `ms` after it came. */
  answered(ms: number, now = performance.now()): void {
    this.rollWindow(now);
    this.windowAnswers += 1;
    if (ms < this.windowFastest) this.windowFastest = ms;
  }

  /** What every request answered in the last two windows spent at least, in ms (0: too few answers to tell). */
  standingMs(now = performance.now()): number {
    this.rollWindow(now);
    return Math.min(...this.standing);
  }

  /** Whether a new request is refused: what waits already has waited past the bound, or a queue stands. */
  overloaded(now = performance.now()): boolean {
    return this.on && (this.delayMs(now) > this.maxDelayMs || this.standingMs(now) > this.maxDelayMs * STANDING_SHARE);
  }

  /** The port the API listens on: the requests unread in its connections count as held. */
  watchSockets(port: number): void {
    this.listeningPort = port;
  }

  /** The share of new requests taken in while the CPU is saturated (1: all of them). */
  get share(): number {
    return this.shareTaken;
  }

  /**
   * Whether a new request is refused (`overloaded`, or outside the share taken in); one taken in counts as in
   * progress until the returned function is called. Spread evenly: a share of 0.25 takes every fourth request.
   */
  admit(now = performance.now()): (() => void) | null {
    if (!this.on) return () => undefined;
    if (this.overloaded(now)) return null;
    if (this.shareTaken < 1) {
      this.credit += this.shareTaken;
      // a hair below 1 counts as 1: shares such as 0.7 do not add up exactly in floating point
      if (this.credit < 1 - 1e-9) return null;
      this.credit -= 1;
    }
    this.inFlight += 1;
    let done = false;
    return () => {
      if (!done) this.inFlight -= 1;
      done = true;
    };
  }

  /** The requests in progress and those waiting unread in the API's connections. */
  private held(): number {
    if (this.inFlight >= HELD_FLOOR || this.listeningPort === undefined) return this.inFlight;
    return this.inFlight + (connectionsWithUnread(this.listeningPort) ?? 0);
  }

  /** Sets the share taken in from how busy the loop was over the last window and what is in progress now. */
  private adjustShare(now: number): void {
    if (now - this.shareWindowStart < SHARE_WINDOW_MS) return;
    const { utilization } = performance.eventLoopUtilization(this.utilisationMark);
    this.utilisationMark = performance.eventLoopUtilization();
    this.shareWindowStart = now;
    if (utilization < SATURATED_UTILISATION) this.shareTaken = Math.min(1, this.shareTaken + 0.1);
    else if (this.held() >= HELD_FLOOR) this.shareTaken = Math.max(MIN_SHARE, this.shareTaken * 0.7);
    // saturated with few in progress: at capacity, not past it; the share holds
    if (this.shareTaken === 1) this.credit = 0;
  }

  private rollWindow(now: number): void {
    if (now - this.windowStart < ANSWER_WINDOW_MS) return;
    const fastest = this.windowAnswers >= ANSWERS_PER_WINDOW ? this.windowFastest : 0;
    // windows that passed with no answer at all (refused requests do not count) leave no standing queue
    this.standing = now - this.windowStart >= 2 * ANSWER_WINDOW_MS ? [0, 0] : [this.standing[1], fastest];
    this.windowFastest = Infinity;
    this.windowAnswers = 0;
    this.windowStart = now;
  }

  /** Samples the event loop's delay until the returned function is called. */
  start(): () => void {
    if (!this.on || this.timer) return () => undefined;
    this.lastTick = performance.now();
    this.shareWindowStart = this.lastTick;
    this.utilisationMark = performance.eventLoopUtilization();
    this.timer = setInterval(() => {
      const now = performance.now();
      this.late = [this.late[1], Math.max(0, now - this.lastTick - LOOP_SAMPLE_MS)];
      this.lastTick = now;
      this.adjustShare(now);
    }, LOOP_SAMPLE_MS).unref();
    return () => {
      clearInterval(this.timer!);
      this.timer = null;
      this.late = [0, 0];
      this.shareTaken = 1;
    };
  }
}

/** No admission control: nothing is refused for time. */
export const NO_ADMISSION = new Admission(0);
