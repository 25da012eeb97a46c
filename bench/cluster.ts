/**
 * Cluster benchmark: pushd in the topology of a large deployment, every part a real engine on this machine — a
 * Redis Cluster of 3 masters (each with a replica), PostgreSQL with a streaming replica, PgBouncer in transaction
 * mode in front of the primary, 2 API processes (the clients spread over both) and N worker processes — running
 * a broadcast to `--devices` devices of one app and `--unicast` one-device notifications of another, against a
 * bare HTTP/2 client sending the same pushes to the same mock gateways in the same run.
 *
 *   npm run -s bench -- cluster [--devices 100000] [--unicast 2000] [--workers 1,2] [--clients 50] [--fairness 20]
 *                               [--partitions 6] [--faults] [--variants cluster,direct-pg,...] [--unicast-only]
 *                               [--warm 2000] [--unicast-rounds 1] [--probe-gateway apart|shared]
 *
 * For each worker count it prints pushes/s and the ratio to the bare client, CPU µs a push per tier (read from
 * /proc/<pid>/stat of every process of the tier), Redis commands a push (INFO commandstats, summed over the
 * masters), PostgreSQL WAL bytes a push (pg_current_wal_lsn), the replica's largest replay lag, and fairness: the
 * time to push of `--fairness` one-device notifications of the other app posted while the broadcast runs, beside
 * the same posted while nothing else runs, both those the API sends itself and as many posted with an
 * Idempotency-Key (created alone), with where the time went (the POST, the event loops, the CPU). The
 * API processes send to mock gateways of their own (`--probe-gateway shared`: to the broadcast's). The mocks count
 * pushes per token: a device missed or pushed twice makes it exit 1.
 *
 * --variants: the runs of each worker count, each changing ONE part of the topology (see VARIANTS in
 * bench/lib/cluster-options.ts): to find what a figure costs, compare a variant's row with the `cluster` row of the
 * same run. --unicast-only: only the warm-up, the idle watch and the one-device notifications of each run (no
 * broadcast, fairness probes or bare client).
 * After each unicast phase a line says where PostgreSQL's CPU went (its processes by kind, exited backends
 * included) and the API processes' (by thread).
 *
 * --faults: one broadcast with the last worker count, killing a worker at 25 % of the devices reached, the Redis
 * master of the broadcast's queue partition at 50 % (its replica takes over) and the PostgreSQL replica at 75 %,
 * with the recovery timers of bench/faults.ts: no device may be missed, and pushes sent twice stay within the
 * batches in flight when the faults hit.
 */
import { parseFcmServiceAccount } from '../src/domain/credentials.js';
import { ServiceAccountTokenCredential } from '../src/gateways/google-oauth.js';
import { step } from './lib/clock.js';
import { seedDevices } from './lib/cluster-devices.js';
import { runFaults } from './lib/cluster-faults.js';
import { clusterOptions } from './lib/cluster-options.js';
import { printReport, type ClusterResults } from './lib/cluster-report.js';
import { runOnce } from './lib/cluster-runs.js';
import { clusterApps, withEngines, type ClusterBench, type Engines } from './lib/cluster-topology.js';

const options = clusterOptions();

/** Seeds the devices, runs each worker count in each variant (or the --faults run) and prints the tables; the exit status. */
async function run(engines: Engines): Promise<number> {
  const apps = await clusterApps(options, engines);
  const runs = options.workerCounts.flatMap((workers) => options.variants.map((variant) => ({ workers, variant })));
  const devicesOf = await seedDevices(apps, runs.length);
  const pids = await engines.pg.pids();
  step('engines up, devices seeded');
  const auth = (key: string) => `Basic ${Buffer.from(`:${key}`).toString('base64')}`;
  const bench: ClusterBench = { ...apps, pids, broadcaster: auth(apps.stack.keys.write), sender: auth(apps.other.keys.write) };

  if (options.faults) return runFaults(bench);

  const results: ClusterResults = { phases: [], idles: [], fair: [] };
  const oauth = await new ServiceAccountTokenCredential(parseFcmServiceAccount(engines.mocks.serviceAccount), {
    tokenUrl: engines.mocks.fcmTokenUrl,
  }).getAccessToken();
  for (const [r, { workers, variant }] of runs.entries())
    await runOnce(bench, { index: r, workers, variant, devices: devicesOf(r) }, oauth.access_token, results);
  await apps.stack.close();
  return printReport(options, results);
}

async function main() {
  process.exitCode = await withEngines(options, run);
}

main().then(
  () => process.exit(),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
