/**
 * device_count at scale: seeds N realistic devices (deterministic; kept between runs, reseeded when the size
 * or generator changes), then times DevicesRepository.countAudience for each filter kind and cross-checks
 * some counts against brute force (sequential scans, or JS over every row for geo).
 *
 *   npx tsx bench/audience-count.ts [--devices 1000000] [--runs 25] [--explain] [--reseed]
 *   DATABASE_URL=postgres://... to use a server; else the embedded PostgreSQL under .bench-data.
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { openDatabase } from '../src/db/database.js';
import { migrate } from '../src/db/migrate.js';
import { DevicesRepository } from '../src/db/repositories/devices.js';
import { compileFilters } from '../src/db/filter-sql.js';
import type { Filter } from '../src/domain/filters.js';
import { AppService } from '../src/services/apps.js';
import { createRepositories } from '../src/services/deps.js';
import { testKeyring } from '../test/engines/secrets-key.js';
import { haversine, inPolygon, micro } from '../test/db/filter-reference.js';
import { benchDatabaseKept } from './lib/audience-db.js';
import { loadDevices } from './lib/audience-load.js';
import { arg, percentile, printRows } from './lib/setup.js';

const DEVICES = Number(arg('devices', '1000000'));
const RUNS = Number(arg('runs', '25'));
const SEED = 20_250_601;
const GENERATOR_VERSION = 6;
const NOW = new Date('2025-06-01T00:00:00.000Z');

const PARIS = { latitude: 48.8566, longitude: 2.3522 };
const BENELUX: { latitude: number; longitude: number }[] = [
  { latitude: 53.6, longitude: 3.2 },
  { latitude: 53.4, longitude: 7.2 },
  { latitude: 50.3, longitude: 6.4 },
  { latitude: 49.5, longitude: 5.8 },
  { latitude: 50.7, longitude: 2.5 },
];

const CASES: { kind: string; filters: Filter[] }[] = [
  { kind: 'locale', filters: [{ name: 'locale', criteria: ['fr_FR'] }] },
  { kind: 'os_name', filters: [{ name: 'os_name', criteria: ['Android'] }] },
  { kind: 'tags', filters: [{ name: 'tags', criteria: ['sports'] }] },
  { kind: 'custom string', filters: [{ name: 'custom.string.plan', criteria: ['premium'] }] },
  { kind: 'custom integer range', filters: [{ name: 'custom.integer.age', criteria: [{ gte: 25, lt: 35 }] }] },
  { kind: 'event in the last 7 days', filters: [{ name: 'events.app_open', criteria: [{ gte: 'now-7d' }] }] },
  { kind: 'distance (50 km of Paris)', filters: [{ name: 'location', criteria: [{ point: PARIS, distance: 50, unit: 'km' }] }] },
  { kind: 'polygon (Benelux)', filters: [{ name: 'location', criteria: [{ polygon: BENELUX }] }] },
  {
    kind: '3 filters (locale + plan + purchase)',
    filters: [
      { name: 'locale', criteria: ['fr_FR'] },
      { name: 'custom.string.plan', criteria: ['premium', 'pro'] },
      { name: 'events.Public Api.purchase', criteria: [true] },
    ],
  },
  { kind: 'negation (not iOS)', filters: [{ name: 'os_name', criteria: ['iOS'], not_filter: true }] },
  { kind: 'negation (not plan free)', filters: [{ name: 'custom.string.plan', criteria: ['free'], not_filter: true }] },
];

async function main() {
  const database = await benchDatabaseKept('bench_audience');
  const handle = openDatabase(database.url, 4);
  const db = handle.db;
  await migrate(handle.pool);
  const appId = await ensureSeeded(handle.pool, db);
  const repo = new DevicesRepository();
  const version = (await sql<{ v: string }>`select current_setting('server_version') as v`.execute(db)).rows[0]!.v;
  console.log(`PostgreSQL ${version}; ${DEVICES.toLocaleString('en')} devices; ${RUNS} runs per filter (after 2 warm-ups)\n`);

  const rows: string[][] = [];
  for (const c of CASES) {
    if (process.argv.includes('--explain')) await explain(db, appId, c.filters);
    let count = 0;
    const times: number[] = [];
    for (let i = 0; i < RUNS + 2; i++) {
      const t = performance.now();
      count = await repo.countAudience(db, appId, c.filters, { now: NOW });
      if (i >= 2) times.push(performance.now() - t);
    }
    times.sort((a, b) => a - b);
    rows.push([c.kind, count.toLocaleString('en'), percentile(times, 50).toFixed(1), percentile(times, 95).toFixed(1)]);
  }
  printRows(['filter', 'devices matched', 'p50 ms', 'p95 ms'], rows);

  console.log('\ncross-checks against brute force:');
  await crossCheck(db, repo, appId);
  await handle.close();
  await database.close();
}

async function ensureSeeded(pool: import('pg').Pool, db: import('../src/db/database.js').Db): Promise<string> {
  await pool.query('create table if not exists bench_seed (devices int, seed int, generator int, app_id uuid)');
  const seeded = (await pool.query('select * from bench_seed')).rows[0];
  if (
    seeded &&
    !process.argv.includes('--reseed') &&
    seeded.devices === DEVICES &&
    seeded.seed === SEED &&
    seeded.generator === GENERATOR_VERSION
  ) {
    return seeded.app_id as string;
  }
  await pool.query('truncate bench_seed');
  await pool.query('delete from apps');
  const { app } = await new AppService({ db: db, secrets: testKeyring(), repos: createRepositories() }).createApp(
    'com.example.audience-bench',
  );
  console.log(`seeding ${DEVICES.toLocaleString('en')} devices (seed ${SEED})`);
  await loadDevices(pool, app.id, DEVICES, SEED, NOW, (s) => console.log(s));
  await pool.query('insert into bench_seed values ($1, $2, $3, $4)', [DEVICES, SEED, GENERATOR_VERSION, app.id]);
  return app.id;
}

async function explain(db: import('../src/db/database.js').Db, appId: string, filters: Filter[]) {
  const q = db
    .selectFrom('devices as d')
    .select(sql<number>`count(*)`.as('n'))
    .where('d.app_id', '=', appId)
    .where('d.erased_at', 'is', null)
    .where(compileFilters(filters, { now: NOW }))
    .compile();
  const plan = await db.executeQuery<{ 'QUERY PLAN': string }>({ ...q, sql: `explain (analyze, buffers) ${q.sql}` });
  console.log(`\n${JSON.stringify(filters)}\n${plan.rows.map((r) => r['QUERY PLAN']).join('\n')}`);
}

/** Brute force: sequential scans only, or every located device evaluated in JS for geo. */
async function crossCheck(db: import('../src/db/database.js').Db, repo: DevicesRepository, appId: string) {
  const seqScan = async <T>(f: (trx: import('../src/db/database.js').Db) => Promise<T>) =>
    db.transaction().execute(async (trx) => {
      await sql`set local enable_indexscan = off; set local enable_bitmapscan = off; set local enable_indexonlyscan = off`.execute(trx);
      return f(trx);
    });
  const n = async (trx: import('../src/db/database.js').Db, query: ReturnType<typeof sql<{ n: number }>>) =>
    Number((await query.execute(trx)).rows[0]!.n);
  const checks: [string, Filter[], () => Promise<number>][] = [
    [
      'locale',
      CASES[0]!.filters,
      () => seqScan((t) => n(t, sql`select count(*) as n from devices where app_id = ${appId} and erased_at is null and locale = 'fr_FR'`)),
    ],
    [
      'custom string',
      CASES[3]!.filters,
      () =>
        seqScan((t) =>
          n(
            t,
            sql`select count(distinct d.id) as n from devices d join device_attributes a on a.device_id = d.id where d.app_id = ${appId} and d.erased_at is null and a.name = 'plan' and a.type = 'string' and a.str_value = 'premium'`,
          ),
        ),
    ],
    [
      'event in the last 7 days',
      CASES[5]!.filters,
      () =>
        seqScan((t) =>
          n(
            t,
            sql`select count(*) as n from devices d join device_events e on e.device_id = d.id where d.app_id = ${appId} and d.erased_at is null and e.source = '' and e.name = 'app_open' and e.last_happened_at >= ${new Date(NOW.getTime() - 7 * 86_400_000).toISOString()}::timestamptz`,
          ),
        ),
    ],
    [
      'negation (not plan free)',
      CASES[10]!.filters,
      () =>
        seqScan((t) =>
          n(
            t,
            sql`select count(*) as n from devices d where d.app_id = ${appId} and d.erased_at is null and not exists (select 1 from device_attributes a where a.device_id = d.id and a.name = 'plan' and a.type = 'string' and a.str_value = 'free')`,
          ),
        ),
    ],
  ];
  const located = (
    await sql<{
      lat: number;
      lng: number;
    }>`select coalesce(sdk_latitude, ip_latitude) as lat, coalesce(sdk_longitude, ip_longitude) as lng from devices where app_id = ${appId} and erased_at is null and coalesce(sdk_latitude, ip_latitude) is not null`.execute(
      db,
    )
  ).rows;
  checks.push([
    'distance (JS haversine over every row)',
    CASES[6]!.filters,
    async () => located.filter((p) => haversine(PARIS.latitude, PARIS.longitude, p.lat, p.lng) <= 50_000).length,
  ]);
  const ring = BENELUX.map((p) => [micro(p.longitude), micro(p.latitude)] as [bigint, bigint]);
  checks.push([
    'polygon (JS point-in-polygon over every row)',
    CASES[7]!.filters,
    async () => located.filter((p) => inPolygon(micro(p.lng), micro(p.lat), ring)).length,
  ]);
  for (const [label, filters, brute] of checks) {
    const [ours, expected] = [await repo.countAudience(db, appId, filters, { now: NOW }), await brute()];
    console.log(`  ${ours === expected ? 'ok  ' : 'DIFF'} ${label}: ${ours.toLocaleString('en')} = ${expected.toLocaleString('en')}`);
    if (ours !== expected) process.exitCode = 1;
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
