import { instantOf, isTimeZone, wallTimeAt } from './schedule.js';
import { quietEnd, type QuietHours } from './quiet-hours.js';

/**
 * Each device's own times: its zone, the next time its wall clock reads a time of day, and its best hour (from its
 * activity by local hour), shared by a journey's delays and a notification's best-time send. Pure.
 */

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

/** The local hour a device with no activity is sent to at its best time. */
export const DEFAULT_BEST_HOUR = 10;

/** How far back a device's sessions and opens count towards its best time. */
export const BEST_TIME_HISTORY_MS = 28 * 86_400_000;

/** The window a delay until the best time (with no `within`) and a notification's best-time send look ahead over. */
export const BEST_TIME_WITHIN_MS = 86_400_000;

/** The next start of each local hour (0 to 23) after `now` in `zone`: the instants a best time is chosen among. */
export function hourStarts(now: Date, zone: string): Date[] {
  return Array.from({ length: 24 }, (_, hour) => nextLocalTime(`${String(hour).padStart(2, '0')}:00`, zone, now));
}

/**
 * A device's best time within `withinMs` of `now`: the start of the local hour in which it was most often active
 * (sessions, opens), the earliest of equals; with no activity, DEFAULT_BEST_HOUR. When no hour it was active in
 * (or the default) falls in the window, the first hour that starts in it; when none starts in it, the window's end.
 */
export function bestTime(
  now: Date,
  zone: string,
  withinMs: number,
  activity?: readonly number[],
  starts: readonly Date[] = hourStarts(now, zone),
): Date {
  const end = now.getTime() + withinMs;
  const active = activity?.some((n) => n > 0) ?? false;
  const score = (hour: number) => (active ? activity![hour]! : hour === DEFAULT_BEST_HOUR ? 1 : 0);
  let best: { at: Date; score: number } | null = null;
  for (let hour = 0; hour < 24; hour++) {
    const at = starts[hour]!;
    if (at.getTime() > end) continue;
    const candidate = { at, score: score(hour) };
    if (!best || candidate.score > best.score || (candidate.score === best.score && at < best.at)) best = candidate;
  }
  return best?.at ?? new Date(end);
}

/**
 * The instants a best-time send reaches its devices at, with the devices of each, in time order: each device's best
 * time within the next day (`bestTime`, as a journey's delay until the best time takes it) from its activity by
 * local hour (none: the default hour), held to the end of its quiet hours when it falls in them (held, never dropped:
 * the hour is the device's own).
 */
export function bestTimeSlots(
  devices: readonly { id: string; zone: string }[],
  activity: ReadonlyMap<string, readonly number[]>,
  now: Date,
  quiet: QuietHours | null,
): { at: Date; ids: string[] }[] {
  const slots = new Map<number, string[]>();
  // the wall-clock math is per zone, not per device: a page of thousands of devices has a few hundred zones
  const startsOf = new Map<string, Date[]>();
  const held = new Map<string, number>();
  for (const d of devices) {
    let starts = startsOf.get(d.zone);
    if (!starts) startsOf.set(d.zone, (starts = hourStarts(now, d.zone)));
    const best = bestTime(now, d.zone, BEST_TIME_WITHIN_MS, activity.get(d.id), starts);
    const key = `${d.zone} ${best.getTime()}`;
    let at = held.get(key);
    if (at === undefined) held.set(key, (at = ((quiet && quietEnd(best, d.zone, quiet)) || best).getTime()));
    const ids = slots.get(at);
    if (ids) ids.push(d.id);
    else slots.set(at, [d.id]);
  }
  return [...slots.entries()].sort(([a], [b]) => a - b).map(([at, ids]) => ({ at: new Date(at), ids }));
}
