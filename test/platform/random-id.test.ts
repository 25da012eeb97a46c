import { describe, expect, it } from 'vitest';
import { randomId } from '../../src/platform/random-id.js';

describe('randomId', () => {
  it('is base64url of the bytes asked for', () => {
    expect(randomId(9)).toMatch(/^[A-Za-z0-9_-]{12}$/);
    expect(randomId(1)).toMatch(/^[A-Za-z0-9_-]{2}$/);
    expect(Buffer.from(randomId(4096), 'base64url')).toHaveLength(4096);
  });

  it('never hands out the same bytes twice, across many refills of its pool', () => {
    const ids = Array.from({ length: 20_000 }, () => randomId(9));
    expect(new Set(ids).size).toBe(ids.length);
    // uniformly random: each of the 64 characters appears, none far more often than the others
    const counts = new Map<string, number>();
    for (const c of ids.join('')) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(64);
    expect(Math.max(...counts.values())).toBeLessThan((2 * ids.length * 12) / 64);
  });

  it('refuses sizes it cannot draw', () => {
    for (const bytes of [0, -1, 1.5, 4097]) expect(() => randomId(bytes)).toThrow(RangeError);
  });
});
