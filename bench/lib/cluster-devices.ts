/**
 * The cluster benchmark's devices (bench/cluster.ts): the broadcast's, and the other app's, dealt to the runs.
 */
import { sql } from 'kysely';
import type { ClusterApps } from './cluster-topology.js';

/** A device of the other app, as the runs post to it. */
export interface SeededDevice {
  id: string;
  token: string | null;
}

/** One run's devices of the other app, each list apart from the others and from the other runs'. */
export interface RunDevices {
  /** the warm-up's one-device notifications */
  warmDevices: SeededDevice[];
  /** the unicast phases', one list a round */
  rounds: SeededDevice[][];
  /** the fairness probes: posted with nothing else running, and during the broadcast; sent by the API, or keyed */
  idleProbes: SeededDevice[];
  busyProbes: SeededDevice[];
  idleQueued: SeededDevice[];
  busyQueued: SeededDevice[];
}

/** Seeds the devices of both apps for `runs` runs, and says so; run r's devices of the other app are `devicesOf(r)`. */
export async function seedDevices(apps: ClusterApps, runs: number): Promise<(r: number) => RunDevices> {
  const { db, stack, other, options, engines } = apps;
  const { devices, unicast, unicastRounds, fairness } = options;
  const t = Date.now();
  // the broadcast's devices, then the other app's, for each run: the unicast ones, the idle probes, the probes during
  // the broadcast (each run its own, so every run's one-device notifications create their audiences alike)
  const seed = (appId: string, from: number, to: number) =>
    sql`
    insert into devices (app_id, platform, token, locale)
    select ${appId}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex'), 'en_US'
    from generate_series(${from}::int, ${to}::int) as i`.execute(db.db);
  await seed(stack.app.id, 1, devices);
  const warmDevices = options.warmAProcess * 2;
  const perRun = warmDevices + unicast * unicastRounds + 4 * fairness;
  await seed(other.app.id, devices + 1, devices + perRun * runs);
  await sql`analyze devices`.execute(db.db);
  const theirs = await db.db.selectFrom('devices').select(['id', 'token']).where('app_id', '=', other.app.id).orderBy('token').execute();
  console.log(
    `cluster benchmark: seeded ${devices} + ${theirs.length} devices in ${Date.now() - t} ms; 3 Redis masters (ports ${engines.cluster.ports.join(', ')}), ` +
      `prefix ${apps.prefix} x ${options.partitions} partitions, PostgreSQL primary + streaming replica, PgBouncer ${engines.bouncer.port} (transaction mode); ` +
      `service log lines in ${options.logFile}`,
  );
  return (r: number) => {
    const all = theirs.slice(r * perRun, (r + 1) * perRun);
    const mine = all.slice(warmDevices);
    const rounds = Array.from({ length: unicastRounds }, (_, k) => mine.slice(k * unicast, (k + 1) * unicast));
    return {
      warmDevices: all.slice(0, warmDevices),
      rounds,
      idleProbes: mine.slice(unicast * unicastRounds, unicast * unicastRounds + fairness),
      busyProbes: mine.slice(unicast * unicastRounds + fairness, unicast * unicastRounds + 2 * fairness),
      idleQueued: mine.slice(unicast * unicastRounds + 2 * fairness, unicast * unicastRounds + 3 * fairness),
      busyQueued: mine.slice(unicast * unicastRounds + 3 * fairness),
    };
  };
}
