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
