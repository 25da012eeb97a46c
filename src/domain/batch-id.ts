/**
 * A delivery batch's id, also its delivery job's: `<notification id>-g<generation>-b<seq>`. It is not stored
 * (migration 043): the batch is found by the three parts, which its unique key holds, and answered with it.
 */
export interface BatchKey {
  notificationId: string;
  generation: number;
  seq: number;
}

/** Deterministic batch id, also the delivery job id: a re-run fan-out cannot create or enqueue twice. */
export const batchId = (notificationId: string, generation: number, seq: number) => `${notificationId}-g${generation}-b${seq}`;

const BATCH_ID = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-g(0|[1-9]\d{0,9})-b(0|[1-9]\d{0,9})$/;
const INT_MAX = 2 ** 31 - 1;

/**
 * The parts of a batch id; undefined for a string `batchId` does not make (no batch has it: as unknown as a missing
 * one), so a batch is found by its one id, as when it was stored.
 */
export function parseBatchId(id: string): BatchKey | undefined {
  const m = BATCH_ID.exec(id);
  if (!m) return undefined;
  const [generation, seq] = [Number(m[2]), Number(m[3])];
  // the columns are integers: a larger number names no batch
  if (generation > INT_MAX || seq > INT_MAX) return undefined;
  return { notificationId: m[1]!, generation, seq };
}
