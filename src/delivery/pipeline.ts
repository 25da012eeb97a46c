import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Db } from '../db/database.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import { deliveryProcessor, type LargeBatchTurns } from './delivery.js';
import type { DeliveryStore } from './delivery-store.js';
import { fanoutProcessor, fanoutRangeProcessor } from './fanout.js';
import type { FanoutDeps } from './fanout-deps.js';
import type { DirectDelivery } from './direct-delivery.js';
import type { GatewayProvider } from '../gateways/provider.js';
import { JOB_NAMES, type JobName, type JobTypes, type NotificationScheduler } from './jobs.js';
import type { Job } from 'bullmq';
import type { JobQueues } from './queues.js';
import { backoffDelay, type RetryPolicy } from './retry.js';
import { startSweeper } from './sweeper.js';
import type { Retention } from './retention.js';
import { startDuePoller } from './due.js';
import { abWinnerProcessor } from './ab-winner.js';
import type { DeliveryRepositories } from './repositories.js';
import type { Clock } from '../platform/clock.js';

/** Delivery jobs a worker runs at once, per large batch it sends at once (DELIVERY_CONCURRENCY): small ones fill the rest. */
const SMALL_BATCHES_PER_LARGE = 8;

interface JobHandler<N extends JobName> {
  process: (job: Job<JobTypes[N]>) => Promise<void>;
  concurrency: number;
  /** Delay before the next attempt; BullMQ's own backoff when absent. */
  backoff?: (attemptsMade: number, err: unknown) => number;
}

export interface Pipeline {
  /** Stops taking jobs and lets the jobs in flight finish (the runtime they send through is closed after). */
  close(): Promise<void>;
}

/** What schedules a notification's jobs: through the queues, from any process. */
export function queueScheduler(queues: JobQueues): NotificationScheduler {
  return {
    schedule: (notificationId, generation, wave, rest) =>
      queues.add('fanout', { notificationId, generation, ...(wave ? { wave } : {}), ...(rest ? { rest } : {}) }),
    decideWinner: (notificationId, generation) => queues.add('abWinner', { notificationId, generation }),
    deliver: (batches, delayMs) => queues.add('delivery', { batches }, delayMs),
  };
}

/** The process's one delivery runtime (built once by the composition root): what every send goes through. */
export interface DeliveryRuntime {
  repos: DeliveryRepositories;
  scheduler: NotificationScheduler;
  gateways: GatewayProvider;
  store: DeliveryStore;
  /** the process's turns of large batches, whether a delivery job or a fan-out sends them */
  largeTurns: LargeBatchTurns;
  /** the sends without the queue: the API's small audiences, a fan-out's first page and its multicast batches */
  direct: DirectDelivery;
}

/** The settings the workers run by, read by the composition root. */
export interface PipelineSettings {
  /** DELIVERY_CONCURRENCY: large batches a process sends at once */
  largeBatchesAtOnce: number;
  jobLockMs: number;
  /** FANOUT_PAGE_SIZE, DELIVERY_BATCH_SIZE, FANOUT_RANGE_DEVICES */
  pageSize: number;
  batchSize: number;
  rangeDevices: number;
  retry: RetryPolicy;
  retention: Retention;
  /** SWEEP_AFTER_SECONDS: how long a notification may show no progress before the sweeper recovers it */
  sweepAfterSeconds: number;
  /** how long the sweeper leaves a batch an API process may still be sending (a transactional send's) */
  heldSeconds: number;
  schedulePollMs: number;
}

export interface PipelineDeps {
  log: Logger;
  db: Db;
  queues: JobQueues;
  clock: Clock;
  metrics: Metrics;
  runtime: DeliveryRuntime;
  settings: PipelineSettings;
}

/**
 * The workers of the delivery pipeline (fan-out, delivery, A/B winners), the sweeper that recovers notifications
 * whose jobs were lost and the poller of scheduled ones, in the processes that run workers.
 */
export function startPipeline(opts: PipelineDeps): Pipeline {
  const { log, db, queues, settings } = opts;
  const { scheduler, repos } = opts.runtime;
  const handlers = jobHandlers(opts);
  for (const name of JOB_NAMES) {
    const { process, concurrency, backoff } = handlers[name] as JobHandler<JobName>;
    for (const worker of queues.startWorkers(name, process, { concurrency, lockDuration: settings.jobLockMs, backoff }))
      worker.on('failed', (job, err) => log.warn({ err: err.message, job: name, jobId: job?.id, data: job?.data }, 'job attempt failed'));
  }

  const sweeper = startSweeper({
    db,
    log,
    notifications: repos.notifications,
    batches: repos.batches,
    frequencyCaps: repos.frequencyCaps,
    repos,
    retention: settings.retention,
    clock: opts.clock,
    queues,
    scheduler,
    afterSeconds: settings.sweepAfterSeconds,
    heldSeconds: settings.heldSeconds,
    // one worker of the deployment scans for stalled notifications for all
    lease: { leases: repos.leases, holder: `${hostname()}:${process.pid}:${randomUUID()}` },
    metrics: opts.metrics,
  });
  const duePoller = startDuePoller({
    db,
    log,
    notifications: repos.notifications,
    scheduler,
    clock: opts.clock,
    intervalMs: settings.schedulePollMs,
  });
  const depthTimer = setInterval(async () => {
    for (const name of JOB_NAMES) {
      const counts = await queues.depth(name).catch(() => null);
      if (counts) for (const [state, n] of Object.entries(counts)) opts.metrics.queueDepth.set({ queue: name, state }, n);
    }
  }, 5000);
  depthTimer.unref();

  return {
    async close() {
      await sweeper.stop();
      duePoller.stop();
      clearInterval(depthTimer);
      await queues.closeWorkers();
    },
  };
}

/** One handler per job name: the map's type requires each name of jobs.ts exactly once. */
function jobHandlers({ log, db, queues, clock, metrics, runtime, settings }: PipelineDeps): { [N in JobName]: JobHandler<N> } {
  const { scheduler, store, direct } = runtime;
  const backoff = (attemptsMade: number, err: unknown) => backoffDelay(settings.retry, attemptsMade, err);
  const fanoutDeps: FanoutDeps = {
    db,
    log,
    queues,
    ...runtime.repos,
    clock,
    pageSize: settings.pageSize,
    batchSize: settings.batchSize,
    rangeDevices: settings.rangeDevices,
    direct,
  };
  return {
    fanout: { process: fanoutProcessor(fanoutDeps), concurrency: 2 },
    delivery: {
      process: deliveryProcessor({
        log,
        metrics,
        gateways: runtime.gateways,
        store,
        maxAttempts: settings.retry.attempts,
        clock,
        largeBatchesAtOnce: settings.largeBatchesAtOnce,
        largeTurns: runtime.largeTurns,
        retryAlone: (batch, delayMs) => queues.add('delivery', { batches: [batch] }, delayMs),
        backoff,
      }),
      concurrency: settings.largeBatchesAtOnce * SMALL_BATCHES_PER_LARGE,
      backoff,
    },
    fanoutRange: { process: fanoutRangeProcessor(fanoutDeps), concurrency: 2 },
    abWinner: { process: abWinnerProcessor({ ...fanoutDeps, scheduler }), concurrency: 1 },
  };
}
