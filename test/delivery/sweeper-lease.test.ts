import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.js';
import { createRepositories } from '../../src/services/deps.js';
import { LeasesRepository } from '../../src/db/repositories/leases.js';
import { systemClock } from '../../src/platform/clock.js';
import { createLogger } from '../../src/platform/logger.js';
import { Metrics } from '../../src/platform/metrics.js';
import { jobSpecs } from '../../src/delivery/jobs.js';
import { JobQueues } from '../../src/delivery/queues.js';
import { SCAN_LEASE, startSweeper } from '../../src/delivery/sweeper.js';
import { waitFor } from '../helpers/gateways.js';
import { useHarness } from '../helpers/harness.js';
import { retentionOf } from '../../src/delivery/retention.js';
import { loadConfig } from '../../src/platform/config.js';

const LEASE_MS = 1500;

describe("the sweeper's scan lease", () => {
  const h = useHarness();
  const opened: { handle: DatabaseHandle; queues: JobQueues }[] = [];
  afterAll(async () => {
    for (const { handle, queues } of opened) {
      await queues.close();
      await handle.close().catch(() => undefined);
    }
  });

  /** A worker's sweeper with a database pool and queues of its own, as another process has. */
  function worker(holder: string) {
    const handle = openDatabase(h.databaseUrl, 2);
    const queues = new JobQueues(
      { kind: 'postgres', databaseUrl: h.databaseUrl, prefix: h.queuePrefix },
      jobSpecs({ deliveryAttempts: 1 }),
    );
    opened.push({ handle, queues });
    const metrics = new Metrics();
    const sweeper = startSweeper({
      db: handle.db,
      log: createLogger('silent'),
      ...createRepositories(),
      repos: createRepositories(),
      retention: retentionOf(loadConfig({})),
      clock: systemClock,
      queues,
      scheduler: { schedule: async () => undefined, deliver: async () => undefined, decideWinner: async () => undefined },
      afterSeconds: 2, // sweeps every second
      heldSeconds: 20,
      lease: { leases: new LeasesRepository(), holder, ms: LEASE_MS },
      metrics,
    });
    const scans = async () => (await metrics.stalledScans.get()).values[0]?.value ?? 0;
    return { holder, handle, sweeper, scans };
  }
  const holderNow = async () =>
    (await h.db.db.selectFrom('leases').select('holder').where('name', '=', SCAN_LEASE).executeTakeFirst())?.holder;

  it('lets one of two workers scan; when it dies the other takes the lease over within the lease time and scans', async () => {
    const workers = [worker('worker-a'), worker('worker-b')];
    await new Promise((r) => setTimeout(r, 3500)); // three sweeps each
    const scans = await Promise.all(workers.map((w) => w.scans()));
    const [scanning, idle] = scans[0]! > 0 ? [workers[0]!, workers[1]!] : [workers[1]!, workers[0]!];
    expect(
      scans.filter((n) => n > 0),
      JSON.stringify(scans),
    ).toHaveLength(1);
    expect(await scanning.scans()).toBeGreaterThanOrEqual(2);
    expect(await holderNow()).toBe(scanning.holder);

    // The scanning worker dies: its database connections go, and nothing of it renews or gives the lease up.
    const died = Date.now();
    await scanning.handle.close();
    await waitFor('the other worker to hold the lease', async () => (await holderNow()) === idle.holder, 10_000, 20);
    // it expires within the lease of its last renewal, and the other tries every third of it
    expect(Date.now() - died).toBeLessThanOrEqual(LEASE_MS + LEASE_MS / 3 + 1000);
    await waitFor('the other worker to scan', async () => (await idle.scans()) > 0, 5000, 20);

    await scanning.sweeper.stop();
    // stopping gives the lease up at once
    await idle.sweeper.stop();
    expect(await holderNow()).toBeUndefined();
  });
});
