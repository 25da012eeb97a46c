/**
 * The cluster benchmark's --faults run (bench/cluster.ts): one broadcast while a worker, the Redis master of its
 * queue partition and the PostgreSQL replica are killed, with the recovery timers of bench/faults.ts.
 */
import { partitionOf } from '../../src/delivery/jobs.js';
import { partitionPrefix } from '../../src/delivery/queues.js';
import { sleep } from './clock.js';
import { postNotification } from './cluster-probes.js';
import type { ClusterBench } from './cluster-topology.js';
import { duplicateBound, faultSettings } from './fault-settings.js';
import { printRows } from './setup.js';
import { startServices, waitFinished } from './stack.js';

/**
 * --faults: a broadcast with the last worker count, killing a worker at 25 % of the devices reached, the Redis master
 * of the broadcast's partition at 50 % and the PostgreSQL replica at 75 %; 1 when a device was missed, more were sent
 * twice than the batches in flight, or it did not finish.
 */
export async function runFaults(bench: ClusterBench): Promise<number> {
  const { cluster, pg, mocks } = bench.engines;
  const { env, broadcaster } = bench;
  const { devices, partitions } = bench.options;
  const workers = bench.options.workerCounts.at(-1)!;
  const services = await startServices(env, { mode: 'split', apis: 2, workers, logFile: bench.options.logFile });
  const injected: string[] = [];
  try {
    const id = await postNotification(services.bases[0]!, bench.stack.keys.write, '*');
    const t0 = performance.now();
    const master = await cluster.ownerOf(partitionPrefix(env.QUEUE_PREFIX!, partitionOf(id, partitions), partitions));
    const reached = async () => (await mocks.summary()).distinct;
    const at = async (share: number) => {
      while ((await reached()) < devices * share) await sleep(20);
      return `${Math.round((100 * (await reached())) / devices)}%`;
    };
    injected.push(`worker SIGKILLed at ${await at(0.25)}`);
    services.killWorker(0);
    injected.push(`Redis master ${master} (the broadcast's partition) SIGKILLed at ${await at(0.5)}`);
    await cluster.kill(master);
    injected.push(`PostgreSQL replica stopped (immediate) at ${await at(0.75)}`);
    await pg.killReplica();
    // ended by the notification's state, read from the primary by the other API process
    const finished = await Promise.race([
      waitFinished(services.bases[1]!, broadcaster, id).then(() => true),
      sleep(600_000).then(() => false),
    ]);
    const seconds = (performance.now() - t0) / 1000;
    await sleep(1000);
    const { distinct, twice } = await mocks.summary();
    const missed = devices - distinct;
    const bound = duplicateBound(faultSettings(devices), 2);
    console.log(`\ncluster faults: ${devices} devices, ${workers} worker(s); ${injected.join('; ')}\n`);
    printRows(
      ['devices missed', 'pushed twice (bound)', 'time to finish'],
      [[String(missed), `${twice} (${bound})`, finished ? `${seconds.toFixed(1)} s` : 'did not finish']],
    );
    const failed = missed > 0 || twice > bound || !finished;
    if (failed) console.error('FAIL: a device missed, more sent twice than the batches in flight, or unfinished');
    return failed ? 1 : 0;
  } finally {
    await services.stop();
  }
}
