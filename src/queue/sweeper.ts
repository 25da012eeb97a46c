import type { Db } from '../db/database.js';
import type { NotificationScheduler } from './jobs.js';
import type { DeliveryRepository } from '../db/repositories/delivery.js';
import type { Logger } from '../platform/logger.js';

/**
 * Re-enqueues notifications that made no progress for a while: the enqueue after commit failed, or the
 * queue lost its jobs (a Redis restart without persistence). The fan-out resumes from its checkpoint and
 * re-enqueues pending batches under their deterministic ids, so a spurious sweep sends nothing twice.
 */
export function startSweeper(deps: {
  db: Db;
  log: Logger;
  delivery: DeliveryRepository;
  scheduler: NotificationScheduler;
  afterSeconds: number;
}) {
  let running = false;
  const sweep = async () => {
    if (running) return;
    running = true;
    try {
      const stalled = await deps.delivery.findStalled(deps.db, deps.afterSeconds, 500);
      for (const n of stalled) {
        await deps.scheduler.schedule(n.id, n.generation);
        await deps.delivery.touch(deps.db, n.id);
      }
      if (stalled.length) deps.log.warn({ count: stalled.length }, 're-enqueued stalled notifications');
    } catch (err) {
      deps.log.warn({ err }, 'sweep failed; will try again');
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void sweep(), Math.max(1000, (deps.afterSeconds * 1000) / 2));
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
