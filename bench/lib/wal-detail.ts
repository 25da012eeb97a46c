/**
 * A window's PostgreSQL WAL by relation and record kind (pg_walinspect, PostgreSQL 15 or later): which writes a
 * notification costs; read it on a server nothing else writes to.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.js';

/**
 * The WAL of the counted window by relation and record kind, a notification's share of each (pg_walinspect, made in
 * the run's own database): which writes a notification costs, and which of them are full-page images. `K`: the
 * notifications of the window.
 */
export async function printWalDetail(db: Kysely<Database>, from: string, to: string, K: number): Promise<void> {
  await sql`create extension if not exists pg_walinspect`.execute(db);
  const { rows } = await sql<{ rel: string; kind: string; n: number; bytes: number; fpi: number }>`
    with r as (
      select resource_manager || '/' || record_type as kind, record_length, fpi_length,
        (regexp_match(block_ref, 'rel [0-9]+/([0-9]+)/([0-9]+)')) as m
      from pg_get_wal_records_info(${from}::pg_lsn, ${to}::pg_lsn))
    select coalesce(case when m[1]::oid = (select oid from pg_database where datname = current_database())
                      then pg_filenode_relation(0, m[2]::oid)::text end, m[2], '-') as rel,
      kind, count(*)::int as n, sum(record_length)::int as bytes, sum(fpi_length)::int as fpi
    from r group by 1, 2 order by 4 desc`.execute(db);
  const total = rows.reduce((s, r) => s + r.bytes, 0);
  console.log(`WAL of the counted window by relation and record (per notification; records ${(total / K).toFixed(0)} bytes in all):`);
  for (const r of rows)
    console.log(
      `  ${r.rel.padEnd(52)} ${r.kind.padEnd(28)} ${(r.n / K).toFixed(3).padStart(7)} records ${(r.bytes / K).toFixed(1).padStart(8)} bytes (fpi ${(r.fpi / K).toFixed(1)})`,
    );
  // how full the rows written leave the pages (each partition's fillfactor)
  const { rows: sizes } = await sql<{ rel: string; pages: number }>`
    select c.relname as rel, (pg_relation_size(c.oid) / 8192)::int as pages
    from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent in ('notifications'::regclass, 'delivery_batches'::regclass) and pg_relation_size(c.oid) > 0`.execute(db);
  console.log(`Heap pages of the notifications and their batches: ${sizes.map((s) => `${s.rel} ${s.pages}`).join(', ')}`);
}
