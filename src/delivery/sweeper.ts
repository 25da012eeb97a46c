import type { Db } from '../db/database.js';
import type { NotificationScheduler } from './jobs.js';
import type { BatchesRepository } from '../db/repositories/batches.js';
import type { FrequencyCapsRepository } from '../db/repositories/frequency-caps.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { StalledNotification } from '../db/repositories/notification-rows.js';
import type { Clock } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import { keepStatistics, maintainPartitions, type MaintenanceRepositories, type Retention } from './retention.js';
import type { JobQueues } from './queues.js';
import type { LeasesRepository } from '../db/repositories/leases.js';

/** Rows one sweep deletes at most of each kind: a bounded statement, however many expired at once. */
const PURGE_BATCH = 10_000;
/** Notifications one sweep looks at; the next one goes on after them, and starts over once it reached the newest. */
const STALLED_PAGE = 500;
/** Pending batches whose jobs are looked up together (one pipeline per partition), until one is found queued. */
const BATCHES_AT_ONCE = 200;
/** The lease on the scan for stalled notifications, which one process of the deployment runs for all. */
export const SCAN_LEASE = 'sweeper:stalled-scan';
/** How long the scan's lease lasts unrenewed: how soon another process takes over when its holder dies. */
export const SCAN_LEASE_MS = 10_000;

/** What the sweeper reads, writes and schedules through, and its settings. */
export interface SweeperDeps {
  db: Db;
  log: Logger;
  notifications: NotificationsRepository;
  batches: BatchesRepository;
  frequencyCaps: FrequencyCapsRepository;
  /** the maintenance's repositories (src/delivery/retention.ts) */
  repos: MaintenanceRepositories;
  retention: Retention;
  clock: Clock;
  queues: JobQueues;
  scheduler: NotificationScheduler;
  afterSeconds: number;
  /**
   * How long the process that created a notification may still be sending it itself (a transactional send: its
   * deadline, then one last attempt).
   */
  heldSeconds: number;
  /** Notifications one sweep looks at (default STALLED_PAGE). */
  stalledPage?: number;
  /**
   * The lease that elects the one process of the deployment that scans for stalled notifications (the purges run
   * everywhere); without one, this process scans on its own.
   */
  lease?: { leases: LeasesRepository; holder: string; ms?: number };
  /** Counts the scans this process ran and the partitions kept and dropped. */
  metrics?: Metrics;
}

/**
 * Re-enqueues notifications that made no progress for a while and have no job in the queue: the enqueue after
 * commit failed, or the queue lost its jobs (a Redis restart without persistence). One whose fan-out or batches
 * are still queued is only waiting its turn behind other work; each sweep looks at the next page of them. The
 * fan-out resumes from its checkpoint and re-enqueues pending batches under their deterministic ids, so a spurious
 * sweep sends nothing twice.
 * Each sweep also keeps the time-partitioned tables (receipts, active devices, sessions, opens, conversions, messages
 * and their streams, idempotency keys, notifications with their batches): partitions created ahead, those past
 * retention dropped whole (src/delivery/retention.ts).
 */
export function startSweeper(deps: SweeperDeps) {
  const limit = deps.stalledPage ?? STALLED_PAGE;
  let after: StalledNotification | null = null;
  // Renewed every third of the lease, which outlasts two failed renewals (this process scans only while its last
  // one succeeded); a dead holder's expires within the lease. One stalled past it may scan once more alongside
  // its successor: scans are idempotent.
  const lease = deps.lease;
  const leaseMs = lease?.ms ?? SCAN_LEASE_MS;
  let holding = !lease;
  let renewing: Promise<void> = Promise.resolve();
  const renew = () =>
    (renewing = lease!.leases
      .take(deps.db, SCAN_LEASE, lease!.holder, leaseMs)
      .catch((err: unknown) => {
        deps.log.warn({ err }, 'could not take or renew the scan lease');
        return false;
      })
      .then((taken) => void (holding = taken)));
  const leaseTimer = lease ? setInterval(() => void renew(), leaseMs / 3) : undefined;
  leaseTimer?.unref();
  if (lease) void renew();
  const scanStalled = async () => {
    deps.metrics?.stalledScans.inc();
    let count = 0;
    const stalled = await deps.notifications.findStalled(
      deps.db,
      { seconds: deps.afterSeconds, heldSeconds: deps.heldSeconds },
      { after, limit },
    );
    after = stalled.length === limit ? stalled[stalled.length - 1]! : null;
    for (const n of stalled) {
      const pending = await lostBatches(deps, n);
      if (pending && (await reenqueue(deps, n, pending))) count++;
    }
    if (count) deps.log.warn({ count }, 're-enqueued stalled notifications');
  };
  let running = false;
  const sweep = async () => {
    if (running) return;
    running = true;
    try {
      if (holding) await scanStalled();
      // the frequency caps' send times of devices whose last push left every window: none counts any more
      const capSends = await deps.frequencyCaps.purgeCapSends(deps.db, deps.clock.now(), PURGE_BATCH);
      if (capSends) deps.log.debug({ capSends }, 'purged the frequency cap send times of devices past every window');
      // its DDL may time out waiting for a lock: the next sweep tries again, and this one goes on
      await maintainPartitions(deps, deps.retention, deps.clock.now()).catch((err: unknown) =>
        deps.log.warn({ err }, 'partition maintenance failed; will try again'),
      );
      await keepStatistics(deps).catch((err: unknown) => deps.log.warn({ err }, 'analyzing tables failed; will try again'));
    } catch (err) {
      deps.log.warn({ err }, 'sweep failed; will try again');
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void sweep(), Math.max(1000, (deps.afterSeconds * 1000) / 2));
  timer.unref();
  return {
    /** Stops sweeping and gives the lease up, so another process scans from its next renewal. */
    stop: async () => {
      clearInterval(timer);
      clearInterval(leaseTimer);
      if (!lease) return;
      // a renewal under way would take the lease again after it was given up; a database that does not answer
      // holds the shutdown no more than a second (the lease then expires by itself)
      const release = renewing.then(() => lease.leases.release(deps.db, SCAN_LEASE, lease.holder)).catch(() => undefined);
      let timeout: NodeJS.Timeout | undefined;
      await Promise.race([release, new Promise((r) => (timeout = setTimeout(r, 1000)))]);
      clearTimeout(timeout);
    },
  };
}

/** Null when the notification's work is still in the queue; else its pending batches, whose jobs are lost. */
async function lostBatches(deps: Pick<SweeperDeps, 'db' | 'queues' | 'batches'>, n: StalledNotification) {
  // an A/B test released to pick its winner has that job, not a fan-out; one still waiting for it, neither
  const job = n.held
    ? null
    : n.ab_stage === 'waiting'
      ? { name: 'abWinner' as const, id: deps.queues.jobId('abWinner', { notificationId: n.id, generation: n.generation }) }
      : {
          name: 'fanout' as const,
          id: deps.queues.jobId('fanout', { notificationId: n.id, generation: n.generation, wave: n.wave, rest: n.ab_stage === 'rest' }),
        };
  if (job && (await deps.queues.has(job.name, job.id, n.id))) return null;
  const pending = await deps.batches.pendingBatches(deps.db, n.id, n.generation);
  // A batch is sent by the job it was stored with (job_id), or by its own (a fan-out re-enqueued it, a retry
  // went on alone, its process sent it without the queue and left it to retry): queued if one of those is in
  // the queue and still carries it. The jobs of a slice of batches are looked up at once.
  const jobsOf = (b: { id: string; job_id: string | null }) => (b.job_id ? [b.job_id, b.id] : [b.id]);
  for (let i = 0; i < pending.length; i += BATCHES_AT_ONCE) {
    const slice = pending.slice(i, i + BATCHES_AT_ONCE);
    const carried = await deps.queues.batchesOf([...new Set(slice.flatMap(jobsOf))]);
    if (slice.some((b) => jobsOf(b).some((jobId) => carried.get(jobId)?.includes(b.id)))) return null;
  }
  if (pending.length === 0) return pending;
  // A job leaves the queue only after its batch is recorded: one that finished between the read above and the
  // queue's answer shows here as no longer pending, and it was progress, not a lost job.
  const still = new Set((await deps.batches.pendingBatches(deps.db, n.id, n.generation)).map((b) => b.id));
  const lost = pending.filter((b) => still.has(b.id));
  return lost.length ? lost : null;
}

/** Enqueues again a stalled notification's work whose jobs were lost; false when there was none to enqueue. */
async function reenqueue(
  deps: Pick<SweeperDeps, 'db' | 'clock' | 'scheduler' | 'notifications'>,
  n: StalledNotification,
  pending: Awaited<ReturnType<BatchesRepository['pendingBatches']>>,
): Promise<boolean> {
  if (n.held) {
    // An A/B test waiting for its winner: its test share's batches whose jobs were lost go again now (each under
    // its own deterministic id); its rest still waits for the winner.
    if (!pending.length) return false;
    const now = deps.clock.now().getTime();
    for (const b of pending)
      await deps.scheduler.deliver([{ notificationId: n.id, batchId: b.id }], b.not_before ? b.not_before.getTime() - now : 0);
  } else if (n.ab_stage === 'waiting') await deps.scheduler.decideWinner(n.id, n.generation);
  else await deps.scheduler.schedule(n.id, n.generation, n.wave, n.ab_stage === 'rest');
  await deps.notifications.touch(deps.db, [n.id]);
  return true;
}
