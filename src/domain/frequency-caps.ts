/**
 * Frequency caps (issue 42): an app's ceilings on the pushes one device receives, each over a fixed window of the
 * UTC calendar (this minute, this hour, this day), counted across every notification whose caps apply.
 */

export const CAP_WINDOWS = { minute: 60, hour: 3_600, day: 86_400 } as const;
export type CapWindow = keyof typeof CAP_WINDOWS;

export interface FrequencyCap {
  limit: number;
  window: CapWindow;
}

/** The window of a cap `now` falls in: its length and its start, aligned on the UTC epoch. */
export function capWindowAt(cap: FrequencyCap, now: Date): { seconds: number; start: Date } {
  const seconds = CAP_WINDOWS[cap.window];
  return { seconds, start: new Date(Math.floor(now.getTime() / (seconds * 1000)) * seconds * 1000) };
}

/** The CLI's form, e.g. "3/day,1/hour"; null when it is not one (a window named twice is not one either). */
export function parseFrequencyCaps(text: string): FrequencyCap[] | null {
  const caps: FrequencyCap[] = [];
  for (const part of text.split(',')) {
    const m = /^\s*(\d{1,6})\s*\/\s*(minute|hour|day)\s*$/.exec(part);
    if (!m || Number(m[1]) < 1 || caps.some((c) => c.window === m[2])) return null;
    caps.push({ limit: Number(m[1]), window: m[2] as CapWindow });
  }
  return caps;
}
