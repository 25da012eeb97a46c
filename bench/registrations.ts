/**
 * Registrations: what an app release does, every phone posting `POST /v6/devices` with the sdk key as its SDK sends
 * it (bench/lib/device-fill.ts), from many clients at once. One ROLE=all process with production's settings (rate
 * limits raised, LOG_LEVEL info, its log to a file); first new tokens (201), then the same devices again (200), then
 * what each phone reports when its app opens and closes (`POST /v6/devices/:id/sessions`, a session's start and its
 * end, 202), and each device's tap on a broadcast's push (`POST /v6/devices/:id/opens`, 202); then the floor: a bare
 * PostgreSQL client writing the same rows (the device and its custom attributes, one statement each registration, its
 * tags made by the devices' trigger as the service's are) for as many other new tokens.
 * CPU per registration of the service, of the PostgreSQL server and of the clients, beside `pgbench -N`.
 *
 *   npm run bench -- registrations [--devices 20000] [--clients 50] [--flush-delay-ms N] [--rate-of-pgbench F | --rate R]
 *
 * `--rate-of-pgbench F`: the service's phases posted at F times the same run's `pgbench -N` a second (open loop, each
 * latency from when its post was due), where by default each client posts its next once answered: the target's "≥ 0.5
 * × `pgbench -N` at p99 ≤ 50 ms" read at that rate. `--rate R`: at R a second (two variants at one rate). The floor is
 * posted as fast as answered either way.
 *
 * `--flush-delay-ms N`: everything, pgbench included, on a PostgreSQL of the benchmark's own whose WAL flush takes N ms
 * longer (bench/lib/slow-flush.ts), as on the disk the `pgbench -N` targets were set on (`unicast` has the same).
 */
import { createHash, randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { sql } from 'kysely';
import type { DatabaseHandle } from '../src/db/database.js';
import { registration } from './lib/device-fill.js';
import { LoadClients, type Answers } from './lib/load-clients.js';
import { measurePhase as measured, phaseCells, type CpuMeters, type Phase } from './lib/phases.js';
import { mocksHere } from './lib/mock-gateways.js';
import { pgbenchTps } from './lib/pgbench.js';
import { arg, parentPid, printRows } from './lib/setup.js';
import { backendsCpuSince, databaseBackendsCpu, databaseWalSince, walMark } from './lib/database-wal.js';
import { BENCH_BUNDLE, benchApp, notificationPoster, startServices, waitFinished } from './lib/stack.js';
import { slowFlushDatabase } from './lib/slow-flush.js';

const devices = Number(arg('devices', '20000'));
const clients = Number(arg('clients', '50'));
const flushDelayMs = Number(arg('flush-delay-ms', '0'));
if (!Number.isFinite(flushDelayMs) || flushDelayMs < 0) throw new Error('--flush-delay-ms takes a number of 0 or more');
const rateOfPgbench = Number(arg('rate-of-pgbench', '0'));
if (!Number.isFinite(rateOfPgbench) || rateOfPgbench < 0) throw new Error('--rate-of-pgbench takes a number of 0 or more');
const rate = Number(arg('rate', '0'));
if (!Number.isFinite(rate) || rate < 0) throw new Error('--rate takes a number of 0 or more');
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
/**
 * production's settings but the rate limits, raised (the sdk key's too: every client posts from this machine), and
 * admission control off: this measures what a registration costs, bench/capacity what is refused past capacity
 */
const OUTSIDE_ENV = {
  MAX_QUEUE_DELAY_MS: '0',
  LOG_LEVEL: 'info',
  RATE_LIMIT_PER_SECOND: '100000',
  RATE_LIMIT_BURST: '100000',
  RATE_LIMIT_SDK_PER_SECOND: '100000',
  RATE_LIMIT_SDK_BURST: '100000',
};
const LOG_FILE = path.join(tmpdir(), `pushd-bench-registrations-${process.pid}.log`);

/**
 * The floor: registration i's device row and custom attributes in one autocommit statement, from `clients`
 * connections, as a client that knows the token is new writes it.
 */
async function bareInserts(pool: pg.Pool, appId: string, from: number, count: number, identitySecret: string): Promise<Answers> {
  const latencies = new Float64Array(count);
  const statuses = new Uint16Array(count);
  let next = 0;
  const startedAt = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let k = next++; k < count; k = next++) {
        const d = registration(from + k, identitySecret).device as Record<string, unknown> & {
          custom: Record<string, { type: string; value: unknown }>;
        };
        const attrs = Object.entries(d.custom).map(([name, a]) => ({ name, type: a.type, value: a.value }));
        const t = performance.now();
        await pool.query(FLOOR_INSERT, [
          appId,
          d.platform,
          d.token,
          d.locale,
          d.time_zone,
          d.country,
          d.os_name,
          d.os_version,
          d.app_version,
          d.sdk_version,
          d.hardware_name,
          d.badge,
          d.user_id,
          d.notifications_allowed,
          d.tags,
          '127.0.0.1',
          createHash('sha256')
            .update(`credential${from + k}`)
            .digest('hex'),
          JSON.stringify(attrs),
        ]);
        latencies[k] = performance.now() - t;
        statuses[k] = 201;
      }
    }),
  );
  const endedAt = performance.now();
  return { latencies, statuses, startedAt, endedAt };
}

const FLOOR_INSERT = `
  with device as (
    insert into devices (app_id, platform, token, locale, time_zone, country, os_name, os_version, app_version, sdk_version,
                         marketing_name, badge, user_id, notifications_allowed, tags, ip_address, credential_hash)
    values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
    returning id, app_id)
  insert into device_attributes (device_id, app_id, name, type, position, is_array, str_value, num_value, date_value, bool_value)
  select device.id, device.app_id, a.name, a.type, 0, false,
         case when a.type = 'string' then a.value #>> '{}' end,
         case when a.type in ('integer', 'float') then (a.value #>> '{}')::float8 end,
         case when a.type = 'date' then (a.value #>> '{}')::timestamptz end,
         case when a.type = 'boolean' then (a.value #>> '{}')::boolean end
  from device, jsonb_to_recordset($18::jsonb) as a(name text, type text, value jsonb)`;

/** Each device of the app reports a session's start, then its end (the same id, with its duration). */
async function sessionPosts(db: DatabaseHandle, appId: string) {
  const { rows } = await sql<{ id: string }>`select id from devices where app_id = ${appId} order by created_at, id`.execute(db.db);
  const phones = rows.slice(0, devices).map(({ id }) => ({ device: id, session: randomUUID() }));
  return {
    devices: phones.map((p) => p.device),
    starts: phones.map((p) => ({ path: `/v6/devices/${p.device}/sessions`, body: { session: { id: p.session } } })),
    ends: phones.map((p) => ({ path: `/v6/devices/${p.device}/sessions`, body: { session: { id: p.session, duration: 95 } } })),
  };
}

/** A broadcast to every device, sent; then each device reports the push tapped, as phones do after one. */
async function openPosts(base: string, writeKey: string, devices: string[]) {
  const poster = notificationPoster(base, writeKey, { alert: 'Back in stock' });
  const { id } = await poster.post('*');
  await waitFinished(base, poster.auth, id);
  return devices.map((device) => ({ path: `/v6/devices/${device}/opens`, body: { open: { _nid: id, tapped: true } } }));
}

async function main() {
  const slowFlush = await slowFlushDatabase(flushDelayMs);
  const tps = await pgbenchTps();
  const perSecond = rate || Math.round(rateOfPgbench * Number(tps));
  if (rateOfPgbench > 0 && !(perSecond > 0)) throw new Error(`--rate-of-pgbench needs pgbench's figure, got: ${tps}`);
  const gateways = await mocksHere(BENCH_BUNDLE);
  const stack = await benchApp('bench_registrations', { queue: 'redis', redisUrl, gateways });
  const services = await startServices({ ...stack.env, ...OUTSIDE_ENV }, { mode: 'single', logFile: LOG_FILE });
  const load = new LoadClients({
    base: services.base,
    authorization: `Basic ${Buffer.from(`:${stack.keys.sdk}`).toString('base64')}`,
    clients,
    agent: 'http',
    where: 'process',
  });
  const backend = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(stack.db.db)).rows[0]!.pid;
  const meters: CpuMeters = { service: services.api.pid!, postmaster: parentPid(backend), clients: load.pid! };
  const posts = (from: number) =>
    Array.from({ length: devices }, (_, i) => ({ path: '/v6/devices', body: registration(from + i, stack.identitySecret) }));
  const rows: Phase[] = [];
  const wal: (number | null)[] = [];
  const backendsCpu: number[] = [];
  /**
   * the phase measured, with the WAL bytes of its registrations (this database's, told from the others' by
   * pg_waldump) and the CPU of this database's backends alone (the server's includes what other benches run on it)
   */
  const measuredWithWal = async (name: string, meters: CpuMeters, expected: number, run: () => Promise<Answers>) => {
    const from = await walMark(stack.db);
    let backends = new Map<number, number>();
    rows.push(
      await measured(name, meters, expected, async () => {
        backends = await databaseBackendsCpu(stack.db);
        return run();
      }),
    );
    backendsCpu.push((await backendsCpuSince(stack.db, backends)) / devices);
    const bytes = await databaseWalSince(stack.db, from);
    wal.push(bytes === null ? null : bytes / devices);
  };
  // a warm-up of other tokens, so the measured phases run on a warm process (its JIT, its connections)
  await load.post(posts(3 * devices).slice(0, Math.min(2000, devices)));
  await measuredWithWal('new token', meters, 201, () => load.post(posts(0), perSecond));
  await measuredWithWal('same device again', meters, 200, () => load.post(posts(0), perSecond));
  const sessions = await sessionPosts(stack.db, stack.app.id);
  await measuredWithWal('session start', meters, 202, () => load.post(sessions.starts, perSecond));
  await measuredWithWal('session end', meters, 202, () => load.post(sessions.ends, perSecond));
  const opens = await openPosts(services.base, stack.keys.write, sessions.devices);
  await measuredWithWal('push open (a broadcast tapped)', meters, 202, () => load.post(opens, perSecond));
  await load.close();
  await services.stop();
  const floorMeters = { service: null, postmaster: meters.postmaster, clients: process.pid };
  const pool = new pg.Pool({ connectionString: stack.database.url, max: clients });
  // an idle connection the server ends is replaced, as the service's pools do; unheard, its error ended the run (once in 5)
  pool.on('error', () => undefined);
  // warmed as the service was: its connections opened, their caches filled
  await bareInserts(pool, stack.app.id, 4 * devices, Math.min(2000, devices), stack.identitySecret);
  await measuredWithWal('floor: the same rows by a bare client', floorMeters, 201, () =>
    bareInserts(pool, stack.app.id, devices, devices, stack.identitySecret),
  );
  await pool.end();
  await stack.close();
  await gateways.close();
  await slowFlush?.stop();

  printTable({ tps, perSecond, slowFlush: slowFlush !== null, rows, backendsCpu, wal });
  process.exit(rows.some((r) => r.refused > 0) ? 1 : 0);
}

/** The header and the table: each phase's rate against `pgbench -N`, its latencies, CPU and WAL a post. */
function printTable(table: {
  tps: string;
  perSecond: number;
  slowFlush: boolean;
  rows: Phase[];
  backendsCpu: number[];
  wal: (number | null)[];
}) {
  const { tps, perSecond, slowFlush, rows, backendsCpu, wal } = table;
  const share = rate ? '' : ` (${rateOfPgbench} × pgbench -N)`;
  const paced = perSecond > 0 ? `, ${perSecond} a second${share}; latency from when each was due` : '';
  const pgTps = Number(tps);
  console.log(
    `\nregistrations: ${devices} devices posted to POST /v6/devices with the sdk key by ${clients} clients${paced} in a process of ` +
      `their own (node:http keep-alive), then the same again; one ROLE=all process (npm start's flags, production settings, ` +
      `rate limits raised, log to ${LOG_FILE}); the floor from ${clients} connections of this process; pgbench -N ${tps} tps` +
      `${slowFlush ? `; a PostgreSQL of its own whose WAL flush takes ${flushDelayMs} ms longer` : ''}\n`,
  );
  printRows(
    [
      'posts',
      'per s',
      '× pgbench -N',
      'p50 ms',
      'p99 ms',
      'refused',
      'CPU ms each: service, PostgreSQL, clients',
      'its backends',
      'WAL B each',
    ],
    rows.map((r, i) => [...phaseCells(r, pgTps), backendsCpu[i]!.toFixed(2), wal[i] == null ? '–' : wal[i]!.toFixed(0)]),
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
