/**
 * Where "now" comes from for everything that waits on the calendar (scheduled sends, local-time waves, pacing):
 * one dependency, so a test moves time forward instead of waiting for it.
 */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
