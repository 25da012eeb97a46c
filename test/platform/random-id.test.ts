import { describe, expect, it } from 'vitest';
import { randomId, timeOrderedUuid } from '../../src/platform/random-id.js';

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

describe('timeOrderedUuid', () => {
  it('is a version 7 UUID whose first 48 bits are the time it is given, the rest random', () => {
    const at = Date.parse('2026-11-25T12:34:56.789Z');
    const id = timeOrderedUuid(at);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(parseInt(id.replaceAll('-', '').slice(0, 12), 16)).toBe(at);
    const ids = Array.from({ length: 5_000 }, () => timeOrderedUuid(at));
    expect(new Set(ids).size).toBe(ids.length);
    // each random digit takes every value (the version and variant digits excepted)
    const digits = new Set(ids.flatMap((i) => [...i.replaceAll('-', '').slice(13, 16)]));
    expect(digits.size).toBe(16);
  });

  it('sorts by time, as uuid columns compare (bytewise), so a day is one range of ids', () => {
    const times = [0, 1, 86_400_000, Date.parse('2026-11-25T00:00:00Z'), Date.parse('2026-11-25T00:00:00.001Z'), 2 ** 48 - 1];
    const ids = times.map((t) => timeOrderedUuid(t));
    expect([...ids].sort()).toEqual(ids);
    expect(timeOrderedUuid()).toMatch(/^[0-9a-f]{8}-/);
  });

  it('refuses times it cannot hold', () => {
    for (const at of [-1, 1.5, 2 ** 48, Number.NaN]) expect(() => timeOrderedUuid(at)).toThrow(RangeError);
  });
});
