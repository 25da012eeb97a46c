import type { StopReason } from '../db/repositories/batches.js';
import type { LargeBatchTurns, Turn } from './delivery.js';
import type { NewBatch } from '../domain/batches.js';
import { attemptBatch, type AttemptPolicy, type AttemptSubject, type BatchAttemptDeps, type BatchToAttempt } from './batch-attempt.js';
import type { NotificationScheduler } from './jobs.js';
import type { RetryLaterError } from './retry.js';

/** A large batch that waited this long for its turn checks that its notification still sends before it goes. */
const RECHECK_AFTER_WAIT_MS = 50;
/** How long a journey's batch waits for one of the journeys' turns before it goes to the queue. */
const JOURNEY_TURN_WAIT_MS = 1000;
/** After a journey's batch found no turn in time, the next ones go to the queue for this long unless one is free at once. */
const JOURNEY_CONGESTED_MS = 5000;

/** A notification's batches just stored, with the tokens read to cut them: what its first attempt sends to. */
export interface JustCommitted {
  notification: AttemptSubject;
  batches: NewBatch[];
  tokens: ReadonlyMap<string, string>;
}

/** The batches of a notification just stored, as its first attempt sends them: to the tokens read to cut them. */
export function committedBatches({ notification, batches, tokens }: JustCommitted): BatchToAttempt[] {
  return batches.map((b) => ({
    notification,
    batch: {
      id: b.id,
      notification_id: notification.id,
      generation: notification.generation,
      platform: b.platform,
      development: b.development,
      state: 'pending',
      attempts: 0,
    },
    pending: b.deviceIds.map((deviceId) => ({ deviceId, token: tokens.get(deviceId)! })),
  }));
}

/** The direct path's attempt policy, and whether its attempt was recorded (what becomes of a failure: `handOff`). */
type FirstAttempt = AttemptPolicy & { wasRecorded: boolean };

/** Batches a process sends itself at once at most (each of a few devices); more go to the queue. */
export const DIRECT_MAX_IN_FLIGHT = 1000;

/**
 * Sends the batches of small audiences from the process that committed them, without a trip through the queue:
 * its first attempt right after the commit, with the tokens read to cut it. A batch left to retry goes to the
 * queue with its backoff, as a delivery job's retry would; one whose attempt could not be recorded goes to the
 * queue at once. At most `maxInFlight` batches are sent this way at a time (DIRECT_MAX_IN_FLIGHT): past that they
 * are left to the queue, which bounds what a slow gateway makes this process hold. A send that takes long (a
 * gateway slow to answer, connections busy) marks its notification as making progress every third of `leaseMs`,
 * as a queue worker renews its job's lock, so the sweeper (which waits `leaseMs` for progress) does not enqueue a
 * batch being sent. If the process dies first, the marks stop and the sweeper finds the batches pending with no
 * job and enqueues them: at least once, as for every notification.
 */
export class DirectDelivery {
  /** the sends in flight, with their notification and when they started */
  private readonly running = new Map<Promise<void>, { notificationId: string; since: number }>();
  private readonly heartbeat: NodeJS.Timeout;
  /** the turns of the large batches a fan-out sends itself (`sendInTurn`) */
  private readonly largeTurns: LargeBatchTurns;
  /** until when journeys' batches find their turns held (`sendJourneyBatches`; only they wait with a bound) */
  private congestedUntil = 0;

  constructor(
    private readonly deps: BatchAttemptDeps & {
      scheduler: NotificationScheduler;
      maxAttempts: number;
      maxInFlight: number;
      /**
       * the turns of the large batches (a fan-out's, `sendInTurn`), shared with the process's delivery jobs: what a
       * crash re-sends is bounded by the process's turns, not by each user's
       */
      largeTurns: LargeBatchTurns;
      /** the turns of journeys' large batches, their own: a broadcast's batches never hold them (`sendJourneyBatches`) */
      journeyTurns: LargeBatchTurns;
      /** how long the sweeper waits for a notification's progress (SWEEP_AFTER_SECONDS) */
      leaseMs: number;
      /** the delay before a batch's next attempt, as the delivery jobs' retries have it */
      backoff: (attemptsMade: number, err: unknown) => number;
    },
  ) {
    this.heartbeat = setInterval(() => void this.markProgress(), deps.leaseMs / 3);
    this.heartbeat.unref();
    this.largeTurns = deps.largeTurns;
  }

  /**
   * Sends a fan-out's large batches just stored, each when a turn is free (answers once the last has started): a
   * turn is the gateway send alone, so the next batch sends while the last one's results are recorded. The
   * fan-out reads its next page meanwhile, and waits here when the gateway is the slower, as a queue's delivery
   * jobs would wait for their turn. As for `take`, a batch whose send or record fails goes to the queue, and one
   * cut off by a crash is found pending with no job by the sweeper, or by the fan-out's next run.
   */
  async sendInTurn(committed: JustCommitted): Promise<void> {
    await this.eachInTurn(committed, this.largeTurns, null);
  }

  /**
   * `sendInTurn` for a journey's large batches, in the journeys' own turns (a broadcast never holds them), so the
   * engine moves entrants no faster than their pushes leave. A batch that finds no turn within JOURNEY_TURN_WAIT_MS
   * (a gateway slow to answer holds them) goes to the queue with the rest, and for JOURNEY_CONGESTED_MS the next ones
   * too unless a turn is free at once: the engine, which every journey of the process shares, waits on one slow
   * gateway at most that long.
   */
  async sendJourneyBatches(committed: JustCommitted): Promise<void> {
    await this.eachInTurn(committed, this.deps.journeyTurns, JOURNEY_TURN_WAIT_MS);
  }

  /**
   * The batches, each when a turn of `turns` is free, waiting at most `waitMs` (null: as long as it takes). The
   * whole call is progress: the heartbeat marks the notification while its batches wait, or the sweeper would find
   * them pending with no job and enqueue them while they wait here.
   */
  private async eachInTurn(committed: JustCommitted, turns: LargeBatchTurns, waitMs: number | null): Promise<void> {
    const whole = this.eachBatchInTurn(committedBatches(committed), turns, waitMs);
    this.track(committed.notification.id, whole);
    await whole;
  }

  private async eachBatchInTurn(batches: BatchToAttempt[], turns: LargeBatchTurns, waitMs: number | null): Promise<void> {
    // the batches of one notification: once one finds it canceled or superseded, so do the rest
    let stopped: StopReason | null = null;
    for (const [k, batch] of batches.entries()) {
      if (stopped) {
        await this.closeUnsent(batch, stopped);
        continue;
      }
      const since = Date.now();
      const turn = waitMs === null ? await turns.take() : await turnWithin(turns, since < this.congestedUntil ? 0 : waitMs);
      if (!turn) {
        this.congestedUntil = Date.now() + JOURNEY_CONGESTED_MS;
        // else the sweeper finds them pending with no job, once the heartbeat stops
        await this.deps.scheduler.deliver(batches.slice(k).map(refOf)).catch(() => undefined);
        return;
      }
      // one that waited for its turn may have been canceled or superseded meanwhile, as a delivery job's large batch
      if (Date.now() - since >= RECHECK_AFTER_WAIT_MS) stopped = await this.stopReason(batch);
      if (stopped) {
        turn.done();
        await this.closeUnsent(batch, stopped);
        continue;
      }
      this.track(batch.notification.id, this.attemptFirst(batch, turn.sent).finally(turn.done));
    }
  }

  /** Why the batch's notification no longer sends it; a failed check sends it (at least once). */
  private stopReason({ notification: n, batch: head }: BatchToAttempt): Promise<StopReason | null> {
    return this.deps.store.notifications.stopReason(this.deps.store.db, n.id, head.generation).catch((err: unknown) => {
      this.deps.log.warn({ err, notificationId: n.id, batchId: head.id }, 'could not check a waiting batch; sending it');
      return null;
    });
  }

  /** Closes a batch left unsent; a failed close leaves it pending, unsent, as a canceled notification's batch may stay. */
  private async closeUnsent({ notification: n, batch: head }: BatchToAttempt, reason: StopReason): Promise<void> {
    await this.deps.store.batches.closeBatchUnsent(this.deps.store.db, head, reason).catch((err: unknown) => {
      this.deps.log.warn({ err, notificationId: n.id, batchId: head.id, reason }, 'could not close a batch left unsent');
    });
  }

  /**
   * Starts sending batches stored together, all of them or none (false: at its bound, they go to the queue as one
   * job, the one their rows name).
   */
  take(committed: JustCommitted[]): boolean {
    if (this.running.size >= this.deps.maxInFlight) return false;
    for (const input of committed.flatMap(committedBatches)) this.track(input.notification.id, this.attemptFirst(input));
    return true;
  }

  /** Waits for the sends in flight (at shutdown: what is cut off is left to the sweeper), then stops. */
  async close(): Promise<void> {
    while (this.running.size) await Promise.all(this.running.keys());
    clearInterval(this.heartbeat);
  }

  private track(notificationId: string, sending: Promise<void>): void {
    const done: Promise<void> = sending.finally(() => this.running.delete(done));
    this.running.set(done, { notificationId, since: Date.now() });
  }

  /** Marks the notifications of the sends in flight for a third of the lease or more as making progress. */
  private async markProgress(): Promise<void> {
    const before = Date.now() - this.deps.leaseMs / 3;
    const slow = [...new Set([...this.running.values()].filter((r) => r.since <= before).map((r) => r.notificationId))];
    await this.deps.store.notifications.touch(this.deps.store.db, slow).catch((err: unknown) => {
      this.deps.log.warn({ err, notifications: slow.length }, 'could not mark direct sends as making progress');
    });
  }

  /** The batch's first attempt, from here; one that throws is handed off (`handOff`). */
  private attemptFirst(input: BatchToAttempt, sent?: () => void): Promise<void> {
    const policy = this.firstAttempt(input, sent);
    return attemptBatch(this.deps, input, policy).then(
      () => undefined,
      (err: unknown) => this.handOff(err, input, policy),
    );
  }

  /**
   * The batch's first attempt, from here: what is left to retry goes to the queue with its backoff (a job's retry).
   */
  private firstAttempt(input: BatchToAttempt, sent?: () => void): FirstAttempt {
    const policy: FirstAttempt = {
      via: 'direct',
      maxAttempts: this.deps.maxAttempts,
      sent,
      wasRecorded: false,
      recorded: () => void (policy.wasRecorded = true),
      retry: async (left: RetryLaterError) => {
        await this.deps.scheduler.deliver([refOf(input)], this.deps.backoff(1, left));
        return false;
      },
      completes: true,
    };
    return policy;
  }

  /**
   * A first attempt that threw: one not sent, or not recorded, goes to the queue at once; one recorded whose
   * follow-up failed is left to the sweeper.
   */
  private async handOff(err: unknown, input: BatchToAttempt, policy: FirstAttempt): Promise<void> {
    const ref = refOf(input);
    if (policy.wasRecorded) {
      // the sweeper enqueues what is left to retry, or closes the notification, once it sees no progress
      this.deps.log.warn({ err, ...ref }, 'direct send recorded, its follow-up failed; left to the sweeper');
      return;
    }
    // not sent, or not recorded: the queue sends it again, at least once
    this.deps.log.warn({ err, ...ref }, 'direct send failed; handed to the queue');
    await this.deps.scheduler.deliver([ref]).catch(() => undefined); // else the sweeper finds it
  }
}

const refOf = (input: BatchToAttempt) => ({ notificationId: input.notification.id, batchId: input.batch.id });

/** A turn if one comes within `ms` (0: only one free at once), else null; one that comes later is given back. */
async function turnWithin(turns: LargeBatchTurns, ms: number): Promise<Turn | null> {
  const waiting = turns.take();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)));
  const turn = await Promise.race([waiting, late]);
  clearTimeout(timer);
  if (!turn) void waiting.then((t) => t.done());
  return turn;
}
