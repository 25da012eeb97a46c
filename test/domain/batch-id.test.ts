import { describe, expect, it } from 'vitest';
import { batchId, parseBatchId } from '../../src/domain/batch-id.js';

describe('batch ids', () => {
  it('reads back the key a batch id is made of', () => {
    const n = '019ab8f2-1c3d-7e4f-8a5b-6c7d8e9f0a1b';
    expect(parseBatchId(batchId(n, 3, 1_000_007))).toEqual({ notificationId: n, generation: 3, seq: 1_000_007 });
  });

  it('names no batch for what no batch id is', () => {
    const n = '019ab8f2-1c3d-7e4f-8a5b-6c7d8e9f0a1b';
    for (const id of [
      '',
      'b1',
      `${n}-1`,
      `${n}-g1`,
      `${n}-g1-b`,
      `${n}-g-1-b0`,
      `${n}-g1-b0x`,
      `${n.toUpperCase()}-g1-b0`,
      `${n}-g1-b2147483648`,
    ])
      expect(parseBatchId(id)).toBeUndefined();
  });
});
