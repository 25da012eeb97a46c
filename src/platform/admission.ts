import { DomainError } from '../domain/errors.js';
import { CpuShare } from './cpu-share.js';
import { eventLoop } from './loop-lateness.js';
import type { SocketFamily } from './unread-requests.js';

/** What a request refused for capacity is told: come back after this many seconds. */
export const RETRY_AFTER_SECONDS = 1;

/** A request refused because this server cannot start its work soon enough: a 503 with Retry-After. */
export class OverloadedError extends DomainError {
  readonly retryAfterSeconds = RETRY_AFTER_SECONDS;

  /** `why`: what the server cannot do now, e.g. "work waits more than 1000 ms on this server" */
  constructor(why: string) {
    super(`overloaded: ${why}; retry after ${RETRY_AFTER_SECONDS} s`, 503);
  }

  static waitedPast(maxDelayMs: number): OverloadedError {
    return new OverloadedError(`work waits more than ${maxDelayMs} ms on this server`);
  }
}

/** What a request outside the CPU's share is told. */
const SATURATED = new OverloadedError("this server's CPU is saturated past capacity");

/** The window whose fastest answer tells whether a queue stands: long enough that a burst alone is no queue. */
export const ANSWER_WINDOW_MS = 500;

/** A window with fewer answers says nothing of a queue: one slow request on an idle server is no overload. */
export const ANSWERS_PER_WINDOW = 20;

/** Two windows in a row whose fastest answer took more than half the bound: a queue stands somewhere. */
export const STANDING_SHARE = 0.5;

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
  private stopSampling: (() => void) | null = null;
  private windowStart = performance.now();
  private windowFastest = Infinity;
  private windowAnswers = 0;
  /** the fastest answer of each of the last two windows, in ms; 0 for one with too few answers to tell */
  private standing: [number, number] = [0, 0];
  private readonly cpu = new CpuShare();

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

  /** The API's listening socket: the requests unread in its connections count as held (`CpuShare`). */
  watchSockets(port: number, family: SocketFamily): void {
    this.cpu.watchSockets(port, family);
  }

  /** The share of new requests taken in while the CPU is saturated (1: all of them). */
  get share(): number {
    return this.cpu.value;
  }

  /** Requests taken in and not yet answered. */
  get inProgress(): number {
    return this.cpu.inProgress;
  }

  /** Requests held as last seen: in progress, and unread in the API's connections (`CpuShare`). */
  get held(): number {
    return this.cpu.held;
  }

  /** Why a new request is refused (`overloaded`, or outside the CPU's share), or null when it is taken in. */
  verdict(now = performance.now()): OverloadedError | null {
    if (!this.on) return null;
    if (this.overloaded(now)) return OverloadedError.waitedPast(this.maxDelayMs);
    // the timer turns every few ms: since its last turn, the loop has been in this one
    return this.cpu.refuses(now - this.lastTick) ? SATURATED : null;
  }

  /**
   * A request taken in: one that `holds` the CPU counts as in progress until the returned function is called (one
   * that waits on a remote server does not).
   */
  hold(holds = true): () => void {
    return this.on && holds ? this.cpu.hold() : () => undefined;
  }

  /** `verdict`, then `hold` when taken in. */
  admit(holds = true, now = performance.now()): (() => void) | OverloadedError {
    return this.verdict(now) ?? this.hold(holds);
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
    if (!this.on || this.stopSampling) return () => undefined;
    this.lastTick = performance.now();
    this.stopSampling = eventLoop.follow((now, lateMs) => {
      this.late = [this.late[1], lateMs];
      this.lastTick = now;
      this.cpu.tick(now);
    });
    return () => {
      this.stopSampling?.();
      this.stopSampling = null;
      this.late = [0, 0];
      this.cpu.reset();
    };
  }
}

/** No admission control: nothing is refused for time. */
export const NO_ADMISSION = new Admission(0);
