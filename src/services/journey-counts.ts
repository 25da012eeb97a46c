import type { Db } from '../db/database.js';
import type { CountDelta, JourneysRepository, StepCounter } from '../db/repositories/journeys.js';
import { END, type JourneyDefinition } from '../domain/journey.js';

/**
 * The counter changes of one transaction, written with it in one statement: an entrant at a step is counted
 * `entered` and `waiting` there, and leaving takes it off `waiting` and adds it to how it left. Summed as they
 * come (a due batch is thousands of changes of a few counters), by journey, step and counter.
 */
export class Counts {
  /** `journeyId`: the journey counted; `of` counts another into the same sums. */
  constructor(
    private readonly journeyId: string,
    private readonly sums: Map<string, Map<string, Map<StepCounter, number>>> = new Map(),
  ) {}

  of(journeyId: string): Counts {
    return new Counts(journeyId, this.sums);
  }

  add(step: string, counter: StepCounter, n: number): void {
    let steps = this.sums.get(this.journeyId);
    if (!steps) this.sums.set(this.journeyId, (steps = new Map()));
    let counters = steps.get(step);
    if (!counters) steps.set(step, (counters = new Map()));
    counters.set(counter, (counters.get(counter) ?? 0) + n);
  }

  arrive(step: string, n = 1): void {
    if (step === END) return;
    this.add(step, 'entered', n);
    this.add(step, 'waiting', n);
  }

  leave(step: string, how: StepCounter, n = 1): void {
    if (step === END) return;
    this.add(step, 'waiting', -n);
    this.add(step, how, n);
  }

  move(from: string, to: string): void {
    this.leave(from, 'passed');
    this.arrive(to);
  }

  /** The sums so far, those that are not 0. */
  private get changes(): CountDelta[] {
    const out: CountDelta[] = [];
    for (const [journeyId, steps] of this.sums)
      for (const [step, counters] of steps) for (const [counter, n] of counters) if (n !== 0) out.push({ journeyId, step, counter, n });
    return out;
  }

  write(db: Db, journeys: JourneysRepository): Promise<void> {
    return journeys.bump(db, this.changes);
  }
}

/** Journey versions' definitions, kept once read: a version never changes. */
export class JourneyVersions {
  private readonly kept = new Map<string, JourneyDefinition>();
  constructor(private readonly journeys: JourneysRepository) {}

  async get(db: Db, journeyId: string, version: number): Promise<JourneyDefinition> {
    const key = `${journeyId}:${version}`;
    let found = this.kept.get(key);
    if (!found) {
      found = await this.journeys.definition(db, journeyId, version);
      if (!found) throw new Error(`version ${version} of journey ${journeyId} is missing`);
      this.kept.set(key, found);
    }
    return found;
  }
}
