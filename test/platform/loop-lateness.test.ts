import { describe, expect, it } from 'vitest';
import { LoopLateness } from '../../src/platform/loop-lateness.js';

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the event loop sampled once for every reader', () => {
  it('gives each reader the same samples, a busy turn as lateness, and stops when none reads', async () => {
    const loop = new LoopLateness();
    const first: number[] = [];
    const second: number[] = [];
    const stopFirst = loop.follow((_now, late) => first.push(late));
    const stopSecond = loop.follow((_now, late) => second.push(late));
    await wait(50);
    const busyUntil = performance.now() + 60;
    while (performance.now() < busyUntil); // one turn of 60 ms
    await wait(30);
    stopFirst();
    expect(second.slice(0, first.length)).toEqual(first);
    expect(Math.max(...first)).toBeGreaterThanOrEqual(40);

    const seen = second.length;
    await wait(30);
    expect(second.length).toBeGreaterThan(seen); // still sampled for the one left
    stopSecond();
    const last = second.length;
    await wait(40);
    expect(second.length).toBe(last);
  });
});
