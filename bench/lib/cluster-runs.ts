/**
 * One run of the cluster benchmark (bench/cluster.ts): a worker count in one variant's topology — the warm-up, the
 * idle watch, the broadcast with the fairness probes beside it and the bare client, then the unicast phases.
 */
import type { RunDevices, SeededDevice } from './cluster-devices.js';
import { apiGauges, LagSampler, measured, perTier, snapshot, spent, type IdleRates, type Snapshot } from './cluster-meters.js';
import { IDLE_S, PAYLOAD, type Variant } from './cluster-options.js';
import { oneDevice, postNotification, probe, queueTimes, timesToPush, type Posted } from './cluster-probes.js';
import type { ClusterResults, Fairness, Phase } from './cluster-report.js';
import { envOf, type ClusterBench } from './cluster-topology.js';
import { sleep, step } from './clock.js';
import { LoadClients, type Answers, type Post } from './load-clients.js';
import { waitReceived } from './mock-gateways.js';
import { machineCpu } from './proc-cpu.js';
import { percentile } from './setup.js';
import { bareBroadcast, startServices, waitFinished, type Services } from './stack.js';

/** A run: its index (its devices are the index'th of the other app's), its worker count and variant. */
export interface Run {
  index: number;
  workers: number;
  variant: Variant;
  devices: RunDevices;
}

/** What a run's phases share once its processes are up and warm. */
interface RunContext {
  bench: ClusterBench;
  run: Run;
  services: Services;
  unicast: UnicastClients;
  lag: LagSampler;
  /** what the processes spend a second with nothing to send */
  idlePerS: IdleRates;
}

type UnicastClients = ReturnType<typeof unicastClients>;

/** Runs `run`, `fcmAccessToken` the bare client's; what it measured is added to `results`. */
export async function runOnce(bench: ClusterBench, run: Run, fcmAccessToken: string, results: ClusterResults): Promise<void> {
  const { workers, variant } = run;
  const apis = variant === 'one-api' ? 1 : 2;
  const services = await startServices(envOf(bench, variant), {
    mode: 'split',
    apis,
    workers,
    logFile: bench.options.logFile,
    apiEnv: bench.apiEnv,
  });
  step(`${workers} worker(s), ${variant}: ${apis} API process(es) and ${workers} worker(s) ready`);
  const lag = new LagSampler(bench.db.db);
  try {
    const unicast = unicastClients(bench, services, apis);
    await warmUp(bench, run, services, unicast, apis);
    step('warmed');
    const idlePerS = await idleRates(bench, services);
    results.idles.push({ workers, variant, ...idlePerS });
    const ctx: RunContext = { bench, run, services, unicast, lag, idlePerS };
    if (!bench.options.unicastOnly) await broadcastPhase(ctx, fcmAccessToken, results);
    // unicast: one-device notifications of the other app
    for (const [k, roundDevices] of run.devices.rounds.entries()) await unicastRound(ctx, k, roundDevices, results.phases);
    await unicast.close();
  } finally {
    lag.stop();
    await services.stop();
  }
}

/** Unicast clients, spread over the API processes: `post` deals one-device notifications of the other app out to them. */
function unicastClients(bench: ClusterBench, services: Services, apis: number) {
  const loads = services.bases.map(
    (base) =>
      new LoadClients({
        base,
        authorization: bench.sender,
        clients: Math.ceil(bench.options.clients / apis),
        agent: 'undici',
        where: 'thread',
      }),
  );
  return {
    post(list: readonly SeededDevice[]): Promise<Answers[]> {
      const lists: Post[][] = loads.map(() => []);
      for (const [i, d] of list.entries())
        lists[i % loads.length]!.push({ path: '/v6/notifications', body: { notification: { to: oneDevice(d.id), payload: PAYLOAD } } });
      return Promise.all(loads.map((load, i) => load.post(lists[i]!)));
    },
    close: () => Promise.all(loads.map((load) => load.close())),
  };
}

/**
 * Warms, not counted: the API processes' one-device sends (their gateway connections, the JIT), grouped and created
 * alone (with an Idempotency-Key).
 */
async function warmUp(bench: ClusterBench, run: Run, services: Services, unicast: UnicastClients, apis: number): Promise<void> {
  const { mocks } = bench.engines;
  const warm = run.devices.warmDevices.slice(0, bench.options.warmAProcess * apis);
  await unicast.post(warm);
  await Promise.all(
    warm.slice(0, 40).map((d, i) =>
      postNotification(services.bases[i % apis]!, bench.other.keys.write, oneDevice(d.id), {
        'idempotency-key': `warm-${run.index}-${i}`,
      }),
    ),
  );
  await waitReceived(mocks, warm.length + Math.min(40, warm.length), 60_000);
  await mocks.reset();
}

/** What the processes spend a second with nothing to send, watched for IDLE_S seconds. */
async function idleRates(bench: ClusterBench, services: Services): Promise<IdleRates> {
  const idleBefore = await snapshot(bench, services);
  await sleep(IDLE_S * 1000);
  const idleUsed = await spent(bench.db, idleBefore, await snapshot(bench, services));
  return {
    cpu: perTier((tier) => idleUsed.cpu[tier] / IDLE_S),
    commands: idleUsed.commands / IDLE_S,
    wal: idleUsed.wal / IDLE_S,
  };
}

/**
 * The broadcast phase: the fairness probes with nothing else running, the broadcast with the probes posted while it
 * runs, then the ceiling (the same pushes from a bare client).
 */
async function broadcastPhase(ctx: RunContext, fcmAccessToken: string, results: ClusterResults): Promise<void> {
  const { bench, run } = ctx;
  const { workers, variant } = run;
  const { mocks } = bench.engines;
  const { devices } = bench.options;
  // fairness, nothing else running
  const idlePosted = await Promise.all([
    probe(bench, ctx.services, run.devices.idleProbes, () => true),
    probe(bench, ctx.services, run.devices.idleQueued, () => true, true),
  ]);
  await sleep(1000);
  const idle = await timesToPush(bench, idlePosted[0]);
  const idleQ = await timesToPush(bench, idlePosted[1]);
  await mocks.reset();

  const b = await broadcastWithProbes(ctx);
  const busy = await timesToPush(bench, b.posted, b.id);
  const busyQ = await timesToPush(bench, b.postedQ, b.id);
  const queuedParts =
    variant === 'single-redis' ? null : await queueTimes(bench, b.postedQ, await mocks.arrivals(b.postedQ.map((q) => q.token)));
  step('broadcast done');
  const counted = await mocks.summary();
  await mocks.reset();

  // the ceiling: the same pushes from a bare client to the same mocks
  const bare = await bareBroadcast(mocks, fcmAccessToken, { devices, payload: PAYLOAD, notificationId: b.id });
  await mocks.reset();
  const bareRate = bare.ok / (bare.ms / 1000);
  step('bare client done');
  const broadcastS = (b.lastAtEpochMs - b.t0) / 1000;
  const pushes = devices + b.posted.length + b.postedQ.length;
  results.phases.push({
    workers,
    variant,
    traffic: `broadcast, ${devices} devices`,
    pushes: devices,
    seconds: broadcastS,
    bare: bareRate,
    ...(await measured(bench.db, b.before, b.after, pushes, ctx.idlePerS, broadcastS)),
    lag: b.lagMax,
    missed: pushes - counted.distinct,
    twice: counted.twice,
  });
  results.fair.push({ workers, idle, busy, idleQ, busyQ, queuedParts, broadcastS, ...b.load });
  console.log(`${workers} worker(s), ${variant}: broadcast ${(devices / broadcastS).toFixed(0)}/s, bare ${bareRate.toFixed(0)}/s`);
}

/** The event loops, the API processes' gateway sends and the machine's CPU during a broadcast. */
type BroadcastLoad = Pick<Fairness, 'apiLoop' | 'workerMockLoop' | 'apiMockLoop' | 'apiSends' | 'apiSendMs' | 'machineBusy'>;

/**
 * The broadcast, the other app's probes posted while it runs; the event loops' delays and the machine's CPU read
 * before (which resets the delays) and after.
 */
async function broadcastWithProbes(ctx: RunContext): Promise<{
  id: string;
  /** when it was posted, and its last push arrived (epoch ms) */
  t0: number;
  lastAtEpochMs: number;
  posted: Posted[];
  postedQ: Posted[];
  before: Snapshot;
  after: Snapshot;
  lagMax: { seconds: number; bytes: number };
  load: BroadcastLoad;
}> {
  const { bench, services, lag, run } = ctx;
  const { mocks, workerMocks, apiMocks } = bench.engines;
  const { devices } = bench.options;
  const apiBefore = await apiGauges(services);
  await Promise.all([workerMocks.loopDelay(), apiMocks.loopDelay()]);
  const machineBefore = machineCpu();
  const before = await snapshot(bench, services);
  lag.start();
  const t0 = performance.timeOrigin + performance.now();
  const id = await postNotification(services.bases[0]!, bench.stack.keys.write, '*');
  let broadcasting = true;
  const probes = Promise.all([
    probe(bench, services, run.devices.busyProbes, () => broadcasting),
    probe(bench, services, run.devices.busyQueued, () => broadcasting, true),
  ]);
  // its failure is thrown where it is awaited, and the engines stopped; unhandled meanwhile, it would end the
  // process with the engines left running
  probes.catch(() => undefined);
  const finished = waitFinished(services.bases[1]!, bench.broadcaster, id);
  await Promise.race([waitReceived(mocks, devices, 600_000), finished]);
  broadcasting = false;
  const [posted, postedQ] = await probes;
  await waitReceived(mocks, devices + posted.length + postedQ.length, 30_000);
  const { lastAtEpochMs } = await mocks.received();
  const after = await snapshot(bench, services);
  const machineAfter = machineCpu();
  const apiAfter = await apiGauges(services);
  const workerMockLoop = await workerMocks.loopDelay();
  const apiMockLoop = apiMocks === workerMocks ? null : await apiMocks.loopDelay();
  const lagMax = lag.stop();
  await finished;
  await sleep(1000); // a push sent twice would arrive now
  const load: BroadcastLoad = {
    apiLoop: { p50: apiAfter.lagP50, p99: apiAfter.lagP99, max: apiAfter.lagMax },
    workerMockLoop,
    apiMockLoop,
    apiSends: apiAfter.sends - apiBefore.sends,
    apiSendMs: ((apiAfter.sendSeconds - apiBefore.sendSeconds) * 1000) / Math.max(1, apiAfter.sends - apiBefore.sends),
    machineBusy: (machineAfter.busy - machineBefore.busy) / (machineAfter.total - machineBefore.total),
  };
  return { id, t0, lastAtEpochMs, posted, postedQ, before, after, lagMax, load };
}

/** Unicast round `k`: a one-device notification of the other app to each of `roundDevices`, its phase added to `phases`. */
async function unicastRound(ctx: RunContext, k: number, roundDevices: SeededDevice[], phases: Phase[]): Promise<void> {
  const { bench, services, lag } = ctx;
  const { workers, variant } = ctx.run;
  const { mocks } = bench.engines;
  const { unicast, unicastRounds } = bench.options;
  const uBefore = await snapshot(bench, services);
  lag.start();
  const u0 = performance.timeOrigin + performance.now();
  const answers = await ctx.unicast.post(roundDevices);
  await waitReceived(mocks, unicast, 120_000);
  const uLast = (await mocks.received()).lastAtEpochMs;
  const uAfter = await snapshot(bench, services);
  const uLag = lag.stop();
  await sleep(1000);
  const tally = await mocks.tally(roundDevices.map((d) => d.token!));
  const refused = answers.reduce((n, a) => n + a.statuses.filter((s) => s !== 201).length, 0);
  if (refused) throw new Error(`${refused} unicast posts were not answered 201`);
  await mocks.reset();
  const bareRate = phases.find((p) => p.workers === workers && p.variant === variant)?.bare ?? NaN;
  phases.push({
    workers,
    variant,
    traffic: `unicast, ${unicast} notifications${unicastRounds > 1 ? `, round ${k + 1}` : ''}`,
    pushes: unicast,
    seconds: (uLast - u0) / 1000,
    bare: bareRate,
    ...(await measured(bench.db, uBefore, uAfter, unicast, ctx.idlePerS, (uLast - u0) / 1000)),
    lag: uLag,
    ...tally,
  });
  const { detail } = await spent(bench.db, uBefore, uAfter);
  printUnicastRound(ctx, k, detail, answers, (uLast - u0) / 1000);
}

/**
 * Where a unicast round's CPU went: PostgreSQL's processes by kind (exited ones: their time moves to `exited` when
 * they end), the API processes' threads; µs a notification, the larger ones. Then its POST rate and latencies.
 */
function printUnicastRound(ctx: RunContext, k: number, detail: Record<string, number>, answers: Answers[], seconds: number): void {
  const { workers, variant } = ctx.run;
  const { unicast } = ctx.bench.options;
  const total = Object.values(detail).reduce((a, b) => a + Math.abs(b), 0);
  const parts = Object.entries(detail)
    .filter(([, ms]) => Math.abs(ms) >= total / 200)
    .sort((a, b) => b[1] - a[1])
    .map(([k, ms]) => `${k} ${((ms * 1000) / unicast).toFixed(0)}`);
  console.log(`${workers} worker(s), ${variant}, round ${k + 1}: unicast CPU µs a notification by process: ${parts.join(', ')}`);
  const latencies = answers.flatMap((a) => Array.from(a.latencies)).sort((a, b) => a - b);
  const postSeconds = (Math.max(...answers.map((a) => a.endedAt)) - Math.min(...answers.map((a) => a.startedAt))) / 1000;
  console.log(
    `${workers} worker(s), ${variant}, round ${k + 1}: unicast POST ${(unicast / postSeconds).toFixed(0)} req/s, p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms; ` +
      `end to end ${(unicast / seconds).toFixed(0)}/s`,
  );
}
