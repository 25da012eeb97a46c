import path from 'node:path';
import { defineConfig } from 'vitest/config';

// Test gateways (mock APNs/FCM) use a CA of their own; Node reads NODE_EXTRA_CA_CERTS only at process start,
// so it is set here, before vitest forks its workers.
process.env.NODE_EXTRA_CA_CERTS = path.resolve('test/fixtures/tls/ca.pem');

/** Load tests that measure the machine as a whole, and the failovers whose timings a busy machine stretches: after the rest, alone. */
const ALONE = ['test/system/scale-out.test.ts', 'test/system/failover.test.ts', 'test/system/failover-window.test.ts'];

export default defineConfig({
  test: {
    globalSetup: ['test/helpers/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default'],
    projects: [
      { extends: true, test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: ALONE, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: 'alone', include: ALONE, fileParallelism: false, sequence: { groupOrder: 1 } } },
    ],
  },
});
