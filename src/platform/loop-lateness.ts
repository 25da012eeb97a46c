/** How often the event loop's lateness is sampled: shorter than the turns it tells apart, which it cannot see below. */
const LOOP_SAMPLE_MS = 10;

/** A reader of the samples: when one came (performance.now()) and how late, in ms. */
type LatenessReader = (now: number, lateMs: number) => void;

/**
 * How late the event loop turns, sampled by one timer for every reader in the process (admission control, the
 * listening socket's extra descriptors): a sample due every LOOP_SAMPLE_MS that comes later says the loop was busy
 * that long. The timer runs while anyone reads.
 */
export class LoopLateness {
  private readonly readers = new Set<LatenessReader>();
  private timer: NodeJS.Timeout | null = null;
  private lastSample = 0;

  /** Gives `read` every sample until the returned function is called. */
  follow(read: LatenessReader): () => void {
    this.readers.add(read);
    if (!this.timer) {
      this.lastSample = performance.now();
      this.timer = setInterval(() => this.sample(), LOOP_SAMPLE_MS).unref();
    }
    return () => {
      this.readers.delete(read);
      if (this.readers.size > 0 || !this.timer) return;
      clearInterval(this.timer);
      this.timer = null;
    };
  }

  private sample(): void {
    const now = performance.now();
    const late = Math.max(0, now - this.lastSample - LOOP_SAMPLE_MS);
    this.lastSample = now;
    for (const read of this.readers) read(now, late);
  }
}

/** The process's one event loop, sampled. */
export const eventLoop = new LoopLateness();
