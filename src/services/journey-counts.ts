import type { Db } from '../db/database.js';
import type { CountDelta, JourneysRepository, StepCounter } from '../db/repositories/journeys.js';
import { END, type JourneyDefinition } from '../domain/journey.js';

/**
 * The counter changes of one transaction, written with it in one statement: an entrant at a step is counted
 * `entered` and `waiting` there, and leaving takes it off `waiting` and adds it to how it left.
 */
export class Counts {
  /** `journeyId`: the journey counted; `of` counts another into the same statement. */
  constructor(
    private readonly journeyId: string,
    private readonly deltas: CountDelta[] = [],
  ) {}

  of(journeyId: string): Counts {
    return new Counts(journeyId, this.deltas);
  }

  add(step: string, counter: StepCounter, n: number): void {
    this.deltas.push({ journeyId: this.journeyId, step, counter, n });
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

  /** The changes so far, for a statement that writes them with its own (JourneyEntrantsRepository.enter). */
  get changes(): readonly CountDelta[] {
    return this.deltas;
  }

  write(db: Db, journeys: JourneysRepository): Promise<void> {
    return journeys.bump(db, this.deltas);
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
