import { describe, expect, it } from 'vitest';
import type { DueGroup } from '../../src/db/repositories/journey-entrants.js';
import { runGroupsInTurn } from '../../src/services/journey-turns.js';

/**
 * The order a poll's batches run in (runGroupsInTurn), with batches that answer at once as scripted: how many run
 * beside each other, and when a group's stop. The engine's batches against PostgreSQL: journey-runners.test.ts.
 */
describe('journeys: the turns of a poll’s due groups', () => {
  const group = (journeyId: string, due: number): DueGroup => ({
    journey_id: journeyId,
    app_id: 'app',
    version: 1,
    step_id: 'push',
    phase: 'arrived',
    due,
  });

  /** Runs the groups; each batch of a group answers the next of its script's sizes (0 once it is used up). */
  const run = async (groups: DueGroup[], scripts: Record<string, number[]>, cut: boolean) => {
    let running = 0;
    let most = 0;
    const begun: string[] = [];
    const moved = await runGroupsInTurn(groups, {
      batchSize: 2,
      cut,
      runBatch: async (g) => {
        begun.push(g.journey_id);
        most = Math.max(most, ++running);
        await new Promise((r) => setTimeout(r, 5));
        running--;
        return scripts[g.journey_id]!.shift() ?? 0;
      },
    });
    return { moved, most, begun };
  };

  it('a read cut short: a group goes on two at once past what the poll counted, while its batches come full', async () => {
    const { moved, most, begun } = await run([group('a', 4)], { a: Array(30).fill(2) }, true);
    expect(begun).toHaveLength(20);
    expect(moved).toBe(40);
    expect(most).toBe(2);
  });

  it('a whole read: no batch past the entrants the poll counted', async () => {
    const { moved, most, begun } = await run([group('a', 4)], { a: [2, 2, 2, 1] }, false);
    expect(begun).toHaveLength(2);
    expect(moved).toBe(4);
    expect(most).toBe(2);
  });

  it('groups of one batch each run two at once, the fewest begun first', async () => {
    const { most, begun } = await run([group('a', 1), group('b', 1), group('c', 5)], { a: [1], b: [1], c: [2, 2, 1] }, false);
    expect(most).toBe(2);
    expect(begun.slice(0, 3)).toEqual(['a', 'b', 'c']);
    expect(begun.sort()).toEqual(['a', 'b', 'c', 'c', 'c']);
  });

  it('a batch that fails fails the whole, and no batch begins after it', async () => {
    let begun = 0;
    const failing = runGroupsInTurn([group('a', 10)], {
      batchSize: 2,
      cut: false,
      runBatch: async () => {
        const k = ++begun;
        await new Promise((r) => setTimeout(r, k === 1 ? 5 : 20));
        if (k === 1) throw new Error('batch 1 failed');
        return 2;
      },
    });
    await expect(failing).rejects.toThrow('batch 1 failed');
    await new Promise((r) => setTimeout(r, 50));
    expect(begun).toBe(2);
  });
});
