import { z } from 'zod';

/**
 * Frequency caps (issue 42): an app's ceilings on the pushes one device receives, each over a rolling window (the
 * last minute, hour or day before the push), counted across every notification whose caps apply.
 */

export const CAP_WINDOWS = { minute: 60, hour: 3_600, day: 86_400 } as const;
export type CapWindow = keyof typeof CAP_WINDOWS;
/** The longest window, in seconds: a device's pushes older than this count in no cap. */
export const LONGEST_CAP_WINDOW = Math.max(...Object.values(CAP_WINDOWS));
/** The largest N of a cap: a device's row keeps its last N send times, so N stays small (a cap, not a quota). */
export const MAX_CAP_LIMIT = 1_000;

export interface FrequencyCap {
  limit: number;
  window: CapWindow;
}

/** The caps as the API takes them: `[{"limit": 3, "window": "day"}, …]`, each window once. */
export const frequencyCapsSchema = z
  .array(
    z.strictObject({
      limit: z
        .number({ error: 'must be a whole number' })
        .int('must be a whole number')
        .min(1, 'must be at least 1')
        .max(MAX_CAP_LIMIT, `must be at most ${MAX_CAP_LIMIT}`),
      window: z.enum(['minute', 'hour', 'day'], { error: 'must be "minute", "hour" or "day"' }),
    }),
    { error: 'must be a list of {"limit": N, "window": "minute"|"hour"|"day"}, or null' },
  )
  .min(1, 'must name at least one cap (null removes them)')
  .superRefine((caps, ctx) => {
    caps.forEach((c, i) => {
      if (caps.findIndex((o) => o.window === c.window) < i)
        ctx.addIssue({ code: 'custom', path: [i, 'window'], message: 'is named twice' });
    });
  });

/** The CLI's form, e.g. "3/day,1/hour"; null when it is not one (a window named twice is not one either). */
export function parseFrequencyCaps(text: string): FrequencyCap[] | null {
  const caps: FrequencyCap[] = [];
  for (const part of text.split(',')) {
    const m = /^\s*(\d{1,4})\s*\/\s*(minute|hour|day)\s*$/.exec(part);
    if (!m || Number(m[1]) < 1 || Number(m[1]) > MAX_CAP_LIMIT || caps.some((c) => c.window === m[2])) return null;
    caps.push({ limit: Number(m[1]), window: m[2] as CapWindow });
  }
  return caps;
}
