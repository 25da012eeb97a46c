import { z } from 'zod';
import { isUuid } from './cursor.js';
import { parseIsoInstant } from './date-math.js';
import { isoInstant } from './delivery-options.js';
import { ValidationError } from './errors.js';

/**
 * What the SDK reports about app use (a session, a push open) and the windows of the daily statistics. The body
 * schemas check each field's shape; the checks that need the clock run with the operation's `now`.
 */

/** The daily statistics, each a column of app_daily_stats (migration 012). */
export const DAILY_METRICS = ['installs', 'opens', 'sessions', 'active_users'] as const;
export type DailyMetric = (typeof DAILY_METRICS)[number];

/** A report may be dated this far back (an SDK sends what it queued offline); older ones are refused. */
export const REPORT_MAX_AGE_DAYS = 7;
/** A phone's clock may run this much ahead: such a date counts as now; further ahead is refused. */
const REPORT_MAX_AHEAD_MS = 60 * 60 * 1000;
/** A session lasts at most a day. */
export const MAX_SESSION_SECONDS = 86_400;
/** The longest window of a daily statistic, in days. */
export const MAX_STATS_DAYS = 366;
/** The window of a daily statistic without from/to: this many days up to today. */
const DEFAULT_STATS_DAYS = 30;

const DAY_MS = 86_400_000;
const instant = isoInstant();

export const sessionReportSchema = z.object(
  {
    session: z.object(
      {
        // made by the SDK, so its start and end reports (and their retries) name the same session
        id: z.string({ error: 'must be a UUID' }).refine(isUuid, 'must be a UUID'),
        started_at: instant.optional(),
        duration: z
          .number({ error: `must be a whole number of seconds from 0 to ${MAX_SESSION_SECONDS}` })
          .int(`must be a whole number of seconds from 0 to ${MAX_SESSION_SECONDS}`)
          .min(0, `must be a whole number of seconds from 0 to ${MAX_SESSION_SECONDS}`)
          .max(MAX_SESSION_SECONDS, `must be at most ${MAX_SESSION_SECONDS} seconds (a day)`)
          .optional(),
      },
      { error: 'must be an object' },
    ),
  },
  { error: 'body must be {"session": {"id", "started_at"?, "duration"?}}' },
);
export type SessionReport = z.infer<typeof sessionReportSchema>['session'];

export const openReportSchema = z.object(
  {
    open: z.object(
      {
        _nid: z
          .string({ error: 'must be the id of a notification of this app (the push carries it)' })
          .refine(isUuid, 'is not a notification of this app'),
        tapped: z.boolean({ error: 'must be true (the push was tapped) or false (the app was opened without a tap)' }),
        opened_at: instant.optional(),
      },
      { error: 'must be an object' },
    ),
  },
  { error: 'body must be {"open": {"_nid", "tapped", "opened_at"?}}' },
);
export type OpenReport = z.infer<typeof openReportSchema>['open'];

/**
 * The instant a report says something happened: now when it gives none or a date slightly ahead (a phone's
 * clock), else its date, which must be within the last REPORT_MAX_AGE_DAYS days.
 */
export function reportedAt(text: string | undefined, now: Date, field: string): Date {
  if (text === undefined) return now;
  const at = parseIsoInstant(text)!; // the schema checked it
  if (at.getTime() > now.getTime() + REPORT_MAX_AHEAD_MS) throw new ValidationError(`${field}: must not be in the future`);
  if (at.getTime() < now.getTime() - REPORT_MAX_AGE_DAYS * DAY_MS)
    throw new ValidationError(`${field}: must be within the last ${REPORT_MAX_AGE_DAYS} days`);
  return at > now ? now : at;
}

/** When a reported session started: its own date, else now minus its duration (an end whose start was lost). */
export function sessionStart(report: SessionReport, now: Date): Date {
  const started = reportedAt(report.started_at, now, 'session.started_at');
  if (report.started_at !== undefined || report.duration === undefined) return started;
  return new Date(now.getTime() - report.duration * 1000);
}

/** A window of UTC days, both ends included, as YYYY-MM-DD. */
export interface DayWindow {
  from: string;
  to: string;
}

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;

/** A YYYY-MM-DD day as the UTC midnight it starts at; null when it is not one (2026-02-30 included). */
function parseDay(text: string): Date | null {
  const m = DAY.exec(text);
  if (!m) return null;
  const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return d.toISOString().startsWith(text) ? d : null;
}

const dayOf = (d: Date) => d.toISOString().slice(0, 10);

function dayParam(text: string | undefined, field: string): Date | null {
  if (text === undefined) return null;
  const day = parseDay(text);
  if (!day) throw new ValidationError(`${field}: must be a date YYYY-MM-DD`);
  return day;
}

/**
 * The days a daily statistic covers: `from` to `to`, both included. Without `to`, today (UTC); without `from`,
 * the DEFAULT_STATS_DAYS days up to `to`. At most MAX_STATS_DAYS days.
 */
export function statsWindow(query: { from?: string | undefined; to?: string | undefined }, now: Date): DayWindow {
  const to = dayParam(query.to, 'to') ?? parseDay(dayOf(now))!;
  const from = dayParam(query.from, 'from') ?? new Date(to.getTime() - (DEFAULT_STATS_DAYS - 1) * DAY_MS);
  if (from > to) throw new ValidationError('from: must not be after to');
  if ((to.getTime() - from.getTime()) / DAY_MS + 1 > MAX_STATS_DAYS)
    throw new ValidationError(`from: the window may span at most ${MAX_STATS_DAYS} days`);
  return { from: dayOf(from), to: dayOf(to) };
}

/** The window of total_installs: up to `to` (default today), from `from` when given, else since the first install. */
export function totalWindow(query: { from?: string | undefined; to?: string | undefined }, now: Date): { from: string | null; to: string } {
  const to = dayParam(query.to, 'to') ?? parseDay(dayOf(now))!;
  const from = dayParam(query.from, 'from');
  if (from && from > to) throw new ValidationError('from: must not be after to');
  return { from: from ? dayOf(from) : null, to: dayOf(to) };
}
