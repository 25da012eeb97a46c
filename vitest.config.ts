import path from 'node:path';
import { defineConfig } from 'vitest/config';

// Test gateways (mock APNs/FCM) use a CA of their own; Node reads NODE_EXTRA_CA_CERTS only at process start,
// so it is set here, before vitest forks its workers.
process.env.NODE_EXTRA_CA_CERTS = path.resolve('test/fixtures/tls/ca.pem');

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default'],
  },
});
