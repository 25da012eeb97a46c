import { createPostgresBackend, createRedisBackend, withBackend, type Job, type Queue, type Worker } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { redisClient, redisOptions } from '../platform/redis.js';
import { partitionOf, type JobName, type JobSpecs, type JobTypes } from './jobs.js';

export type QueueBackendKind = 'redis' | 'postgres';

export interface QueueConnection {
  /** Redis when REDIS_URL is set, else BullMQ's PostgreSQL backend on the service's own database. */
  kind: QueueBackendKind;
  redisUrl?: string;
  /** redisUrl names one node of a Redis Cluster (REDIS_CLUSTER); the prefix is then a hash tag, `{name}`. */
  redisCluster?: boolean;
  databaseUrl: string;
  /** Namespace of the queues (Redis key prefix), so several deployments or test runs can share one Redis. */
  prefix?: string;
  /** Queues per job kind on Redis (QUEUE_PARTITIONS), each under its own hash tag; the PostgreSQL backend has one. */
  partitions?: number;
}

/**
 * The key prefix of a partition: the prefix itself when there is one partition (the keys of before partitions),
 * else the partition's number inside its braces ({pushd:2}), a hash tag of its own, or after it (pushd:2).
 */
export function partitionPrefix(prefix: string, partition: number, partitions: number): string {
  if (partitions <= 1) return prefix;
  return prefix.startsWith('{') ? `${prefix.slice(0, -1)}:${partition}}` : `${prefix}:${partition}`;
}

type AnyQueue = Queue;

/** How long a paused worker with no job running may take to end its last fetch (drainDelay is 1 s) before closing. */
const STUCK_FETCH_MS = 3000;

/**
 * The service's queues. The same BullMQ classes run on either backend; only the connection differs.
 */
export class JobQueues {
  private readonly queues = new Map<string, AnyQueue>();
  private readonly workers: Worker[] = [];
  private active = 0;
  private readonly classes: ReturnType<typeof withBackend>;
  private readonly connection: unknown;
  /** On a Redis Cluster: the client the queues share and the workers duplicate (BullMQ leaves it to us to close). */
  private readonly cluster: Cluster | undefined;
  private readonly prefix: string;
  readonly partitions: number;

  /** Jobs this process is running now. */
  get running(): number {
    return this.active;
  }

  constructor(
    readonly conn: QueueConnection,
    private readonly specs: JobSpecs,
  ) {
    this.prefix = conn.prefix ?? 'pushd';
    // partitions spread Redis keys over slots; PostgreSQL has no slots to spread
    this.partitions = conn.kind === 'redis' ? (conn.partitions ?? 1) : 1;
    if (conn.kind === 'redis') {
      this.classes = withBackend(createRedisBackend) as unknown as ReturnType<typeof withBackend>;
      // BullMQ workers block on Redis; ioredis must not give up on a command while Redis restarts.
      if (conn.redisCluster) {
        this.connection = this.cluster = redisClient(
          { url: conn.redisUrl!, cluster: true },
          { offlineQueue: true, maxRetriesPerRequest: null },
        ) as Cluster;
        // a failed slots refresh (nodes starting, a failover) is retried by ioredis; unheard, it is printed as unhandled
        this.cluster.on('error', () => undefined);
      } else this.connection = { ...redisOptions(conn.redisUrl!), maxRetriesPerRequest: null };
    } else {
      this.classes = withBackend(createPostgresBackend) as unknown as ReturnType<typeof withBackend>;
      this.connection = { connectionString: conn.databaseUrl, migrate: true, max: 4 };
    }
  }

  queue(name: JobName, partition = 0): AnyQueue {
    const key = `${name}#${partition}`;
    let q = this.queues.get(key);
    if (!q) {
      const prefix = partitionPrefix(this.prefix, partition, this.partitions);
      q = new this.classes.Queue(name, { connection: this.connection as never, prefix }) as AnyQueue;
      q.on('error', () => undefined); // connection blips are retried by BullMQ; readiness reports them
      this.queues.set(key, q);
    }
    return q;
  }

  private get partitionNumbers(): number[] {
    return Array.from({ length: this.partitions }, (_, p) => p);
  }

  /**
   * Adds a job with the options and priority of its name (jobs.ts) to its notification's partition; a job whose id
   * exists there is not added twice.
   */
  async add<N extends JobName>(name: N, data: JobTypes[N], delayMs = 0): Promise<void> {
    const spec = this.specs[name];
    const delay = Math.max(0, Math.round(delayMs));
    const partition = partitionOf(spec.notificationOf(data), this.partitions);
    const priority = spec.priority?.(data) ?? 0;
    await this.queue(name, partition).add(name, data, {
      ...spec.options,
      jobId: spec.id(data),
      ...(delay > 0 ? { delay } : {}),
      ...(priority > 0 ? { priority } : {}),
    });
  }

  /** The id a job of this data gets (deterministic, jobs.ts). */
  jobId<N extends JobName>(name: N, data: JobTypes[N]): string {
    return this.specs[name].id(data);
  }

  /**
   * The batches each of these delivery jobs carries, of those in the queue (waiting, delayed or running), looked
   * for in every partition (batches stored together are in their first one's): on Redis one pipeline per partition
   * (its keys share a slot), on PostgreSQL one lookup per job.
   */
  async batchesOf(jobIds: readonly string[]): Promise<Map<string, string[]>> {
    const found = new Map<string, string[]>();
    if (jobIds.length === 0) return found;
    const perPartition = await Promise.all(this.partitionNumbers.map((p) => this.jobData('delivery', p, jobIds)));
    for (const data of perPartition)
      data.forEach((d, i) => {
        if (d) found.set(jobIds[i]!, [...(found.get(jobIds[i]!) ?? []), ...d.batches.map((b) => b.batchId)]);
      });
    return found;
  }

  /**
   * Whether the job is in its notification's partition (waiting, delayed or running): finished jobs are not kept
   * (jobs.ts).
   */
  async has(name: JobName, jobId: string, notificationId: string): Promise<boolean> {
    return (await this.queue(name, partitionOf(notificationId, this.partitions)).getJob(jobId)) != null;
  }

  /** The data of these jobs of a partition (undefined where there is none), read together on Redis. */
  private async jobData<N extends JobName>(name: N, partition: number, jobIds: readonly string[]): Promise<(JobTypes[N] | undefined)[]> {
    const queue = this.queue(name, partition);
    if (this.conn.kind !== 'redis')
      return Promise.all(jobIds.map(async (id) => ((await queue.getJob(id)) as Job<JobTypes[N]> | undefined)?.data));
    const client = await (queue.getBackend() as unknown as { client: Promise<Redis | Cluster> }).client;
    const answers = (await client.pipeline(jobIds.map((id) => ['hget', queue.toKey(id), 'data'])).exec()) ?? [];
    return answers.map(([err, data]) => {
      if (err) throw err;
      return typeof data === 'string' ? (JSON.parse(data) as JobTypes[N]) : undefined;
    });
  }

  /** A worker on each partition of the job kind, all running `processor`, each with `concurrency` jobs at most. */
  startWorkers<N extends JobName>(
    name: N,
    processor: (job: Job<JobTypes[N]>) => Promise<unknown>,
    opts: { concurrency: number; lockDuration?: number; backoff?: (attemptsMade: number, err: unknown) => number },
  ): Worker[] {
    return this.partitionNumbers.map((p) => this.worker(name, p, processor, opts));
  }

  private worker<N extends JobName>(
    name: N,
    partition: number,
    processor: (job: Job<JobTypes[N]>) => Promise<unknown>,
    opts: { concurrency: number; lockDuration?: number; backoff?: (attemptsMade: number, err: unknown) => number },
  ): Worker {
    // jobs running, so that closing knows when none is left whatever the worker's loop is waiting on
    const tracked = async (job: Job<JobTypes[N]>) => {
      this.active += 1;
      try {
        return await processor(job);
      } finally {
        this.active -= 1;
      }
    };
    const w = new this.classes.Worker(name, tracked as never, {
      connection: this.connection as never,
      prefix: partitionPrefix(this.prefix, partition, this.partitions),
      concurrency: opts.concurrency,
      lockDuration: opts.lockDuration ?? 30_000,
      // a job whose worker died is re-run after the lock expires; a few stalls are tolerated before it fails
      stalledInterval: opts.lockDuration ?? 30_000,
      maxStalledCount: 3,
      autorun: true,
      // seconds a worker with nothing to do waits for a job: a paused worker finishes within this (closeWorkers)
      drainDelay: 1,
      settings: opts.backoff
        ? { backoffStrategy: (attemptsMade: number, _type?: string, err?: Error) => opts.backoff!(attemptsMade, err) }
        : undefined,
    }) as Worker;
    w.on('error', () => undefined); // connection errors: BullMQ reconnects; /ready reports the outage
    this.workers.push(w);
    return w;
  }

  /** Throws when the queue store cannot be reached. */
  async ping(timeoutMs = 2000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('queue backend did not answer')), timeoutMs);
    });
    try {
      await Promise.race([Promise.all(this.partitionNumbers.map((p) => this.queue('fanout', p).getJobCounts('waiting'))), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Jobs of the kind by state, over its partitions. */
  async depth(name: JobName): Promise<Record<string, number>> {
    const counts = await Promise.all(
      this.partitionNumbers.map((p) => this.queue(name, p).getJobCounts('waiting', 'active', 'delayed', 'failed', 'prioritized')),
    );
    const total: Record<string, number> = {};
    for (const c of counts) for (const [state, n] of Object.entries(c)) total[state] = (total[state] ?? 0) + n;
    return total;
  }

  /**
   * Stops taking jobs and waits for the in-flight ones to finish. Not by `close()` alone: it interrupts the
   * worker's blocking fetch and waits for that connection's 'end', which a Redis client caught between two
   * reconnect attempts never emits (taskforcesh/bullmq#4656), so after a Redis restart it could wait forever with
   * nothing running. Paused, the worker's loop ends by itself once its jobs and its last fetch (drainDelay) are
   * done; closing it then has nothing to wait for. A fetch can also hang on a connection the server dropped (the
   * PostgreSQL backend's LISTEN client after a restart, until TCP keepalive notices): once no job has run for a
   * while, such a worker is closed without waiting for it (nothing of ours is running in it).
   */
  async closeWorkers(): Promise<void> {
    const workers = this.workers.splice(0);
    await Promise.all(workers.map((w) => w.pause(true)));
    let idleSince = Date.now();
    while (workers.some((w) => w.isRunning())) {
      if (this.active > 0) idleSince = Date.now();
      else if (Date.now() - idleSince > STUCK_FETCH_MS) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const stuck = workers.filter((w) => w.isRunning());
    for (const w of stuck) void w.close(true).catch(() => undefined);
    await Promise.all(workers.filter((w) => !stuck.includes(w)).map((w) => w.close(true)));
  }

  async close(): Promise<void> {
    await this.closeWorkers();
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    this.queues.clear();
    await this.cluster?.quit().catch(() => this.cluster?.disconnect());
  }
}
