import { createHash } from 'node:crypto';
import { END, exitsOf, parseJourneyDuration, type DelayStep, type JourneyDefinition, type JourneyStep, type SplitStep } from './journey.js';
import { BEST_TIME_WITHIN_MS, bestTime, nextLocalTime } from './best-time.js';
import { historyEntry, type HistoryEntry } from './journey-history.js';

/** Where an entrant goes from a step: a step id, or END. */
export function wayOn(definition: JourneyDefinition, stepId: string, field: string): string {
  const i = definition.steps.findIndex((s) => s.id === stepId);
  if (i < 0) return END;
  const exits = exitsOf(definition.steps, i);
  return (exits.find((e) => e.field === field) ?? exits[0]!).to;
}

export function stepOf(definition: JourneyDefinition, stepId: string): JourneyStep | undefined {
  return definition.steps.find((s) => s.id === stepId);
}

/**
 * When a delay that starts at `now` ends for a device in `zone`; a delay until the best time reads the device's
 * activity by local hour (`activity`: 24 counts, absent when it has none).
 */
export function delayEnd(step: DelayStep, now: Date, zone: string, activity?: readonly number[]): Date {
  if (step.duration !== undefined) return new Date(now.getTime() + parseJourneyDuration(step.duration)!);
  if (step.until !== undefined)
    return bestTime(now, zone, step.within ? parseJourneyDuration(step.within)! : BEST_TIME_WITHIN_MS, activity);
  return nextLocalTime(step.until_local_time!, zone, now);
}

/**
 * A re-entry rule as the entry statement applies it (JourneyEntrantsRepository.enter): an entrant whose last entry
 * has left may enter again when `afterExit`, once `afterMs` have passed since that entry; one still inside never.
 */
export function reEntryRule(reEntry: JourneyDefinition['re_entry']): { afterExit: boolean; afterMs: number } {
  if (reEntry === 'never') return { afterExit: false, afterMs: 0 };
  if (reEntry === 'after_exit') return { afterExit: true, afterMs: 0 };
  return { afterExit: true, afterMs: parseJourneyDuration(reEntry.after)! };
}

/** Where an entrant is once it arrives at a step: due there now, or already waiting (`arrival`). */
export interface Arrival {
  stepId: string;
  phase: 'arrived' | 'waiting';
  dueAt: Date;
  /** while waiting at a wait_for: its event and where that event leads */
  waitEvent: string | null;
  onEvent: string | null;
}

/**
 * How an entrant arrives at a step at `now`: a wait_for, or a delay of a fixed duration, begins waiting in the
 * statement that moves it there (what the step would do when run), so an event that comes before the next poll is
 * not missed; any other step is due now, for the engine to run. END is not a step: the caller leaves.
 */
export function arrival(definition: JourneyDefinition, stepId: string, now: Date): Arrival {
  const step = stepOf(definition, stepId);
  const at = { stepId, waitEvent: null, onEvent: null };
  if (step?.type === 'delay' && step.duration !== undefined)
    return { ...at, phase: 'waiting', dueAt: new Date(now.getTime() + parseJourneyDuration(step.duration)!) };
  if (step?.type === 'wait_for')
    return {
      stepId,
      phase: 'waiting',
      dueAt: new Date(now.getTime() + parseJourneyDuration(step.timeout)!),
      waitEvent: step.event,
      onEvent: wayOn(definition, step.id, 'on_event'),
    };
  return { ...at, phase: 'arrived', dueAt: now };
}

/** Where an entrant starts: its arrival at the first step. */
export function firstStep(definition: JourneyDefinition, now: Date): Arrival {
  return arrival(definition, definition.steps[0]!.id, now);
}

/** A step of a journey version an entrant begins waiting at as it arrives (`arrival`), for a statement to apply. */
export interface WaitingArrival {
  journeyId: string;
  version: number;
  stepId: string;
  waitMs: number;
  waitEvent: string | null;
  onEvent: string | null;
}

/** The steps of a version that begin waiting on arrival. */
export function waitingArrivals(journeyId: string, version: number, definition: JourneyDefinition): WaitingArrival[] {
  const epoch = new Date(0);
  return definition.steps.flatMap((s) => {
    const a = arrival(definition, s.id, epoch);
    if (a.phase !== 'waiting') return [];
    return [{ journeyId, version, stepId: s.id, waitMs: a.dueAt.getTime(), waitEvent: a.waitEvent, onEvent: a.onEvent }];
  });
}

/** The history entry of an arrival that began waiting at `now`. */
export function waitingEntry(now: Date, a: { stepId: string; dueAt: Date; waitEvent: string | null }): HistoryEntry {
  return historyEntry(now, a.stepId, 'waiting', { u: a.dueAt.getTime(), ...(a.waitEvent !== null && { e: a.waitEvent }) });
}

/** The path of a split an entrant takes: a hash of its id and the step's into 0..99, over the paths' percentages in order. */
export function splitPath(step: SplitStep, entrantId: string): SplitStep['paths'][number] {
  const bucket = createHash('sha256').update(`${entrantId}:${step.id}`).digest().readUInt32BE(0) % 100;
  let upTo = 0;
  for (const path of step.paths) {
    upTo += path.percent;
    if (bucket < upTo) return path;
  }
  return step.paths.at(-1)!;
}

/**
 * Whether running `step` reads its entrants' histories: a webhook's attempts, a digest's window, a branch on the
 * digest count, and a send's `data.digest` when the journey has a digest step.
 */
export function stepReadsHistory(definition: JourneyDefinition, step: JourneyStep | undefined): boolean {
  if (!step) return false;
  if (step.type === 'webhook' || step.type === 'digest') return true;
  if (step.type === 'branch') return step.digest_count !== undefined;
  return step.type === 'send' && definition.steps.some((s) => s.type === 'digest');
}

/** A webhook step's attempt for an entrant: its number, and the entrant's seq when it arrived (its requests' id). */
export function webhookAttempt(history: readonly HistoryEntry[], stepId: string, seq: number): { attempt: number; arrivalSeq: number } {
  const last = history.at(-1);
  // an attempt that is to be made again ends the history (the entrant waits at the step for it)
  if (last && last.s === stepId && last.k === 'webhook' && last.to === undefined && last.a !== undefined)
    return { attempt: last.a + 1, arrivalSeq: last.q ?? seq };
  return { attempt: 1, arrivalSeq: seq };
}

/** Whether a webhook answer (null: none came) is worth another attempt: no answer, a timeout, too many requests, a 5xx. */
export function webhookRetryable(status: number | null): boolean {
  return status === null || status === 408 || status === 429 || status >= 500;
}

/** The count of the digest's event the entrant had when its window began (its waiting entry at the step). */
export function digestBaseline(history: readonly HistoryEntry[], stepId: string): number {
  for (let i = history.length - 1; i >= 0; i--) {
    const h = history[i]!;
    if (h.s === stepId && h.k === 'waiting') return h.b ?? 0;
  }
  return 0;
}

/** The latest digest of the entrant's history: its event and count, as templates read them (`data.digest`). */
export function lastDigest(history: readonly HistoryEntry[]): { event: string; count: number } | null {
  for (let i = history.length - 1; i >= 0; i--) {
    const h = history[i]!;
    if (h.k === 'digest') return { event: h.e ?? '', count: h.x ?? 0 };
  }
  return null;
}
