import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { Database } from '../schema.js';

/**
 * The tables partitioned by UTC day (migrations 023, 030 and 034), with their partition key. Each day's partition is
 * named <table>_pYYYYMMDD and holds [day, day + 1); <table>_default holds rows no partition covers.
 */
export const DAY_PARTITIONED = {
  device_pushes: { column: 'received_at', type: 'timestamptz' },
  app_active_devices: { column: 'day', type: 'date' },
  app_sessions: { column: 'started_at', type: 'timestamptz' },
  push_opens: { column: 'opened_at', type: 'timestamptz' },
  notification_conversions: { column: 'day', type: 'date' },
  device_messages: { column: 'retention_from', type: 'timestamptz' },
  idempotency_keys: { column: 'created_at', type: 'timestamptz' },
} as const;
export type DayPartitionedTable = keyof typeof DAY_PARTITIONED;

export interface DayPartition {
  name: string;
  /** its UTC day, YYYY-MM-DD */
  day: string;
  bytes: number;
}

/** Held by the one maintenance run at a time, across every worker ("pdpt"). */
const MAINTENANCE_LOCK = 0x70647074;
const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** Creates, lists and drops the day partitions; the policy (which days, how long) is the caller's. */
export class PartitionsRepository {
  /**
   * Claims the maintenance for this transaction, or answers false when another holds it. Transaction-scoped, so it
   * works behind a pooler in transaction mode and ends with the transaction however that ends; lock waits are
   * bounded, so DDL queued behind a long query does not hold up the writes queued behind it.
   */
  async claim(trx: Transaction<Database>): Promise<boolean> {
    await sql`set local lock_timeout = '2s'`.execute(trx);
    const { rows } = await sql<{ claimed: boolean }>`select pg_try_advisory_xact_lock(${MAINTENANCE_LOCK}) as claimed`.execute(trx);
    return rows[0]!.claimed;
  }

  /** The day partitions of `table`, oldest first, with their size; partitions named otherwise are left out. */
  async list(db: Db, table: DayPartitionedTable): Promise<DayPartition[]> {
    const { rows } = await sql<{ name: string; bytes: number }>`
      select c.relname as name, pg_total_relation_size(c.oid) as bytes
      from pg_inherits i
      join pg_class c on c.oid = i.inhrelid
      where i.inhparent = ${table}::regclass and c.relname ~ ${`^${table}_p[0-9]{8}$`}
      order by c.relname`.execute(db);
    return rows.map((r) => {
      const digits = r.name.slice(-8);
      return { ...r, day: `${digits.slice(0, 4)}-${digits.slice(4, 6)}-${digits.slice(6)}` };
    });
  }

  /** The UTC days of the rows in `table`'s default partition (none, unless a write came before its partition). */
  async defaultDays(db: Db, table: DayPartitionedTable): Promise<string[]> {
    const { rows } = await sql<{ day: string }>`
      select distinct to_char(${dayOf(table)}, 'YYYY-MM-DD') as day from ${sql.table(`${table}_default`)}`.execute(db);
    return rows.map((r) => r.day);
  }

  /**
   * Creates the partition of `day`: a table of its own, filled with the day's rows from the default partition,
   * then attached. Attaching locks the parent only against other DDL (CREATE ... PARTITION OF would lock out its
   * readers and writers); the default partition is locked against writes from the move until the commit.
   */
  async create(trx: Transaction<Database>, table: DayPartitionedTable, day: string): Promise<void> {
    const name = sql.table(partitionName(table, day));
    const parent = sql.table(table);
    const fallback = sql.table(`${table}_default`);
    const [from, to] = bounds(table, day);
    await sql`create table ${name} (like ${parent} including defaults including constraints)`.execute(trx);
    await sql`lock table ${fallback} in share row exclusive mode`.execute(trx);
    await sql`
      with moved as (
        delete from ${fallback} where ${sql.ref(DAY_PARTITIONED[table].column)} >= ${from} and ${sql.ref(DAY_PARTITIONED[table].column)} < ${to}
        returning *)
      insert into ${name} select * from moved`.execute(trx);
    await sql`alter table ${parent} attach partition ${name} for values from (${sql.lit(from)}) to (${sql.lit(to)})`.execute(trx);
  }

  /** Drops a partition whole; answers the bytes it held. */
  async drop(trx: Transaction<Database>, table: DayPartitionedTable, partition: DayPartition): Promise<number> {
    const { rows } = await sql<{ bytes: number }>`
      select pg_total_relation_size(${partition.name}::regclass) as bytes`.execute(trx);
    await sql`drop table ${sql.table(partitionName(table, partition.day))}`.execute(trx);
    return rows[0]!.bytes;
  }

  /** Deletes the default partition's rows of days before `day` (YYYY-MM-DD): those past retention. */
  async purgeDefault(trx: Transaction<Database>, table: DayPartitionedTable, day: string): Promise<number> {
    const r = await sql`delete from ${sql.table(`${table}_default`)} where ${dayOf(table)} < ${checkedDay(day)}::date`.execute(trx);
    return Number(r.numAffectedRows ?? 0);
  }
}

function partitionName(table: DayPartitionedTable, day: string): string {
  return `${table}_p${checkedDay(day).replaceAll('-', '')}`;
}

/** A day partition's bounds as literals of its key's type: [day, next day) at UTC midnight. */
function bounds(table: DayPartitionedTable, day: string): [string, string] {
  const next = new Date(Date.parse(`${checkedDay(day)}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);
  return DAY_PARTITIONED[table].type === 'date' ? [day, next] : [`${day} 00:00:00+00`, `${next} 00:00:00+00`];
}

/** The UTC day of a row's partition key, as SQL. */
function dayOf(table: DayPartitionedTable) {
  const column = sql.ref(DAY_PARTITIONED[table].column);
  return DAY_PARTITIONED[table].type === 'date' ? column : sql`(${column} at time zone 'UTC')::date`;
}

// a day goes into DDL as a literal and a name: only the one shape
function checkedDay(day: string): string {
  if (!DAY.test(day)) throw new Error(`not a day: ${day}`);
  return day;
}
