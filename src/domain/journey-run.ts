import { END, exitsOf, parseJourneyDuration, type DelayStep, type JourneyDefinition, type JourneyStep } from './journey.js';
import { instantOf, isTimeZone, wallTimeAt } from './schedule.js';

/** Where an entrant goes from a step: a step id, or END. */
export function wayOn(definition: JourneyDefinition, stepId: string, field: 'next' | 'on_event' | 'on_timeout' | 'then' | 'else'): string {
  const i = definition.steps.findIndex((s) => s.id === stepId);
  if (i < 0) return END;
  const exits = exitsOf(definition.steps, i);
  return (exits.find((e) => e.field === field) ?? exits[0]!).to;
}

export function stepOf(definition: JourneyDefinition, stepId: string): JourneyStep | undefined {
  return definition.steps.find((s) => s.id === stepId);
}

/** The zone a device's local times are in, as local-time sends take it: its own, else the app's default, else UTC. */
export function zoneOf(deviceZone: string | null, appZone: string | null): string {
  if (deviceZone && isTimeZone(deviceZone)) return deviceZone;
  return appZone && isTimeZone(appZone) ? appZone : 'UTC';
}

/** The first instant after `now` at which the wall clock in `zone` reads `hhmm`. */
export function nextLocalTime(hhmm: string, zone: string, now: Date): Date {
  const [hour, minute] = hhmm.split(':').map(Number) as [number, number];
  const today = wallTimeAt(zone, now);
  for (let days = 0; days < 3; days++) {
    const date = new Date(Date.UTC(today.year, today.month - 1, today.day + days));
    const at = instantOf(
      { year: date.getUTCFullYear(), month: date.getUTCMonth() + 1, day: date.getUTCDate(), hour, minute, second: 0 },
      zone,
    );
    if (at.getTime() > now.getTime()) return at;
  }
  throw new RangeError(`no ${hhmm} in ${zone} within two days of ${now.toISOString()}`);
}

/** When a delay that starts at `now` ends for a device in `zone`. */
export function delayEnd(step: DelayStep, now: Date, zone: string): Date {
  if (step.duration !== undefined) return new Date(now.getTime() + parseJourneyDuration(step.duration)!);
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

/**
 * Where an entrant starts: a first step that is a delay of a fixed duration starts waiting at once (what the step
 * would do when run); any other is due now, for the engine to run.
 */
export function firstStep(definition: JourneyDefinition, now: Date): { stepId: string; phase: 'arrived' | 'waiting'; dueAt: Date } {
  const step = definition.steps[0]!;
  if (step.type === 'delay' && step.duration !== undefined)
    return { stepId: step.id, phase: 'waiting', dueAt: new Date(now.getTime() + parseJourneyDuration(step.duration)!) };
  return { stepId: step.id, phase: 'arrived', dueAt: now };
}
