import type { Logger } from '../platform/logger.js';

/** What runs journeys' due steps (the services' journey engine); the poller only says when. */
export interface JourneySteps {
  /** Runs every batch of entrants due now; answers how many moved. */
  runDue(): Promise<number>;
  /** ms until the next entrant comes due, as the last poll read it (none waiting: null). */
  msUntilNextDue(): number | null;
}

/**
 * Runs journeys' due steps every `intervalMs`, and at the moment the next entrant comes due when that is sooner (a
 * delay ends on time, not up to an interval late): entrant state and due times live in PostgreSQL, found through the
 * due index and taken with SKIP LOCKED, so any number of workers poll, none keeps a timer per entrant, and entrants
 * due while every worker was down move when one comes back.
 */
export function startJourneyPoller(deps: { steps: JourneySteps; log: Logger; intervalMs: number }) {
  let running: Promise<void> | null = null;
  let wake: NodeJS.Timeout | undefined;
  // a tick or wake-up while a poll runs: one more poll after it, since what came due meanwhile may not have been seen
  let again: 'tick' | 'wake' | null = null;
  let stopped = false;
  const wakeIn = (ms: number) => {
    clearTimeout(wake);
    // a millisecond past the due moment: the poll's clock must have reached it
    wake = setTimeout(() => poll(false), Math.max(0, ms) + 1);
    wake.unref();
  };
  const run = async (byTick: boolean) => {
    const moved = await deps.steps.runDue();
    if (moved) deps.log.debug({ moved }, 'journey entrants moved');
    // a wake-up's poll sets none: one a tick at most, so entrants coming due one after another still move a tick's
    // worth at a time, and those of a paused journey wake a worker once a tick at most
    if (!byTick) return;
    const next = deps.steps.msUntilNextDue();
    if (next !== null && next < deps.intervalMs && !stopped) wakeIn(next);
  };
  function poll(byTick: boolean) {
    if (running) {
      again = byTick || again === 'tick' ? 'tick' : 'wake';
      return;
    }
    running = run(byTick)
      .catch((err: unknown) => deps.log.warn({ err }, 'journey poll failed; will try again'))
      .finally(() => {
        running = null;
        const next = again;
        again = null;
        if (next && !stopped) poll(next === 'tick');
      });
  }
  const timer = setInterval(() => poll(true), deps.intervalMs);
  timer.unref();
  return {
    /** Stops polling and waits for the poll under way, whose batch commits or rolls back whole. */
    stop: async () => {
      stopped = true;
      clearInterval(timer);
      clearTimeout(wake);
      await running;
    },
  };
}
