import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Config } from '../platform/config.js';
import type { Db } from '../db/database.js';
import { AudiencesRepository } from '../db/repositories/audiences.js';
import { AppsRepository } from '../db/repositories/apps.js';
import { PartitionsRepository } from '../db/repositories/partitions.js';
import { DeliveryRepository } from '../db/repositories/delivery.js';
import { DevicesRepository } from '../db/repositories/devices.js';
import { LeasesRepository } from '../db/repositories/leases.js';
import { NotificationsRepository } from '../db/repositories/notifications.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import { deliveryProcessor, LargeBatchTurns } from './delivery.js';
import { DeliveryStore } from './delivery-store.js';
import { fanoutProcessor, fanoutRangeProcessor, type FanoutDeps } from './fanout.js';
import { DIRECT_MAX_IN_FLIGHT, DirectDelivery } from './direct-delivery.js';
import type { GatewayProvider } from '../gateways/provider.js';
import { GATEWAY_REQUEST_TIMEOUT_MS } from '../gateways/types.js';
import { JOB_NAMES, type JobName, type JobTypes, type NotificationScheduler } from './jobs.js';
import type { Job } from 'bullmq';
import type { JobQueues } from './queues.js';
import { backoffDelay, retryPolicyOf } from './retry.js';
import { startSweeper } from './sweeper.js';
import { retentionOf } from './retention.js';
import { startDuePoller } from './due.js';
import { abWinnerProcessor } from './ab-winner.js';
import { AbTestsRepository } from '../db/repositories/ab-tests.js';
import type { Clock } from '../platform/clock.js';
import type { FollowedCache } from '../db/app-changes.js';
import type { FrequencyCap } from '../domain/frequency-caps.js';

/** Delivery jobs a worker runs at once, per large batch it sends at once (DELIVERY_CONCURRENCY): small ones fill the rest. */
const SMALL_BATCHES_PER_LARGE = 8;

interface JobHandler<N extends JobName> {
  process: (job: Job<JobTypes[N]>) => Promise<void>;
  concurrency: number;
  /** Delay before the next attempt; BullMQ's own backoff when absent. */
  backoff?: (attemptsMade: number, err: unknown) => number;
}

export interface Pipeline {
  scheduler: NotificationScheduler;
  /** Stops taking jobs, lets in-flight batches finish, closes gateways. */
  close(): Promise<void>;
}

export interface PipelineDeps {
  config: Config;
  log: Logger;
  db: Db;
  queues: JobQueues;
  /** whether this process runs the workers (fan-out, delivery, the sweeper), or only schedules */
  workers: boolean;
  clock: Clock;
  /** needed with workers */
  gateways?: GatewayProvider;
  /** needed with workers */
  metrics?: Metrics;
  frequencyCaps?: FollowedCache<string, FrequencyCap[] | null>;
  /** the apps with webhook endpoints for batches' outcomes (DeliveryStore) */
  webhookApps?: FollowedCache<'batch', string[]>;
}

/**
 * The delivery pipeline. Every process can schedule (enqueue a fan-out); processes with workers also run
 * fan-out, delivery and the sweeper that recovers notifications whose jobs were lost.
 */
export function startPipeline(opts: PipelineDeps): Pipeline {
  const { config, log, db, queues } = opts;
  const scheduler: NotificationScheduler = {
    schedule: (notificationId, generation, wave, rest) =>
      queues.add('fanout', { notificationId, generation, ...(wave ? { wave } : {}), ...(rest ? { rest } : {}) }),
    decideWinner: (notificationId, generation) => queues.add('abWinner', { notificationId, generation }),
    deliver: (batches, delayMs) => queues.add('delivery', { batches }, delayMs),
  };
  if (!opts.workers) return { scheduler, close: async () => undefined };
  if (!opts.gateways || !opts.metrics) throw new Error('workers need gateways and metrics');

  const notifications = new NotificationsRepository();
  const delivery = new DeliveryRepository();
  const policy = retryPolicyOf(config);
  const store = new DeliveryStore(db, delivery, opts.frequencyCaps, opts.webhookApps);
  const backoff = (attemptsMade: number, err: unknown) => backoffDelay(policy, attemptsMade, err);
  // one set of turns for the process's large batches, whether a delivery job or a fan-out sends them
  const largeTurns = new LargeBatchTurns(config.DELIVERY_CONCURRENCY);
  // a fan-out's first page, sent by the fan-out job itself
  const direct = new DirectDelivery({
    log,
    metrics: opts.metrics,
    gateways: opts.gateways,
    clock: opts.clock,
    store,
    scheduler,
    maxAttempts: policy.attempts,
    maxInFlight: DIRECT_MAX_IN_FLIGHT,
    largeTurns,
    leaseMs: config.SWEEP_AFTER_SECONDS * 1000,
    backoff,
  });

  const fanoutDeps: FanoutDeps = {
    db,
    log,
    queues,
    notifications,
    audiences: new AudiencesRepository(),
    devices: new DevicesRepository(),
    delivery,
    apps: new AppsRepository(),
    clock: opts.clock,
    pageSize: config.FANOUT_PAGE_SIZE,
    batchSize: config.DELIVERY_BATCH_SIZE,
    rangeDevices: config.FANOUT_RANGE_DEVICES,
    direct,
    abTests: new AbTestsRepository(),
  };
  // One handler per job name: the map's type requires each name of jobs.ts exactly once.
  const handlers: { [N in JobName]: JobHandler<N> } = {
    fanout: {
      process: fanoutProcessor(fanoutDeps),
      concurrency: 2,
    },
    delivery: {
      process: deliveryProcessor({
        log,
        metrics: opts.metrics,
        gateways: opts.gateways,
        store,
        maxAttempts: policy.attempts,
        clock: opts.clock,
        largeBatchesAtOnce: config.DELIVERY_CONCURRENCY,
        largeTurns,
        retryAlone: (batch, delayMs) => queues.add('delivery', { batches: [batch] }, delayMs),
        backoff,
      }),
      concurrency: config.DELIVERY_CONCURRENCY * SMALL_BATCHES_PER_LARGE,
      backoff,
    },
    fanoutRange: {
      process: fanoutRangeProcessor(fanoutDeps),
      concurrency: 2,
    },
    abWinner: {
      process: abWinnerProcessor({ ...fanoutDeps, scheduler }),
      concurrency: 1,
    },
  };
  for (const name of JOB_NAMES) {
    const { process, concurrency, backoff } = handlers[name] as JobHandler<JobName>;
    for (const worker of queues.startWorkers(name, process, { concurrency, lockDuration: config.JOB_LOCK_MS, backoff }))
      worker.on('failed', (job, err) => log.warn({ err: err.message, job: name, jobId: job?.id, data: job?.data }, 'job attempt failed'));
  }

  const sweeper = startSweeper({
    db,
    log,
    delivery,
    partitions: new PartitionsRepository(),
    retention: retentionOf(config),
    clock: opts.clock,
    queues,
    scheduler,
    afterSeconds: config.SWEEP_AFTER_SECONDS,
    // a transactional send's last attempt starts before its deadline and may wait for an OAuth token, then for
    // the push (a small audience's one attempt, the same without the deadline)
    heldSeconds: Math.ceil((config.TRANSACTIONAL_TIMEOUT_MS + 2 * GATEWAY_REQUEST_TIMEOUT_MS) / 1000),
    // one worker of the deployment scans for stalled notifications for all
    lease: { leases: new LeasesRepository(), holder: `${hostname()}:${process.pid}:${randomUUID()}` },
    metrics: opts.metrics,
  });
  const duePoller = startDuePoller({ db, log, delivery, scheduler, clock: opts.clock, intervalMs: config.SCHEDULE_POLL_MS });
  const depthTimer = setInterval(async () => {
    for (const name of JOB_NAMES) {
      const counts = await queues.depth(name).catch(() => null);
      if (counts) for (const [state, n] of Object.entries(counts)) opts.metrics!.queueDepth.set({ queue: name, state }, n);
    }
  }, 5000);
  depthTimer.unref();

  return {
    scheduler,
    async close() {
      await sweeper.stop();
      duePoller.stop();
      clearInterval(depthTimer);
      await queues.closeWorkers();
      await direct.close(); // the first pages the fan-outs were sending
      await opts.gateways!.close();
    },
  };
}
