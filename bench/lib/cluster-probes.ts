/**
 * The cluster benchmark's fairness probes (bench/cluster.ts): one-device notifications of the other app posted while
 * a broadcast runs (or nothing does), and where their time to push went.
 */
import { partitionOf } from '../../src/delivery/jobs.js';
import { partitionPrefix } from '../../src/delivery/queues.js';
import { withNode } from '../../test/engines/redis-cluster.js';
import { sleep } from './clock.js';
import type { SeededDevice } from './cluster-devices.js';
import { PAYLOAD, PROBE_EVERY_MS } from './cluster-options.js';
import type { ClusterBench } from './cluster-topology.js';
import { notificationPoster, type Services } from './stack.js';

/** A fairness probe: its notification, when it was posted and answered (epoch ms). */
export interface Posted {
  id: string;
  token: string;
  at: number;
  answeredAt: number;
}

/** Probes' times, each list sorted (ms): to the push, to the POST's answer, from the answer to the push. */
export interface ProbeTimes {
  total: number[];
  answer: number[];
  afterAnswer: number[];
  /** how many reached the API processes' mocks (null: they share the workers') */
  byApi: number | null;
  /** the times to push of those whose jobs share the broadcast's queue partition, sorted */
  inBroadcastPartition: number[];
}

/** Where the queued probes' time went, each list sorted (ms): POST to added, to taken, to pushed, to recorded. */
export interface QueueTimes {
  posted: number[];
  waiting: number[];
  worker: number[];
  record: number[];
}

/** POST /v6/notifications of the benchmark's payload to `to` with the app's write key; the notification's id. */
export async function postNotification(base: string, writeKey: string, to: unknown, headers: Record<string, string> = {}) {
  return (await notificationPoster(base, writeKey, PAYLOAD).post(to, headers)).id;
}

/** The audience of one device, by its id. */
export const oneDevice = (id: string) => [{ name: 'device_id', criteria: [id] }];

/**
 * Posts the probes PROBE_EVERY_MS apart while `going` holds, each to one device of the other app; `keyed` with an
 * Idempotency-Key, which creates each alone (the API sends it itself too, unless it has no room: then a delivery job).
 */
export async function probe(
  bench: ClusterBench,
  services: Services,
  probes: readonly SeededDevice[],
  going: () => boolean,
  keyed = false,
): Promise<Posted[]> {
  await bench.engines.mocks.watch(probes.map((d) => d.token!));
  const posted: Posted[] = [];
  if (keyed) await sleep(PROBE_EVERY_MS / 2); // between the direct ones
  for (const [i, d] of probes.entries()) {
    if (!going()) break;
    const at = performance.timeOrigin + performance.now();
    const headers: Record<string, string> = keyed ? { 'idempotency-key': `probe-${d.token}` } : {};
    const id = await postNotification(services.bases[i % services.bases.length]!, bench.other.keys.write, oneDevice(d.id), headers);
    posted.push({ id, token: d.token!, at, answeredAt: performance.timeOrigin + performance.now() });
    await sleep(PROBE_EVERY_MS);
  }
  return posted;
}

/**
 * The probes' times to push, split into the POST's answer and what came after it; how many the API processes
 * sent; those of the probes in the queue partition of `broadcast`.
 */
export async function timesToPush(bench: ClusterBench, posted: Posted[], broadcast?: string): Promise<ProbeTimes> {
  const { mocks, apiMocks, workerMocks } = bench.engines;
  const { partitions } = bench.options;
  const tokens = posted.map((p) => p.token);
  const arrivals = await mocks.arrivals(tokens);
  const byApi = apiMocks === workerMocks ? null : (await apiMocks.counts(tokens)).filter((n) => n > 0).length;
  const times = posted.map((p, i) => (arrivals[i] == null ? Infinity : arrivals[i]! - p.at));
  const sorted = (f: (p: Posted, arrival: number | null) => number) => posted.map((p, i) => f(p, arrivals[i]!)).sort((a, b) => a - b);
  const shared = broadcast === undefined ? -1 : partitionOf(broadcast, partitions);
  return {
    total: [...times].sort((a, b) => a - b),
    answer: sorted((p) => p.answeredAt - p.at),
    afterAnswer: sorted((p, a) => (a === null ? Infinity : a - p.answeredAt)),
    byApi,
    inBroadcastPartition: times.filter((_, i) => partitionOf(posted[i]!.id, partitions) === shared).sort((a, b) => a - b),
  };
}

/**
 * Where the time went of the probes that were queued, from their delivery jobs' events in the partitions' event streams (whose ids
 * are Redis's clock, ms): POST to the job added, added to taken by a worker, taken to the push, push to done;
 * each list sorted. Only on the Redis Cluster (not the `single-redis` variant).
 */
export async function queueTimes(bench: ClusterBench, posted: Posted[], arrivals: (number | null)[]): Promise<QueueTimes> {
  const { partitions } = bench.options;
  const streams = new Map<number, [string, string[]][]>();
  for (const p of new Set(posted.map((q) => partitionOf(q.id, partitions)))) {
    const tag = partitionPrefix(bench.prefix, p, partitions);
    streams.set(p, await withNode(await bench.engines.cluster.ownerOf(tag), (r) => r.xrange(`${tag}:delivery:events`, '-', '+')));
  }
  const parts = { posted: [] as number[], waiting: [] as number[], worker: [] as number[], record: [] as number[] };
  for (const [i, q] of posted.entries()) {
    const job = `${q.id}-g1-b0`;
    const at = (event: string) => {
      const entry = streams.get(partitionOf(q.id, partitions))!.find(([, f]) => f[f.indexOf('jobId') + 1] === job && f[1] === event);
      return entry ? Number(entry[0].split('-')[0]) : NaN;
    };
    const [added, active, completed, arrived] = [at('added'), at('active'), at('completed'), arrivals[i] ?? NaN];
    if (Number.isNaN(added)) continue; // sent by the API process, no job
    parts.posted.push(added - q.at);
    parts.waiting.push(active - added);
    parts.worker.push(arrived - active);
    parts.record.push(completed - arrived);
  }
  for (const list of Object.values(parts)) list.sort((a, b) => a - b);
  return parts;
}
