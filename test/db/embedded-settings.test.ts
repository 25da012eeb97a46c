import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { memoryOfThisMachine, settingsFor } from '../../src/db/embedded-settings.js';

const GiB = 1024 ** 3;

describe('the embedded PostgreSQL sized to a machine', () => {
  it.each([
    [0.25 * GiB, '128MB', '512MB'],
    [1 * GiB, '256MB', '512MB'],
    [24 * GiB, '6144MB', '12288MB'],
    [64 * GiB, '8192MB', '32768MB'],
    [512 * GiB, '8192MB', '65536MB'],
  ])('%d bytes: shared_buffers %s, effective_cache_size %s', (memory, sharedBuffers, cache) => {
    expect(settingsFor(memory)).toEqual({
      shared_buffers: sharedBuffers,
      effective_cache_size: cache,
      max_wal_size: '4GB',
      checkpoint_timeout: '15min',
    });
  });

  it("is never more than the machine's memory: an unlimited cgroup reads as a number far beyond it", () => {
    expect(process.constrainedMemory()).toBeGreaterThan(0);
    expect(memoryOfThisMachine()).toBeGreaterThan(0);
    expect(memoryOfThisMachine()).toBeLessThanOrEqual(os.totalmem());
  });
});
