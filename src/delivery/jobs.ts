import type { JobsOptions } from 'bullmq';

/**
 * Every job this service runs, by name: its data and how it is enqueued. One queue per job name, one handler per
 * job name (src/delivery/pipeline.ts registers them from a map of the same names).
 */
export interface JobTypes {
  /** Resolve a notification's audience to devices and cut it into delivery batches (from its local-time wave). */
  fanout: { notificationId: string; generation: number; wave?: number; rest?: boolean };
  /**
   * Send stored batches: one of a fan-out, or those stored together (a group of small notifications); each batch
   * row says which devices, platform and environment. `bulk`: a fan-out's batch, taken after the partition's others.
   */
  delivery: { batches: BatchRef[]; bulk?: boolean };
  /**
   * Fan out one range of a split broadcast's audience (fanout_ranges: its bounds and checkpoint), with the date
   * math of the fan-out that split it (`at`, ISO).
   */
  fanoutRange: { notificationId: string; generation: number; range: number; at: string };
  /** Pick an A/B test's winner by its metric, once its test share was sent and `after` passed (src/delivery/ab-winner.ts). */
  abWinner: { notificationId: string; generation: number };
}
export interface BatchRef {
  notificationId: string;
  batchId: string;
}
export type JobName = keyof JobTypes;
export const JOB_NAMES: readonly JobName[] = ['fanout', 'delivery', 'fanoutRange', 'abWinner'];

export interface JobSpec<D> {
  /** A deterministic id: enqueueing the same work twice (a re-run fan-out, the sweeper) adds it once. */
  id(data: D): string;
  /** The notification whose partition the job goes to (QUEUE_PARTITIONS): all of a notification's jobs share one. */
  notificationOf(data: D): string;
  options: JobsOptions;
  /** BullMQ's priority of the job (0, the default, first; then 1, 2, …, each FIFO), when it has one */
  priority?(data: D): number;
}
export type JobSpecs = { [N in JobName]: JobSpec<JobTypes[N]> };

// Finished jobs are not kept: their outcome lives in PostgreSQL (batches, notification counters).
const forget = { removeOnComplete: true, removeOnFail: true } as const;
/**
 * The fan-outs' retries, 1 s doubling: 8 attempts span two minutes, longer than a PostgreSQL failover (Patroni
 * replaces a lost primary within its ttl, 30 s by default), so a fan-out the failover interrupted goes on from its
 * checkpoint by itself instead of waiting for the sweeper.
 */
const untilFailedOver = { attempts: 8, backoff: { type: 'exponential', delay: 1000 } } as const;

/**
 * The priority of a fan-out's delivery jobs: behind every other send of their partition (a one-device notification
 * queued, a journey's, a retry), which would otherwise wait for the thousands of batches a broadcast enqueued first.
 */
export const BULK_PRIORITY = 1;

/** The options of every job, from the settings that shape them. */
export function jobSpecs(settings: { deliveryAttempts: number }): JobSpecs {
  return {
    fanout: {
      // an A/B test's rest is a second fan-out of the same generation (its waves again)
      id: (d) => `${d.notificationId}-g${d.generation}${d.rest ? '-rest' : ''}${d.wave ? `-w${d.wave}` : ''}`,
      notificationOf: (d) => d.notificationId,
      options: { ...untilFailedOver, ...forget },
    },
    delivery: {
      // named after its first batch; the others record it as their job_id (the sweeper looks for it)
      id: (d) => d.batches[0]!.batchId,
      // batches stored together go with their first, as their job is named
      notificationOf: (d) => d.batches[0]!.notificationId,
      // 'custom': the delivery worker's backoff strategy (retry.ts) honours the gateway's Retry-After
      options: { attempts: settings.deliveryAttempts, backoff: { type: 'custom' }, ...forget },
      priority: (d) => (d.bulk ? BULK_PRIORITY : 0),
    },
    fanoutRange: {
      id: (d) => `${d.notificationId}-g${d.generation}-r${d.range}`,
      // a notification's partition, whose workers every process runs: any of them takes a range
      notificationOf: (d) => d.notificationId,
      options: { ...untilFailedOver, ...forget },
    },
    abWinner: {
      id: (d) => `${d.notificationId}-g${d.generation}-winner`,
      notificationOf: (d) => d.notificationId,
      options: { ...untilFailedOver, ...forget },
    },
  };
}

/**
 * The partition (0 to count - 1) of a notification's jobs: FNV-1a of its id, so every process picks the same one
 * and notifications spread evenly. Per notification rather than per app: an app's load spreads over the partitions,
 * and two broadcasts go side by side unless they hash together (then one's batches queue behind the other's; a
 * partition's other sends go before either).
 */
export function partitionOf(notificationId: string, count: number): number {
  if (count <= 1) return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < notificationId.length; i++) hash = Math.imul(hash ^ notificationId.charCodeAt(i), 0x01000193);
  return (hash >>> 0) % count;
}

/** How the rest of the service hands a committed notification to the pipeline (pipeline.ts implements it). */
export interface NotificationScheduler {
  /** Enqueues its fan-out (of an A/B test's rest when `rest`); idempotent per (id, generation, rest, local-time wave). */
  schedule(notificationId: string, generation: number, wave?: number, rest?: boolean): Promise<void>;
  /** Enqueues the pick of an A/B test's winner by its metric; idempotent per (id, generation). */
  decideWinner(notificationId: string, generation: number): Promise<void>;
  /**
   * Enqueues the delivery of batches stored together (small audiences resolved when created) as one job, named
   * after the first (the others were stored with it as their job_id), after `delayMs` if given; idempotent.
   */
  deliver(batches: BatchRef[], delayMs?: number): Promise<void>;
}
