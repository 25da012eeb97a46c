/**
 * Failure injection shared by the APNs and FCM mocks.
 *
 * A fault is looked up per request: first a per-token rule, then the queue of "next N requests"
 * rules, then the "a share of all requests" rules (random, for load under faults). Kinds:
 * - status: answer this status and reason (APNs reason / FCM errorCode), optional Retry-After;
 * - delay:  wait `ms`, then handle the request normally (use with a short client timeout);
 * - goaway: send GOAWAY refusing this stream (last-stream-id below it) and close the session;
 * - reset:  RST_STREAM this stream (default code INTERNAL_ERROR).
 */
export type Fault =
  | { type: 'status'; status: number; reason: string; retryAfter?: number | string }
  | { type: 'delay'; ms: number }
  | { type: 'goaway'; errorCode?: number }
  | { type: 'reset'; code?: number };

interface Rule {
  fault: Fault;
  remaining: number;
}

export class FaultPlan {
  private readonly byToken = new Map<string, Rule>();
  private readonly queue: Rule[] = [];
  private readonly shares: { share: number; fault: Fault | (() => Fault) }[] = [];

  /** Applies `fault` to requests for `token`, `times` times (default: until cleared). */
  forToken(token: string, fault: Fault, times = Number.POSITIVE_INFINITY): this {
    this.byToken.set(token, { fault, remaining: times });
    return this;
  }

  /** Applies `fault` to the next `count` requests, whatever their token (queued after earlier next() rules). */
  next(count: number, fault: Fault): this {
    if (count > 0) this.queue.push({ fault, remaining: count });
    return this;
  }

  /**
   * Applies a fault to a random `share` (0..1) of the requests no other rule matched, until cleared; a function
   * picks the fault of each one. Shares of several calls add up (one draw per request).
   */
  sometimes(share: number, fault: Fault | (() => Fault)): this {
    this.shares.push({ share, fault });
    return this;
  }

  clear(): void {
    this.byToken.clear();
    this.queue.length = 0;
    this.shares.length = 0;
  }

  /** The fault for this request, if any; consumes one use. */
  take(token: string | undefined): Fault | undefined {
    const own = token === undefined ? undefined : this.byToken.get(token);
    if (own) {
      own.remaining -= 1;
      if (own.remaining <= 0 && token !== undefined) this.byToken.delete(token);
      return own.fault;
    }
    const head = this.queue[0];
    if (head) {
      head.remaining -= 1;
      if (head.remaining <= 0) this.queue.shift();
      return head.fault;
    }
    let draw = this.shares.length ? Math.random() : 1;
    for (const { share, fault } of this.shares) {
      if (draw < share) return typeof fault === 'function' ? fault() : fault;
      draw -= share;
    }
    return undefined;
  }
}
