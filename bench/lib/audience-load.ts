import type pg from 'pg';
import { deviceGenerator, type SeedDevice } from './audience-data.js';

/**
 * Bulk-loads generated devices with INSERT ... SELECT FROM unnest($1::uuid[], ...): one statement per chunk
 * and table, a fixed number of parameters however many rows (pg-copy-streams is not a dependency). The
 * secondary indexes are dropped for the load and rebuilt after it, then the tables are vacuumed and analysed
 * so counts can use index-only scans.
 */
const TABLES = ['devices', 'device_attributes', 'device_events', 'device_tags'];
const CHUNK = 5000;

export async function loadDevices(
  pool: pg.Pool,
  appId: string,
  count: number,
  seed: number,
  now: Date,
  log: (s: string) => void,
): Promise<void> {
  const client = await pool.connect();
  try {
    const indexes = await client.query<{ name: string; def: string }>(
      `select i.indexname as name, i.indexdef as def from pg_indexes i
       where i.schemaname = current_schema() and i.tablename = any($1)
         and not exists (select 1 from pg_constraint c where c.conname = i.indexname)`,
      [TABLES],
    );
    for (const ix of indexes.rows) await client.query(`drop index ${ix.name}`);
    // Skips the per-row foreign key checks where allowed (superuser); the generator's ids are consistent.
    await client.query('set session_replication_role = replica').catch(() => log('  (no superuser: foreign keys checked per row)'));
    const next = deviceGenerator(seed, now);
    const started = Date.now();
    for (let from = 0; from < count; from += CHUNK) {
      const chunk = Array.from({ length: Math.min(CHUNK, count - from) }, (_, k) => next(from + k));
      await insertChunk(client, appId, chunk);
      if ((from / CHUNK) % 20 === 19) log(`  ${from + chunk.length} devices (${((Date.now() - started) / 1000).toFixed(0)} s)`);
    }
    await client.query('set session_replication_role = origin').catch(() => undefined);
    // With triggers off (replica role) the tag rows are written here, as the trigger would.
    await client.query(
      `insert into device_tags (device_id, app_id, tag) select distinct id, app_id, unnest(tags) from devices where app_id = $1 on conflict do nothing`,
      [appId],
    );
    log(`  rows loaded in ${((Date.now() - started) / 1000).toFixed(0)} s; rebuilding ${indexes.rows.length} indexes`);
    const t = Date.now();
    for (const ix of indexes.rows) await client.query(ix.def);
    log(`  indexes rebuilt in ${((Date.now() - t) / 1000).toFixed(0)} s; vacuum analyze`);
    for (const table of TABLES) await client.query(`vacuum (analyze) ${table}`);
  } finally {
    client.release();
  }
}

async function insertChunk(client: pg.PoolClient, appId: string, devices: SeedDevice[]): Promise<void> {
  const col = <T>(f: (d: SeedDevice) => T) => devices.map(f);
  const iso = (d: Date | null) => (d ? d.toISOString() : null);
  await client.query(
    `insert into devices (id, app_id, platform, token, development, locale, time_zone, os_name, os_version, app_version, sdk_version,
       marketing_name, badge, user_id, user_email, tags, country, notifications_allowed, sdk_latitude, sdk_longitude, ip_address,
       ip_latitude, ip_longitude, created_at, registered_at)
     select id, $1, platform, token, development, locale, time_zone, os_name, os_version, app_version, sdk_version,
       marketing_name, badge, user_id, user_email, tags::text[], country, notifications_allowed, sdk_lat, sdk_lng, ip::inet,
       ip_lat, ip_lng, created_at, registered_at
     from unnest($2::uuid[], $3::text[], $4::text[], $5::bool[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[],
       $12::text[], $13::int[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::float8[], $20::float8[], $21::text[],
       $22::float8[], $23::float8[], $24::timestamptz[], $25::timestamptz[])
       as t(id, platform, token, development, locale, time_zone, os_name, os_version, app_version, sdk_version, marketing_name, badge,
         user_id, user_email, tags, country, notifications_allowed, sdk_lat, sdk_lng, ip, ip_lat, ip_lng, created_at, registered_at)`,
    [
      appId,
      col((d) => d.id),
      col((d) => d.platform),
      col((d) => d.token),
      col((d) => d.development),
      col((d) => d.locale),
      col((d) => d.time_zone),
      col((d) => d.os_name),
      col((d) => d.os_version),
      col((d) => d.app_version),
      col((d) => d.sdk_version),
      col((d) => d.marketing_name),
      col((d) => d.badge),
      col((d) => d.user_id),
      col((d) => d.user_email),
      col((d) => `{${d.tags.join(',')}}`), // tags are [a-z0-9_]: a bare array literal
      col((d) => d.country),
      col((d) => d.notifications_allowed),
      col((d) => d.sdk?.[0] ?? null),
      col((d) => d.sdk?.[1] ?? null),
      col((d) => d.ip_address),
      col((d) => d.ip?.[0] ?? null),
      col((d) => d.ip?.[1] ?? null),
      col((d) => iso(d.created_at)),
      col((d) => iso(d.registered_at)),
    ],
  );
  const attrs = devices.flatMap((d) => d.attributes.map((a) => ({ id: d.id, ...a })));
  await client.query(
    `insert into device_attributes (device_id, app_id, name, type, position, is_array, str_value, num_value, date_value, bool_value)
     select device_id, $1, name, type, position, is_array, str, num, date, bool
     from unnest($2::uuid[], $3::text[], $4::text[], $5::int2[], $6::bool[], $7::text[], $8::float8[], $9::timestamptz[], $10::bool[])
       as t(device_id, name, type, position, is_array, str, num, date, bool)`,
    [
      appId,
      attrs.map((a) => a.id),
      attrs.map((a) => a.name),
      attrs.map((a) => a.type),
      attrs.map((a) => a.position),
      attrs.map((a) => a.is_array),
      attrs.map((a) => a.str),
      attrs.map((a) => a.num),
      attrs.map((a) => iso(a.date)),
      attrs.map((a) => a.bool),
    ],
  );
  const events = devices.flatMap((d) => d.events.map((e) => ({ id: d.id, ...e })));
  await client.query(
    `insert into device_events (device_id, app_id, source, name, count, first_happened_at, last_happened_at)
     select device_id, $1, source, name, count, first_at, last_at
     from unnest($2::uuid[], $3::text[], $4::text[], $5::bigint[], $6::timestamptz[], $7::timestamptz[]) as t(device_id, source, name, count, first_at, last_at)`,
    [
      appId,
      events.map((e) => e.id),
      events.map((e) => e.source),
      events.map((e) => e.name),
      events.map((e) => e.count),
      events.map((e) => iso(e.first)),
      events.map((e) => iso(e.last)),
    ],
  );
}
