import { describe, expect, it } from 'vitest';
import { GroupRunner } from '../../src/platform/group-runner.js';

const tick = () => new Promise((r) => setImmediate(r));

describe('GroupRunner', () => {
  it('runs a lone submission on the next turn, groups what arrives together, and what arrives while the groups in flight run', async () => {
    const groups: number[][] = [];
    const release: (() => void)[] = [];
    const commit = new GroupRunner<number, string>(
      async (items) => {
        groups.push(items);
        await new Promise<void>((r) => release.push(r));
        return items.map((i) => ({ status: 'fulfilled', value: `done ${i}` }));
      },
      { maxInFlight: 2, maxGroup: 3 },
    );
    const first = commit.submit(1);
    await tick();
    expect(groups).toEqual([[1]]);
    const rest = [2, 3, 4, 5, 6, 7, 8].map((i) => commit.submit(i));
    await tick();
    // one slot was free: what was submitted together took it, as one group; 5..8 wait for a slot
    expect(groups).toEqual([[1], [2, 3, 4]]);
    release.shift()!();
    await tick();
    expect(groups).toEqual([[1], [2, 3, 4], [5, 6, 7]]);
    release.shift()!();
    await tick();
    expect(groups).toEqual([[1], [2, 3, 4], [5, 6, 7], [8]]);
    release.splice(0).forEach((r) => r());
    expect(await first).toBe('done 1');
    expect(await Promise.all(rest)).toEqual(['done 2', 'done 3', 'done 4', 'done 5', 'done 6', 'done 7', 'done 8']);
  });

  it('gives each item its own outcome, and every item the error of a group that throws', async () => {
    let calls = 0;
    const commit = new GroupRunner<number, number>(
      async (items) => {
        calls += 1;
        if (items.includes(0)) throw new Error('group failed');
        return items.map((i) =>
          i % 2 ? { status: 'fulfilled', value: i * 10 } : { status: 'rejected', reason: new Error(`odd only: ${i}`) },
        );
      },
      { maxInFlight: 1, maxGroup: 10 },
    );
    const blocker = commit.submit(1);
    await tick(); // running: what comes next waits for it
    const settled = await Promise.allSettled([2, 3].map((i) => commit.submit(i)));
    expect(await blocker).toBe(10);
    expect(settled[0]).toMatchObject({ status: 'rejected', reason: new Error('odd only: 2') });
    expect(settled[1]).toEqual({ status: 'fulfilled', value: 30 });
    await expect(commit.submit(0)).rejects.toThrow('group failed');
    expect(calls).toBe(3);
  });

  it('runs the items of a group that throws again alone, one after another, when given how', async () => {
    let running = 0;
    let most = 0;
    const commit = new GroupRunner<number, number>(
      async (items) => {
        if (items.length > 1) throw new Error('group failed');
        return [{ status: 'fulfilled', value: items[0]! }];
      },
      { maxInFlight: 1, maxGroup: 10 },
      async (item) => {
        most = Math.max(most, ++running);
        await tick();
        running -= 1;
        if (item === 0) throw new Error('refused: 0');
        return item * 10;
      },
    );
    const blocker = commit.submit(9);
    await tick(); // running: what comes next waits for it
    const settled = await Promise.allSettled([1, 0, 2].map((i) => commit.submit(i)));
    expect(await blocker).toBe(9);
    expect(settled).toEqual([
      { status: 'fulfilled', value: 10 },
      { status: 'rejected', reason: new Error('refused: 0') },
      { status: 'fulfilled', value: 20 },
    ]);
    expect(most).toBe(1);
  });

  it('fails every item of a group at once when the database cannot serve, running none alone', async () => {
    let alone = 0;
    const lost = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
    const commit = new GroupRunner<number, number>(
      async () => {
        throw lost;
      },
      { maxInFlight: 1, maxGroup: 10 },
      async (item) => (alone++, item),
    );
    const settled = await Promise.allSettled([1, 2, 3].map((i) => commit.submit(i)));
    expect(settled).toEqual([1, 2, 3].map(() => ({ status: 'rejected', reason: lost })));
    expect(alone).toBe(0);
  });

  it('starts the next group once the one in flight gives its slot up, and answers each group only when it ends', async () => {
    const groups: number[][] = [];
    const finish: (() => void)[] = [];
    const written: (() => void)[] = [];
    const commit = new GroupRunner<number, number>(
      async (items, release) => {
        groups.push(items);
        await new Promise<void>((r) => written.push(r));
        release();
        release(); // a second call frees nothing more
        await new Promise<void>((r) => finish.push(r));
        return items.map((i) => ({ status: 'fulfilled', value: i }));
      },
      { maxInFlight: 1, maxGroup: 10 },
    );
    const answered: number[] = [];
    const first = commit.submit(1).then((v) => answered.push(v));
    await tick();
    const second = [2, 3].map((i) => commit.submit(i).then((v) => answered.push(v)));
    await tick();
    expect(groups).toEqual([[1]]); // the slot is held while the group writes
    written.shift()!();
    await tick();
    expect(groups).toEqual([[1], [2, 3]]);
    const third = commit.submit(4).then((v) => answered.push(v));
    await tick();
    expect(groups).toEqual([[1], [2, 3]]); // the second group holds the one slot; the first's release freed only one
    expect(answered).toEqual([]);
    finish.shift()!();
    await first;
    expect(answered).toEqual([1]);
    expect(groups).toEqual([[1], [2, 3]]); // the first group's end frees no second slot
    written.shift()!();
    await tick();
    expect(groups).toEqual([[1], [2, 3], [4]]);
    written.shift()!();
    await tick();
    finish.splice(0).forEach((f) => f());
    await Promise.all([...second, third]);
    expect(answered).toEqual([1, 2, 3, 4]);
  });
});
