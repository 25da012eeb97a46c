/**
 * A long benchmark's clock: waiting, and progress lines stamped with the time since it began.
 */

const began = performance.now();

/** A line on the way, so a long run shows where it is. */
export const step = (what: string) => console.log(`[${((performance.now() - began) / 1000).toFixed(1)} s] ${what}`);

/** Resolves after `ms`. */
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
