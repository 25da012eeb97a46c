import { describe, expect, it } from 'vitest';
import { Semaphore } from '../../src/platform/semaphore.js';

describe('Semaphore', () => {
  it('lets `permits` holders in at once and the others in order as permits come back', async () => {
    const s = new Semaphore(2);
    const order: string[] = [];
    const release: (() => void)[] = [];
    const hold = (name: string) =>
      s.run(async () => {
        order.push(`in ${name}`);
        await new Promise<void>((r) => release.push(r));
        order.push(`out ${name}`);
      });
    const all = ['a', 'b', 'c', 'd'].map(hold);
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['in a', 'in b']);
    release.shift()!();
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['in a', 'in b', 'out a', 'in c']);
    while (release.length || order.length < 8) {
      release.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(all);
    expect(order.filter((o) => o.startsWith('in'))).toEqual(['in a', 'in b', 'in c', 'in d']);
  });

  it('gives the permit back when the work throws', async () => {
    const s = new Semaphore(1);
    await expect(s.run(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await s.run(async () => 'next')).toBe('next');
  });
});
