import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { connectionsWithUnread, type SocketFamily } from './unread-requests.js';

/** How often the event loop's utilisation is read and the share of new requests taken in is set anew. */
export const SHARE_WINDOW_MS = 250;

/** A loop busy this much of a window has no CPU left to read what waits in its sockets. */
export const SATURATED_UTILISATION = 0.95;

/** A loop busy less than this much of a window has room to spare: the share comes back twice as fast. */
export const ROOMY_UTILISATION = 0.75;

/**
 * Requests held (in progress, or unread in the kernel's socket buffers) past which a busy loop is past capacity, not
 * at it: a closed set of clients, each sending when answered, holds at most two a client (one in progress, the next
 * unread), 100 for the 50 of an outside check. Past capacity, offered work piles up beyond it.
 */
export const HELD_FLOOR = 128;

/**
 * Requests in progress past which a saturated loop takes no more at once: what clients at capacity hold. Each one more
 * in progress only lengthens every other's wait for the loop's turns; the excess is refused at once instead.
 */
export const IN_PROGRESS_CAP = HELD_FLOOR;

/** How far past the floor the kernel's table is read: the cut is deepest there. */
const READ_UP_TO = 16;

/** The least share of new requests taken in: some still go through, to tell when the CPU is free again. */
export const MIN_SHARE = 0.05;

/**
 * The share of new requests taken in while the CPU is saturated past capacity. Past capacity the taken-in work has
 * the whole CPU, and refusing costs CPU too: the excess waits unread in the kernel's socket buffers, where no queue
 * of the process sees it, for as long as the clients keep sending. So while the loop is saturated
 * (`SATURATED_UTILISATION`) holding more requests than clients at capacity keep (`HELD_FLOOR`), only a share of new
 * requests is taken in, cut a window (`SHARE_WINDOW_MS`) by 30 % or by what is held past the floor if more, and
 * given back 10 points a window otherwise (TCP's AIMD; doubled with room to spare): the taken-in work then leaves the
 * CPU to read and refuse the rest at once.
 */
export class CpuShare {
  private share = 1;
  /** what the requests refused so far have earned towards the next one taken in */
  private credit = 0;
  private inFlight = 0;
  private windowStart = performance.now();
  private mark: EventLoopUtilization = performance.eventLoopUtilization();
  private sockets: { port: number; family: SocketFamily } | undefined;
  /** connections with unread bytes at the last read of the kernel's table (read while saturated only) */
  private unread = 0;
  private reading = false;
  /** whether the last window was saturated */
  private saturated = false;

  /** The share of new requests taken in (1: all of them). */
  get value(): number {
    return this.share;
  }

  /** Requests taken in and not yet answered. */
  get inProgress(): number {
    return this.inFlight;
  }

  /** Requests held as last seen: in progress, and unread in the API's connections at the last read while saturated. */
  get held(): number {
    return this.inFlight + this.unread;
  }

  /** The API's listening socket: the requests unread in its connections count as held. */
  watchSockets(port: number, family: SocketFamily): void {
    this.sockets = { port, family };
  }

  /**
   * Whether a new request is refused: outside the share (spread evenly: a share of 0.25 takes every fourth), or
   * `IN_PROGRESS_CAP` are in progress while the loop is saturated (or this turn of it, `turnMs` long so far).
   */
  refuses(turnMs = 0): boolean {
    // within one long turn the window's share comes too late: what the turn reads at once is bounded here
    if (this.inFlight >= IN_PROGRESS_CAP && (this.saturated || turnMs >= SHARE_WINDOW_MS)) return true;
    if (this.share < 1) {
      this.credit += this.share;
      // a hair below 1 counts as 1: shares such as 0.7 do not add up exactly in floating point
      if (this.credit < 1 - 1e-9) return true;
      this.credit -= 1;
    }
    return false;
  }

  /** A request taken in that holds the CPU: counted as held until the returned function is called. */
  hold(): () => void {
    this.inFlight += 1;
    let done = false;
    return () => {
      if (!done) this.inFlight -= 1;
      done = true;
    };
  }

  /** Sets the share anew once a window has passed: how busy the loop was over it, and what is held now. */
  tick(now: number): void {
    if (now - this.windowStart < SHARE_WINDOW_MS) return;
    const mark = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(mark, this.mark);
    this.mark = mark;
    this.windowStart = now;
    const saturated = (this.saturated = utilization >= SATURATED_UTILISATION);
    if (saturated) this.readUnread();
    else this.unread = 0;
    // the further past the floor, the deeper the cut; with room to spare, the share comes back faster
    const next =
      saturated && this.held > HELD_FLOOR
        ? this.share * Math.min(0.7, HELD_FLOOR / this.held)
        : utilization < ROOMY_UTILISATION
          ? this.share * 2 + 0.1
          : this.share + 0.1;
    // whole hundredths, so that the share comes back to exactly 1
    this.share = Math.max(MIN_SHARE, Math.min(1, Math.round(next * 100) / 100));
    if (this.share === 1) this.credit = 0;
  }

  /** Back to taking everything in (the admission stopped). */
  reset(): void {
    this.share = 1;
    this.saturated = false;
    this.credit = 0;
    this.unread = 0;
  }

  /** Reads the kernel's count off the loop, for the next window (its walk of the socket table takes milliseconds). */
  private readUnread(): void {
    if (!this.sockets || this.reading || this.inFlight > READ_UP_TO * HELD_FLOOR) return;
    this.reading = true;
    const { port, family } = this.sockets;
    connectionsWithUnread(port, family, READ_UP_TO * HELD_FLOOR - this.inFlight)
      .then((count) => (this.unread = count ?? 0))
      .catch(() => (this.unread = 0))
      .finally(() => (this.reading = false));
  }
}
