import type { Db } from '../db/database.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { Clock } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import type { NotificationScheduler } from './jobs.js';

/**
 * Releases notifications whose send time (or next local-time wave) has come: their fan-out is enqueued. The
 * schedule lives in PostgreSQL, not in delayed jobs, so a send due while every process was down goes out when
 * one comes back, a cancel needs nothing removed from the queue, and the clock is one dependency.
 */
export function startDuePoller(deps: {
  db: Db;
  log: Logger;
  notifications: NotificationsRepository;
  scheduler: NotificationScheduler;
  clock: Clock;
  intervalMs: number;
}) {
  let running = false;
  const poll = async () => {
    if (running) return;
    running = true;
    try {
      for (;;) {
        const due = await deps.notifications.releaseDue(deps.db, deps.clock.now(), 500);
        for (const n of due)
          // an A/B test waiting for its winner is due when its metric picks one
          await (n.ab_stage === 'waiting'
            ? deps.scheduler.decideWinner(n.id, n.generation)
            : deps.scheduler.schedule(n.id, n.generation, n.wave, n.ab_stage === 'rest'));
        if (due.length) deps.log.info({ count: due.length }, 'released notifications due');
        if (due.length < 500) break;
      }
    } catch (err) {
      deps.log.warn({ err }, 'due poll failed; will try again');
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void poll(), deps.intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
