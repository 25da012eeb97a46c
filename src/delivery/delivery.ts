import type { Job } from 'bullmq';
import type { AttemptInput } from '../db/repositories/batches.js';
import type { BatchRef, JobTypes } from './jobs.js';
import { attemptBatch, type BatchAttemptDeps } from './batch-attempt.js';
import type { Clock } from '../platform/clock.js';
import { Semaphore } from '../platform/semaphore.js';

/** A large batch's turn (`LargeBatchTurns.take`). */
export interface Turn {
  sent: () => void;
  done: () => void;
}

/**
 * The turns of the large batches: `atOnce` of them send at a time, and as many more may be sent and not yet recorded
 * (the recording of a batch's results is not on the way of the next send). What a crash re-sends is at most the
 * batches of both: a batch sent and not recorded is sent again whole.
 */
export class LargeBatchTurns {
  private readonly sending: Semaphore;
  private readonly unrecorded: Semaphore;

  constructor(atOnce: number) {
    this.sending = new Semaphore(atOnce);
    this.unrecorded = new Semaphore(2 * atOnce);
  }

  /** Waits for a turn; `sent` once the gateway has answered, `done` once the results are recorded (or not sent). */
  async take(): Promise<Turn> {
    await this.unrecorded.acquire();
    await this.sending.acquire();
    let sending = true;
    let held = true;
    const sent = () => {
      if (sending) this.sending.release();
      sending = false;
    };
    return {
      sent,
      done: () => {
        sent();
        if (held) this.unrecorded.release();
        held = false;
      },
    };
  }
}

/** A paced batch's job is released this much before its reserved start (queues' delays are not that exact). */
export const PACE_EARLY_MS = 1000;

/** Waits for a paced batch's reserved start on the clock; bounded, so a clock that stands still cannot hold a job. */
async function untilReserved(start: Date | null, clock: Clock): Promise<void> {
  if (!start) return;
  const giveUpAt = Date.now() + 5 * PACE_EARLY_MS;
  while (clock.now() < start && Date.now() < giveUpAt)
    await new Promise((r) => setTimeout(r, Math.min(50, start.getTime() - clock.now().getTime())));
}

/**
 * The delivery job: one attempt at each of its batches (one of a fan-out, or the batches of a group of small
 * notifications created together), all at once. A worker also runs many jobs at once, so that one-device
 * notifications do not wait on each other's round trips; of the large batches (more devices than an audience cut
 * at creation has) only `largeBatchesAtOnce` send at a time, which bounds memory and what a crash re-sends (a
 * batch interrupted mid-send, or sent and not yet recorded, is sent again whole; the job ends once its batches'
 * results are recorded). A batch left to retry makes its job fail and come back later;
 * in a job of several, each such batch goes on alone (the job keeps its first, the others get a job each, with
 * their own backoff), so that one gateway's Retry-After holds back no other batch, and no batch is sent again.
 */
export function deliveryProcessor(
  deps: BatchAttemptDeps & {
    maxAttempts: number;
    largeBatchesAtOnce: number;
    /** the process's turns of large batches, shared with the fan-outs' own sends (DirectDelivery.sendInTurn) */
    largeTurns: LargeBatchTurns;
    /** enqueues a batch's own job (its id is the batch's), after `delayMs` */
    retryAlone: (batch: BatchRef, delayMs: number) => Promise<void>;
    /** the delay before a batch's next attempt, as the queue's retries have it */
    backoff: (attemptsMade: number, err: unknown) => number;
  },
) {
  const turns = deps.largeTurns;
  const readAhead = new Semaphore(deps.largeBatchesAtOnce);
  const attemptOne = async (job: Job<JobTypes['delivery']>, batchId: string): Promise<void> => {
    const input = await deps.store.loadUnlessLarge(batchId);
    if (!input || !('large' in input)) return attemptLoaded(deps, job, input);
    // A large batch is read when its turn nears (as many are read ahead as send at once): a cancel or a newer
    // generation may have come while it waited.
    const [loaded, turn] = await readAhead.run(async () => {
      const read = await deps.store.load(batchId);
      return [read, await turns.take()] as const;
    });
    try {
      return await attemptLoaded(deps, job, loaded, turn.sent);
    } finally {
      turn.done();
    }
  };
  return async (job: Job<JobTypes['delivery']>): Promise<void> => {
    const { batches } = job.data;
    const settled = await Promise.all(
      batches.map((b) =>
        attemptOne(job, b.batchId).then(
          () => null,
          (err: unknown) => ({ b, err }),
        ),
      ),
    );
    const left = settled.filter((s) => s !== null);
    if (!left.length) return;
    const [kept, ...others] = left;
    await Promise.all(others.map(({ b, err }) => deps.retryAlone(b, deps.backoff(job.attemptsMade + 1, err))));
    // the job's own retry carries only the batch it keeps (the others have their jobs)
    if (batches.length > 1) await job.updateData({ batches: [kept!.b] });
    throw kept!.err;
  };
}

/** The delivery job's attempt at one batch as just read; what is left to retry throws (RetryLaterError). */
async function attemptLoaded(
  deps: BatchAttemptDeps & { maxAttempts: number },
  job: Job<JobTypes['delivery']>,
  input: AttemptInput | undefined,
  sent?: () => void,
): Promise<void> {
  await attemptBatch(deps, input, {
    via: 'delivery',
    maxAttempts: deps.maxAttempts,
    // a batch that went on in a job of its own (deliveryProcessor) has had attempts its new job did not make
    attemptsMade: job.attemptsMade,
    beforeSend: job.attemptsMade === 0 ? (i) => untilReserved(i.batch.not_before ?? null, deps.clock) : undefined,
    sent,
    retry: (left) => Promise.reject(left), // the queue runs the job again after its backoff
    completes: true,
  });
}
