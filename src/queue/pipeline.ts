import type { Config } from '../platform/config.js';
import type { Db } from '../db/database.js';
import { DeliveryRepository } from '../db/repositories/delivery.js';
import { NotificationsRepository } from '../db/repositories/notifications.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { NotificationScheduler } from '../services/notifications.js';
import { deliveryProcessor } from './delivery.js';
import { batchJobOptions, fanoutProcessor } from './fanout.js';
import type { GatewayProvider } from '../gateways/provider.js';
import { JOB_NAMES, type JobQueues } from './queues.js';
import { backoffDelay, type RetryPolicy } from './retry.js';
import { startSweeper } from './sweeper.js';

export interface Pipeline {
  scheduler: NotificationScheduler;
  /** Runs one sweep now (tests, and after a queue outage). */
  sweep(): Promise<void>;
  /** Stops taking jobs, lets in-flight batches finish, closes gateways. */
  close(): Promise<void>;
}

/**
 * The delivery pipeline. Every process can schedule (enqueue a fan-out); processes with workers also run
 * fan-out, delivery and the sweeper that recovers notifications whose jobs were lost.
 */
export function startPipeline(
  config: Config,
  log: Logger,
  db: Db,
  queues: JobQueues,
  opts: { workers: boolean; gateways?: GatewayProvider; metrics?: Metrics },
): Pipeline {
  const fanoutAttempts = 5;
  const scheduler: NotificationScheduler = {
    async schedule(notificationId, generation) {
      await queues.add(
        'fanout',
        { notificationId, generation },
        {
          jobId: `${notificationId}-g${generation}`,
          attempts: fanoutAttempts,
          backoff: { type: 'exponential', delay: 1000 },
          ...batchJobOptions,
        },
      );
    },
  };
  if (!opts.workers) return { scheduler, sweep: async () => undefined, close: async () => undefined };
  if (!opts.gateways || !opts.metrics) throw new Error('workers need gateways and metrics');

  const notifications = new NotificationsRepository(db);
  const delivery = new DeliveryRepository(db);
  const policy: RetryPolicy = {
    attempts: config.DELIVERY_MAX_ATTEMPTS,
    baseDelayMs: config.RETRY_BASE_MS,
    maxDelayMs: config.RETRY_MAX_MS,
  };

  queues.worker(
    'fanout',
    fanoutProcessor({ db, log, queues, notifications, delivery, pageSize: config.FANOUT_PAGE_SIZE, batchSize: config.DELIVERY_BATCH_SIZE }),
    { concurrency: 2, lockDuration: config.JOB_LOCK_MS },
  );
  const deliverWorker = queues.worker(
    'delivery',
    deliveryProcessor({ log, metrics: opts.metrics, gateways: opts.gateways, notifications, delivery, maxAttempts: policy.attempts }),
    {
      concurrency: config.DELIVERY_CONCURRENCY,
      lockDuration: config.JOB_LOCK_MS,
      backoff: (attemptsMade, err) => backoffDelay(policy, attemptsMade, err),
    },
  );
  deliverWorker.on('failed', (job, err) =>
    log.warn({ err: err.message, notificationId: job?.data.notificationId, batchId: job?.id }, 'delivery attempt failed'),
  );

  // Delivery jobs are added with the attempts of the policy; see enqueue in fanout.ts.
  queues.setDefaults('delivery', { attempts: policy.attempts, backoff: { type: 'custom' } });

  const sweeper = startSweeper({ log, delivery, scheduler, afterSeconds: config.SWEEP_AFTER_SECONDS });
  const depthTimer = setInterval(async () => {
    for (const name of JOB_NAMES) {
      const counts = await queues.depth(name).catch(() => null);
      if (counts) for (const [state, n] of Object.entries(counts)) opts.metrics!.queueDepth.set({ queue: name, state }, n);
    }
  }, 5000);
  depthTimer.unref();

  return {
    scheduler,
    sweep: sweeper.sweep,
    async close() {
      sweeper.stop();
      clearInterval(depthTimer);
      await queues.closeWorkers();
      await opts.gateways!.close();
    },
  };
}
