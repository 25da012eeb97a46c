/**
 * The daily statistics at scale: N devices installed over the last year, M app sessions and M/10 push opens over
 * the last 30 days, seeded in SQL through the same tables (and so the same rollup triggers) the API fills. Then
 * each statistics endpoint is timed over HTTP for that month against the real service (p50/p99 of R requests
 * after warm-ups), beside the reference a scan per request would cost: the raw SQL count(*) of the month's
 * sessions, measured in the same run. Last, every figure served is cross-checked against counts over the base
 * tables (sessions, opens, devices). The data is kept between runs and reseeded when the size or the day changes.
 *
 *   npm run bench -- stats [--devices 1000000] [--sessions 10000000] [--requests 50] [--reseed]
 *   DATABASE_URL=postgres://... to use a server; else the embedded PostgreSQL under .bench-data.
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { openDatabase, type Db } from '../src/db/database.js';
import { migrate } from '../src/db/migrate.js';
import { AppService } from '../src/services/apps.js';
import { createRepositories } from '../src/services/deps.js';
import { testKeyring } from '../test/engines/secrets-key.js';
import { benchDatabaseKept } from './lib/audience-db.js';
import { arg, freePort, percentile, printRows, startService, waitReady } from './lib/setup.js';

const DEVICES = Number(arg('devices', '1000000'));
const SESSIONS = Number(arg('sessions', '10000000'));
const OPENS = Math.floor(SESSIONS / 10);
const REQUESTS = Number(arg('requests', '50'));
const WARMUP = 5;
const REFERENCE_RUNS = 5;
const DAYS = 30;
const NOTIFICATIONS = DAYS; // one a day, each opened by some of the devices
const GENERATOR_VERSION = 1;
const DAY_MS = 86_400_000;

const today = new Date().toISOString().slice(0, 10);
const firstDay = new Date(Date.parse(today) - (DAYS - 1) * DAY_MS).toISOString().slice(0, 10);
// everything is dated before the moment of seeding, so a month's window ending today holds all sessions and opens
const seededAt = new Date();

async function main() {
  const database = await benchDatabaseKept('bench_stats');
  const handle = openDatabase(database.url, 4);
  const db = handle.db;
  await migrate(handle.pool);
  const appId = await ensureSeeded(db);
  const { key } = await new AppService({ db: db, secrets: testKeyring(), repos: createRepositories() }).createKey(appId, 'read');
  const version = (await sql<{ v: string }>`select current_setting('server_version') as v`.execute(db)).rows[0]!.v;
  console.log(
    `PostgreSQL ${version}; ${DEVICES.toLocaleString('en')} devices, ${SESSIONS.toLocaleString('en')} sessions, ` +
      `${OPENS.toLocaleString('en')} opens; window ${firstDay}..${today}; ${REQUESTS} requests per endpoint (after ${WARMUP} warm-ups)\n`,
  );

  const reference = await timeReference(db, appId);
  const port = await freePort();
  const service = startService({
    DATABASE_URL: database.url,
    PORT: String(port),
    HOST: '127.0.0.1',
    ROLE: 'api',
    RATE_LIMIT_PER_SECOND: '0',
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitReady(`${base}/ready`);
    const auth = `Basic ${Buffer.from(`:${key}`).toString('base64')}`;
    const get = async (path: string) => {
      const res = await fetch(`${base}${path}`, { headers: { authorization: auth } });
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
      return res.json();
    };
    const window = `from=${firstDay}&to=${today}`;
    const paths = ['installs', 'opens', 'sessions', 'active_users', 'total_installs'].map((m) => `/v6/stats/${m}?${window}`);
    const rows: string[][] = [];
    const answers = new Map<string, unknown>();
    for (const path of paths) {
      const times: number[] = [];
      for (let i = 0; i < WARMUP + REQUESTS; i++) {
        const t = performance.now();
        answers.set(path, await get(path));
        if (i >= WARMUP) times.push(performance.now() - t);
      }
      times.sort((a, b) => a - b);
      rows.push([`GET ${path.split('?')[0]}`, percentile(times, 50).toFixed(1), percentile(times, 99).toFixed(1)]);
    }
    rows.push([
      `reference: SQL count(*) of the month's sessions`,
      percentile(reference, 50).toFixed(1),
      percentile(reference, 99).toFixed(1),
    ]);
    printRows(['request (a month)', 'p50 ms', 'p99 ms'], rows);

    console.log('\ncross-checks against counts over the base tables:');
    const failures = await crossCheck(db, appId, (m) => answers.get(`/v6/stats/${m}?${window}`));
    if (failures) process.exitCode = 1;
  } finally {
    service.kill('SIGTERM');
    await handle.close();
    await database.close();
  }
}

/** The raw count a service without a rollup would run per request: every session of the month, from the table. */
async function timeReference(db: Db, appId: string): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < REFERENCE_RUNS; i++) {
    const t = performance.now();
    await sql`select count(*) from app_sessions where app_id = ${appId}::uuid
              and started_at >= ${firstDay}::timestamp at time zone 'UTC' and started_at < (${today}::date + 1)::timestamp at time zone 'UTC'`.execute(
      db,
    );
    times.push(performance.now() - t);
  }
  return times.sort((a, b) => a - b);
}

async function ensureSeeded(db: Db): Promise<string> {
  await sql`create table if not exists bench_seed (devices int, sessions int, day text, generator int, app_id uuid)`.execute(db);
  const seeded = (
    await sql<{ devices: number; sessions: number; day: string; generator: number; app_id: string }>`select * from bench_seed`.execute(db)
  ).rows[0];
  if (
    seeded &&
    !process.argv.includes('--reseed') &&
    seeded.devices === DEVICES &&
    seeded.sessions === SESSIONS &&
    seeded.day === today &&
    seeded.generator === GENERATOR_VERSION
  )
    return seeded.app_id;
  await sql`truncate bench_seed`.execute(db);
  await sql`delete from apps`.execute(db);
  await sql`drop table if exists bench_devices, bench_notifications`.execute(db);
  const { app } = await new AppService({ db: db, secrets: testKeyring(), repos: createRepositories() }).createApp(
    'com.example.stats-bench',
  );
  await seed(db, app.id);
  await sql`insert into bench_seed values (${DEVICES}, ${SESSIONS}, ${today}, ${GENERATOR_VERSION}, ${app.id})`.execute(db);
  return app.id;
}

/**
 * Inserts in chunks (each statement's trigger adds its rows to the rollup in one upsert per day and shard), then
 * sets last_opened_at as the reports would have. Deterministic dates: device i installed i*7919 s (mod a year)
 * before seeding, session g started g*104729 s (mod 30 days) before it.
 */
async function seed(db: Db, appId: string) {
  const step = async (what: string, total: number, chunk: number, insert: (lo: number, hi: number) => Promise<unknown>) => {
    const t = performance.now();
    for (let lo = 0; lo < total; lo += chunk) await insert(lo, Math.min(total, lo + chunk) - 1);
    console.log(`seeded ${total.toLocaleString('en')} ${what} in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  };
  await step('devices', DEVICES, 100_000, (lo, hi) =>
    sql`insert into devices (app_id, platform, token, created_at)
        select ${appId}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, 'bench-' || i,
               ${seededAt}::timestamptz - ((i::bigint * 7919) % (365 * 86400)) * interval '1 second'
        from generate_series(${lo}::int, ${hi}::int) as i`.execute(db),
  );
  await sql`create table bench_devices as select (row_number() over (order by id) - 1)::int as n, id from devices where app_id = ${appId}::uuid`.execute(
    db,
  );
  await sql`alter table bench_devices add primary key (n)`.execute(db);
  await step('sessions', SESSIONS, 1_000_000, (lo, hi) =>
    sql`insert into app_sessions (device_id, id, app_id, started_at, duration_seconds)
        select d.id, gen_random_uuid(), ${appId}::uuid,
               ${seededAt}::timestamptz - ((g::bigint * 104729) % (${DAYS} * 86400)) * interval '1 second', 60 + g % 600
        from generate_series(${lo}::int, ${hi}::int) as g join bench_devices d on d.n = g % ${DEVICES}::int`.execute(db),
  );
  await sql`insert into notifications (app_id, request, payload, state, created_at, published_at)
            select ${appId}::uuid, '{}', '{"alert":"bench"}', 'sent', t, t
            from generate_series(1, ${NOTIFICATIONS}::int) as k
            cross join lateral (values (${seededAt}::timestamptz - k * interval '1 day' + interval '1 hour')) as v(t)`.execute(db);
  await sql`create table bench_notifications as
            select (row_number() over (order by created_at) - 1)::int as n, id, created_at from notifications where app_id = ${appId}::uuid`.execute(
    db,
  );
  // device g % N opens notification g % 30 (direct two times in three), within the hour after it went out
  await step('push opens', OPENS, 1_000_000, (lo, hi) =>
    sql`insert into push_opens (notification_id, kind, device_id, app_id, opened_at)
        select n.id, case when g % 3 = 0 then 'indirect' else 'direct' end, d.id, ${appId}::uuid, n.created_at + (g % 3600) * interval '1 second'
        from generate_series(${lo}::int, ${hi}::int) as g
        join bench_devices d on d.n = g % ${DEVICES}::int
        join bench_notifications n on n.n = g % ${NOTIFICATIONS}::int
        on conflict do nothing`.execute(db),
  );
  const t = performance.now();
  await sql`update devices d set last_opened_at = l.at
            from (select device_id, max(at) as at from (select device_id, started_at as at from app_sessions
                  union all select device_id, opened_at from push_opens) as r group by device_id) as l
            where d.id = l.device_id`.execute(db);
  console.log(`set last_opened_at in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  await sql`vacuum analyze`.execute(db);
}

/** Each day of each series served, against the same figure counted from the base tables. */
async function crossCheck(db: Db, appId: string, served: (metric: string) => unknown): Promise<number> {
  const perDay = async (query: ReturnType<typeof sql<{ date: string; count: number }>>) =>
    new Map((await query.execute(db)).rows.map((r) => [r.date, Number(r.count)]));
  const day = (column: string) => sql`to_char((${sql.ref(column)} at time zone 'UTC')::date, 'YYYY-MM-DD')`;
  const truth: Record<string, Map<string, number>> = {
    installs: await perDay(
      sql`select ${day('created_at')} as date, count(*) as count from devices where app_id = ${appId}::uuid group by 1`,
    ),
    sessions: await perDay(
      sql`select ${day('started_at')} as date, count(*) as count from app_sessions where app_id = ${appId}::uuid group by 1`,
    ),
    opens: await perDay(
      sql`select ${day('opened_at')} as date, count(*) as count from push_opens where app_id = ${appId}::uuid group by 1`,
    ),
    active_users: await perDay(sql`select date, count(distinct device_id) as count from (
        select ${day('started_at')} as date, device_id from app_sessions where app_id = ${appId}::uuid
        union all select ${day('opened_at')}, device_id from push_opens where app_id = ${appId}::uuid) as r group by 1`),
  };
  let failures = 0;
  for (const [metric, counts] of Object.entries(truth)) {
    const rows = served(metric) as { date: string; count: number }[];
    const wrong = rows.filter((r) => r.count !== (counts.get(r.date) ?? 0));
    const total = rows.reduce((n, r) => n + r.count, 0);
    console.log(
      `  ${metric}: ${rows.length} days, ${total.toLocaleString('en')} in all, ${wrong.length ? `${wrong.length} days WRONG` : 'every day exact'}`,
    );
    failures += wrong.length;
  }
  const installs = [...truth.installs!].filter(([date]) => date <= today).reduce((n, [, c]) => n + c, 0);
  const window = [...truth.installs!].filter(([date]) => date >= firstDay && date <= today).reduce((n, [, c]) => n + c, 0);
  const servedTotal = (served('total_installs') as { total_installs: number }).total_installs;
  console.log(
    `  total_installs: ${servedTotal.toLocaleString('en')} in the window (of ${installs.toLocaleString('en')} ever), ${servedTotal === window ? 'exact' : 'WRONG'}`,
  );
  return failures + (servedTotal === window ? 0 : 1);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
