import { describe, expect, it } from 'vitest';
import type { Deliverable } from '../../src/db/repositories/deliverable-devices.js';
import { batchId } from '../../src/domain/batch-id.js';
import { cutBatches } from '../../src/domain/batches.js';

const NID = '0199a3b2-0000-7000-8000-000000000000';
const device = (i: number, platform: 'ios' | 'android', development = false): Deliverable => ({
  id: `d${String(i).padStart(4, '0')}`,
  platform,
  development,
  not_allowed: false,
});

describe('cutBatches', () => {
  it('groups a page by platform and environment, at most batchSize devices per batch, each device once', () => {
    const page = Array.from({ length: 23 }, (_, i) => device(i, i % 3 === 0 ? 'ios' : 'android', i % 5 === 0));
    const batches = cutBatches(NID, 2, page, 7, 4);

    expect(batches.map((b) => b.seq)).toEqual(batches.map((_, i) => 7 + i)); // contiguous from firstSeq
    expect(batches.map((b) => b.id)).toEqual(batches.map((b) => batchId(NID, 2, b.seq)));
    for (const b of batches) {
      expect(b.deviceIds.length).toBeGreaterThan(0);
      expect(b.deviceIds.length).toBeLessThanOrEqual(4);
      for (const id of b.deviceIds) {
        const d = page.find((p) => p.id === id)!;
        expect([d.platform, d.development]).toEqual([b.platform, b.development]);
      }
    }
    const all = batches.flatMap((b) => b.deviceIds);
    expect(all.slice().sort()).toEqual(page.map((d) => d.id).sort());
    // 4 groups: ios/prod 6, ios/dev 2, android/prod 12, android/dev 3 -> 2 + 1 + 3 + 1 batches
    expect(batches).toHaveLength(7);
  });

  it('keeps id order inside a batch (the keyset order of the page)', () => {
    const page = Array.from({ length: 10 }, (_, i) => device(i, 'ios'));
    const [first, second] = cutBatches(NID, 1, page, 0, 6);
    expect(first!.deviceIds).toEqual(page.slice(0, 6).map((d) => d.id));
    expect(second!.deviceIds).toEqual(page.slice(6).map((d) => d.id));
  });

  it('cuts nothing from an empty page', () => {
    expect(cutBatches(NID, 1, [], 0, 1000)).toEqual([]);
  });
});
