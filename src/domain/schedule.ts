import { z } from 'zod';

/**
 * Send times: one instant (`send_at` with an offset), a wall time in each device's own zone (`send_at` without
 * one, `local_time: true`), or each device's best hour (`send_at: "best_time"`). Pure: "now" is always a parameter.
 */

const WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/;
const LOCAL = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/;
const DAY_MS = 86_400_000;
/** Local time is "past" only when it is past everywhere, "too far" when it is even at UTC-12. */
const EARLIEST_OFFSET_MS = 14 * 3_600_000;
const LATEST_OFFSET_MS = -12 * 3_600_000;
export const MAX_SCHEDULE_AHEAD_MS = 366 * DAY_MS;
/** `send_at`'s value for a send that reaches each device at its own best hour of the next day (journey-run.ts). */
export const BEST_TIME = 'best_time';
/** What a best-time send cannot go with: a second timing, a pace, an A/B test's stages, one expiry for a day of waves. */
const NOT_WITH_BEST_TIME = ['local_time', 'throttle', 'variants', 'ttl', 'expires_at'] as const;

/** The request fields, spread into a notification object; their cross-checks are `sendAtProblem`. */
export const scheduleFields = {
  send_at: z.string({ error: 'must be an ISO 8601 date-time string' }).optional(),
  local_time: z.boolean({ error: 'must be a boolean' }).optional(),
};

export interface LocalDateTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

/** `YYYY-MM-DDTHH:mm[:ss]` without offset, or null when it is not one (or names no real calendar date). */
export function parseLocalDateTime(text: string): LocalDateTime | null {
  const m = LOCAL.exec(text);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1).map((v) => Number(v ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const probe = new Date(Date.UTC(year, month - 1, day, hour, minute, second));
  if (probe.getUTCMonth() !== month - 1 || probe.getUTCDate() !== day || hour > 23 || minute > 59 || second > 59) return null;
  return { year, month, day, hour, minute, second };
}

/**
 * What is wrong with a request's send time at `now`, as `<object>.send_at: message`, or null. Checked once the
 * shapes parsed: an instant needs an offset, a local time must have none; in the past or more than a year ahead is
 * refused (for a local time: past in every zone, or beyond a year even in the last zone to reach it). A message
 * (`object: 'message'`) has no local time to suggest.
 */
export function sendAtProblem(
  request: { send_at?: string; local_time?: boolean } & Partial<Record<(typeof NOT_WITH_BEST_TIME)[number], unknown>>,
  now: Date,
  { object = 'notification', localTimeOption = true } = {},
): string | null {
  if (request.send_at === BEST_TIME) {
    // a message, a Live Activity or a journey's step has a time of its own to keep
    if (object !== 'notification') return `${object}.send_at: "best_time" is for a notification's own send only`;
    const other = NOT_WITH_BEST_TIME.find((field) => request[field] !== undefined && request[field] !== false);
    return other ? `${object}.${other}: cannot be combined with send_at: "best_time"` : null;
  }
  const problem = sendAtRule(request, now, localTimeOption ? ' (or local_time: true, or "best_time")' : '');
  return problem && `${object}.send_at: ${problem}`;
}

function sendAtRule(request: { send_at?: string; local_time?: boolean }, now: Date, hint: string): string | null {
  const { send_at: sendAt, local_time: localTime } = request;
  if (sendAt === undefined) return localTime ? 'is required with local_time' : null;
  let earliest: number;
  let latest: number;
  if (localTime) {
    const local = parseLocalDateTime(sendAt);
    if (!local) return 'with local_time must be a wall time without offset, as 2026-12-24T09:00';
    const asUtc = wallAsUtc(local);
    earliest = asUtc - EARLIEST_OFFSET_MS;
    latest = asUtc - LATEST_OFFSET_MS;
  } else {
    const at = Date.parse(sendAt);
    if (!WITH_OFFSET.test(sendAt) || Number.isNaN(at))
      return `must be an ISO 8601 date-time with an offset, as 2026-12-24T09:00:00+01:00${hint}`;
    earliest = latest = at;
  }
  if (latest <= now.getTime()) return 'is in the past';
  if (earliest > now.getTime() + MAX_SCHEDULE_AHEAD_MS) return 'is more than a year ahead';
  return null;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(zone, f);
  }
  return f;
}

/** An IANA zone name (Intl also takes offsets such as "+01:00": those are not zones a device lives in). */
export function isTimeZone(zone: string): boolean {
  if (!/^[A-Za-z]/.test(zone)) return false;
  try {
    formatter(zone);
    return true;
  } catch {
    return false;
  }
}

/** The wall time in `zone` at an instant. */
export function wallTimeAt(zone: string, at: Date): LocalDateTime {
  const parts: Record<string, number> = {};
  for (const p of formatter(zone).formatToParts(at)) if (p.type !== 'literal') parts[p.type] = Number(p.value);
  return { year: parts.year!, month: parts.month!, day: parts.day!, hour: parts.hour!, minute: parts.minute!, second: parts.second! };
}

function wallAsUtc(t: LocalDateTime): number {
  return Date.UTC(t.year, t.month - 1, t.day, t.hour, t.minute, t.second);
}

/** The zone's offset from UTC at an instant, in ms. */
function offsetAt(zone: string, ms: number): number {
  return wallAsUtc(wallTimeAt(zone, new Date(ms))) - Math.floor(ms / 1000) * 1000;
}

/**
 * The instant a wall time happens in a zone. A wall time that occurs twice (clocks going back) goes out at the
 * first; one that does not exist (clocks going forward) goes out as far after the gap's start as it was asked
 * after it, so 02:30 in a one-hour gap is 03:30, as hosted services do.
 */
export function instantOf(local: LocalDateTime, zone: string): Date {
  const asUtc = wallAsUtc(local);
  // the offsets a day either side: equal unless a transition is near, then both candidates are tried
  const before = offsetAt(zone, asUtc - DAY_MS);
  const after = offsetAt(zone, asUtc + DAY_MS);
  const candidates = [...new Set([asUtc - before, asUtc - after])].sort((a, b) => a - b);
  for (const c of candidates) if (offsetAt(zone, c) === asUtc - c) return new Date(c);
  return new Date(asUtc - before); // in a gap: the offset from before it carries the wall time past the gap
}

export interface LocalTimePlan {
  /** zones grouped by the instant their wall time comes, in time order */
  waves: { at: Date; zones: string[] }[];
  /** zones whose wall time had already passed at `now` */
  past: string[];
}

/** One pass per instant: every zone whose wall time falls then, and the zones already past it. */
export function planLocalTime(wallTime: string, zones: readonly string[], now: Date): LocalTimePlan {
  const local = parseLocalDateTime(wallTime);
  if (!local) throw new RangeError(`not a local date-time: ${wallTime}`);
  const byInstant = new Map<number, string[]>();
  const past: string[] = [];
  for (const zone of zones) {
    const at = instantOf(local, zone).getTime();
    if (at <= now.getTime()) past.push(zone);
    else byInstant.set(at, [...(byInstant.get(at) ?? []), zone]);
  }
  const waves = [...byInstant.entries()].sort(([a], [b]) => a - b).map(([at, z]) => ({ at: new Date(at), zones: z }));
  return { waves, past };
}

/** Whether an instant falls within the given wall-clock minute in a zone (the benchmark's check). */
export function isInLocalMinute(at: Date, zone: string, local: LocalDateTime): boolean {
  const w = wallTimeAt(zone, at);
  return w.year === local.year && w.month === local.month && w.day === local.day && w.hour === local.hour && w.minute === local.minute;
}
