import { z } from 'zod';
import { instantOf, wallTimeAt } from './schedule.js';

/**
 * Quiet hours (issue 42): a window of each device's own wall clock (its time_zone, else the app's default zone) in
 * which no push arrives. A push due inside it is held to the window's end (`hold`) or not sent and counted (`drop`).
 * Pure: the plan is made per zone when the notification is created, as a local-time send's is.
 */

const hhmm = z
  .string({ error: 'must be a time of day, HH:MM' })
  .regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be a time of day, HH:MM (00:00 to 23:59)');

export const quietHoursSchema = z
  .strictObject(
    { start: hhmm, end: hhmm, then: z.enum(['hold', 'drop'], { error: 'must be "hold" or "drop"' }).default('hold') },
    { error: (issue) => (issue.code === 'invalid_type' ? 'must be {"start": "22:00", "end": "08:00", "then": "hold"|"drop"}' : undefined) },
  )
  .refine((q) => q.start !== q.end, { path: ['end'], message: 'must differ from start' });

export type QuietHours = z.output<typeof quietHoursSchema>;

const minutesOf = (hm: string) => Number(hm.slice(0, 2)) * 60 + Number(hm.slice(3, 5));

/** When the window that `at` falls in ends, in `zone`; null when `at` is outside the window. */
export function quietEnd(at: Date, zone: string, q: QuietHours): Date | null {
  const w = wallTimeAt(zone, at);
  const m = w.hour * 60 + w.minute;
  const start = minutesOf(q.start);
  const end = minutesOf(q.end);
  // a window over midnight (22:00-08:00) ends the next day when `at` is before midnight
  const inside = start < end ? m >= start && m < end : m >= start || m < end;
  if (!inside) return null;
  const day = new Date(Date.UTC(w.year, w.month - 1, w.day + (start > end && m >= start ? 1 : 0)));
  const local = { year: day.getUTCFullYear(), month: day.getUTCMonth() + 1, day: day.getUTCDate(), hour: 0, minute: 0, second: 0 };
  return instantOf({ ...local, hour: Math.floor(end / 60), minute: end % 60 }, zone);
}

/**
 * The waves of zones once quiet hours apply to when each zone is due: a zone due inside its window goes at the
 * window's end (hold) or is dropped; zones due at one instant go together, in time order.
 */
export function quietWaves(
  due: { at: Date; zones: readonly string[] }[],
  q: QuietHours,
): { waves: { at: Date; zones: string[] }[]; dropped: string[] } {
  const byInstant = new Map<number, string[]>();
  const dropped: string[] = [];
  for (const wave of due)
    for (const zone of wave.zones) {
      const end = quietEnd(wave.at, zone, q);
      if (end && q.then === 'drop') dropped.push(zone);
      else {
        const at = (end ?? wave.at).getTime();
        byInstant.set(at, [...(byInstant.get(at) ?? []), zone]);
      }
    }
  const waves = [...byInstant.entries()].sort(([a], [b]) => a - b).map(([at, zones]) => ({ at: new Date(at), zones }));
  return { waves, dropped };
}

/** A notification's `quiet_hours`: a window, or false to send without the app's. */
export const quietHoursField = z.unknown().transform((value, ctx): QuietHours | false => {
  if (value === false) return false;
  const parsed = quietHoursSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
  return z.NEVER;
});

/** The quiet hours a notification goes out under: its own, none when it says false, else the app's. */
export function quietHoursOf(asked: QuietHours | false | undefined, app: QuietHours | null): QuietHours | null {
  return asked === false ? null : (asked ?? app);
}

/** The app setting as the CLI takes it: `22:00-08:00`, with `/drop` (or `/hold`, the default) after it. */
export function parseQuietHoursSetting(text: string): QuietHours | null {
  const m = /^(\d\d:\d\d)-(\d\d:\d\d)(?:\/(hold|drop))?$/.exec(text);
  const parsed = m && quietHoursSchema.safeParse({ start: m[1], end: m[2], then: m[3] });
  return parsed?.success ? parsed.data : null;
}
