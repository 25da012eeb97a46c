import type { DueGroup } from '../db/repositories/journey-entrants.js';

/** Batches of one group a round runs before the others' turn. */
const BATCHES_A_GROUP = 20;
/** Batches run at once, of one group or several: one waits on PostgreSQL while the other's sends are cut and released. */
const BATCHES_AT_ONCE = 2;

/** How a poll's due groups are run: a batch of a group, of `batchSize` entrants, and whether the poll's read was cut short. */
export interface GroupTurns {
  batchSize: number;
  /** the poll read as many due entrants as it reads at most: a group may have more than it counted */
  cut: boolean;
  /** one batch of the group in a transaction of its own; answers how many entrants it moved */
  runBatch(group: DueGroup): Promise<number>;
}

/**
 * The groups' batches, BATCHES_AT_ONCE at a time across them (SKIP LOCKED parts a group's rows), a runner beginning
 * the next as soon as its own ends, so that groups of a few entrants do not wait on one another and one batch waiting
 * for its sends' turns does not hold the rest. A group's batches go on while they come full, BATCHES_A_GROUP at most,
 * for the entrants the poll counted; past them only when its read was cut short, once one has come back full (what
 * came due since goes to the next poll). The group with the fewest begun goes next. A batch that fails fails the
 * whole: no runner begins more. Answers how many entrants moved.
 */
export async function runGroupsInTurn(groups: DueGroup[], how: GroupTurns): Promise<number> {
  const { batchSize: size, cut } = how;
  const turns = groups.map((group) => ({ group, begun: 0, full: true, cameFull: false }));
  type Turn = (typeof turns)[number];
  const mayBegin = (t: Turn) => t.full && t.begun < BATCHES_A_GROUP && (t.begun * size < t.group.due || (cut && t.cameFull));
  const inFlight = new Set<Promise<unknown>>();
  let moved = 0;
  let failed = false;
  const runBatch = async (t: Turn) => {
    t.begun++;
    try {
      const n = await how.runBatch(t.group);
      moved += n;
      t.full &&= n === size;
      t.cameFull ||= n === size;
    } catch (err) {
      failed = true;
      throw err;
    }
  };
  const runner = async () => {
    while (!failed) {
      const t = turns.filter(mayBegin).sort((a, b) => a.begun - b.begun)[0];
      if (!t) {
        // another runner's batch may come back full and let more of its group begin
        if (inFlight.size === 0) return;
        await Promise.race(inFlight).catch(() => undefined);
        continue;
      }
      const batch = runBatch(t);
      inFlight.add(batch);
      await batch.finally(() => inFlight.delete(batch));
    }
  };
  await Promise.all(Array.from({ length: BATCHES_AT_ONCE }, runner));
  return moved;
}
