import { isDatabaseUnavailable } from '../domain/errors.js';
import { OverloadedError, type Admission } from './admission.js';

/**
 * Runs many small units of work as few groups. At most `maxInFlight` groups run at once; what is submitted
 * meanwhile waits and goes in the next group (up to `maxGroup`). A free slot takes what was submitted once the
 * input already received has been read (the event loop's next check phase): the requests or gateway answers that
 * arrived together go in one group, where the first of them would otherwise go alone and the rest wait for it.
 * An idle server adds only that turn; under load each group carries many, and one transaction's round trips are
 * shared by all of them. Each item gets its own result (or error). When a whole group fails (one item the
 * database refuses, a deadlock between groups) and `alone` is given, its items run again through `alone`, one
 * after another inside the group's slot: one bad item fails alone, without a burst of transactions as large as
 * the group. A group may give its slot up before it ends (`release`, handed to `run`) once what is left is only
 * waited for, such as its last statement's run and its commit's flush: the next group is read and written
 * meanwhile, instead of waiting for a disk (or a synchronous standby) slow to flush. Such a group that then fails
 * runs its items alone outside any slot, still one after another; one that failed because the database cannot serve
 * (a failover) fails all its items at once. With `admission`, an item that has waited its bound for a turn is
 * refused (OverloadedError) at once, never run, and the age of the oldest one is what the admission watches.
 */
export class GroupRunner<I, O> {
  private waiting: { item: I; since: number; resolve: (o: O) => void; reject: (err: unknown) => void }[] = [];
  private running = 0;
  private pumpScheduled = false;
  private expiry: NodeJS.Timeout | null = null;
  /** when each group holding a turn took it, oldest first */
  private readonly holding = new Set<{ since: number }>();

  /** `run` answers each item in order: its result, or the error that item alone gets. */
  constructor(
    private readonly run: (items: I[], release: () => void) => Promise<PromiseSettledResult<O>[]>,
    private readonly limits: { maxInFlight: number; maxGroup: number; admission?: Admission | undefined },
    private readonly alone?: (item: I) => Promise<O>,
  ) {
    // a turn held past the bound (a statement stuck on a lock) holds up whatever comes next as well
    limits.admission?.watch(() => this.waiting[0]?.since ?? this.holding.values().next().value?.since);
  }

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ item, since: performance.now(), resolve, reject });
      this.armExpiry();
      if (this.pumpScheduled) return;
      this.pumpScheduled = true;
      setImmediate(() => {
        this.pumpScheduled = false;
        this.pump();
      });
    });
  }

  /** Refuses, when its bound comes, the oldest item still waiting for a turn, and so on after it. */
  private armExpiry(): void {
    const admission = this.limits.admission;
    if (!admission?.on || this.expiry || !this.waiting.length) return;
    const due = this.waiting[0]!.since + admission.maxDelayMs - performance.now();
    this.expiry = setTimeout(
      () => {
        this.expiry = null;
        const now = performance.now();
        while (this.waiting.length && now - this.waiting[0]!.since >= admission.maxDelayMs)
          this.waiting.shift()!.reject(OverloadedError.waitedPast(admission.maxDelayMs));
        this.armExpiry();
      },
      Math.max(0, due),
    ).unref();
  }

  private pump(): void {
    while (this.running < this.limits.maxInFlight && this.waiting.length > 0) {
      const group = this.waiting.splice(0, this.limits.maxGroup);
      this.running += 1;
      let held = true;
      const turn = { since: performance.now() };
      this.holding.add(turn);
      const release = () => {
        if (!held) return;
        held = false;
        this.running -= 1;
        this.holding.delete(turn);
        this.pump();
      };
      this.run(
        group.map((g) => g.item),
        release,
      )
        .then(
          (results) =>
            group.forEach((g, i) => {
              const r = results[i];
              if (r?.status === 'fulfilled') g.resolve(r.value);
              else g.reject(r ? r.reason : new Error('group commit: no result for an item'));
            }),
          async (err: unknown) => {
            // a database that cannot serve fails each item alone too, one connection attempt after another
            if (!this.alone || isDatabaseUnavailable(err)) return group.forEach((g) => g.reject(err));
            for (const g of group) await this.alone(g.item).then(g.resolve, g.reject);
          },
        )
        .finally(release);
    }
  }
}
