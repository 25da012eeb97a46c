import type { Logger } from '../platform/logger.js';

/** What runs journeys' due steps (the services' journey engine); the poller only says when. */
export interface JourneySteps {
  /** Runs every batch of entrants due now; answers how many moved. */
  runDue(): Promise<number>;
}

/**
 * Runs journeys' due steps every `intervalMs`: entrant state and due times live in PostgreSQL, found through
 * the due index and taken with SKIP LOCKED, so any number of workers poll, none keeps a timer per entrant, and
 * entrants due while every worker was down move when one comes back.
 */
export function startJourneyPoller(deps: { steps: JourneySteps; log: Logger; intervalMs: number }) {
  let running: Promise<void> | null = null;
  const poll = () => {
    running ??= deps.steps
      .runDue()
      .then((moved) => {
        if (moved) deps.log.debug({ moved }, 'journey entrants moved');
      })
      .catch((err: unknown) => deps.log.warn({ err }, 'journey poll failed; will try again'))
      .finally(() => (running = null));
  };
  const timer = setInterval(poll, deps.intervalMs);
  timer.unref();
  return {
    /** Stops polling and waits for the poll under way, whose batch commits or rolls back whole. */
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}
