import type { Logger } from '../platform/logger.js';

/** What runs journeys' due steps (the services' journey engine); the poller only says when. */
export interface JourneySteps {
  /** Runs every batch of entrants due now; answers how many moved. */
  runDue(): Promise<number>;
  /** ms until the next entrant comes due, as the last poll read it (none before the next poll: null). */
  msUntilNextDue(): number | null;
}

/** What began a poll: the interval's tick, or a wake-up at the next due moment. */
type PollCause = 'tick' | 'wake';

/** ms a wake-up comes after the due moment: its timer counts from the loop's cached time, which may lag the clock. */
const WAKE_MARGIN_MS = 5;

/**
 * Runs journeys' due steps every `intervalMs`, and at the moment the next entrant of an active journey comes due when
 * that is sooner (a delay ends on time, not up to an interval late): entrant state and due times live in PostgreSQL,
 * found through the due index and taken with SKIP LOCKED, so any number of workers poll, none keeps a timer per
 * entrant, and entrants due while every worker was down move when one comes back.
 */
export function startJourneyPoller(deps: { steps: JourneySteps; log: Logger; intervalMs: number }) {
  let running: Promise<void> | null = null;
  let wake: NodeJS.Timeout | undefined;
  // a tick or wake-up while a poll runs: one more poll after it, since what came due meanwhile may not have been seen
  let again: PollCause | null = null;
  let stopped = false;
  const run = async (cause: PollCause) => {
    const moved = await deps.steps.runDue();
    if (moved) deps.log.debug({ moved }, 'journey entrants moved');
    const next = deps.steps.msUntilNextDue();
    if (next === null || next >= deps.intervalMs || stopped) return;
    // after a wake-up, the next no sooner than a quarter interval on: entrants coming due one after another still move
    // a few batches an interval, not a poll each
    const at = cause === 'wake' ? Math.max(next, deps.intervalMs / 4) : Math.max(0, next);
    clearTimeout(wake);
    wake = setTimeout(() => poll('wake'), at + WAKE_MARGIN_MS);
    wake.unref();
  };
  function poll(cause: PollCause) {
    if (running) {
      again = again === 'tick' ? 'tick' : cause;
      return;
    }
    running = run(cause)
      .catch((err: unknown) => deps.log.warn({ err }, 'journey poll failed; will try again'))
      .finally(() => {
        running = null;
        const next = again;
        again = null;
        if (next && !stopped) poll(next);
      });
  }
  const timer = setInterval(() => poll('tick'), deps.intervalMs);
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
