import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { Database } from '../schema.js';

/**
 * The tables partitioned by UTC day (migrations 023, 030, 034, 047, 056 and 070), with their partition key. Each day's partition is
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
  audit_log: { column: 'at', type: 'timestamptz' },
  journey_entrants: { column: 'entered_at', type: 'timestamptz' },
  journey_entrant_history: { column: 'entered_at', type: 'timestamptz' },
  webhook_events: { column: 'created_at', type: 'timestamptz' },
  webhook_attempts: { column: 'at', type: 'timestamptz' },
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
    return listDays(db, table);
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
    await createFromDefault(trx, table, DAY_PARTITIONED[table].column, day, bounds(table, day));
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

/**
 * Creates `table`'s partition of `day`, keyed by `column` in [from, to): a table of its own, filled with those rows
 * from the default partition, then attached.
 */
export async function createFromDefault(
  trx: Transaction<Database>,
  table: string,
  column: string,
  day: string,
  [from, to]: [string, string],
): Promise<void> {
  const name = sql.table(partitionName(table, day));
  const parent = sql.table(table);
  const fallback = sql.table(`${table}_default`);
  await sql`create table ${name} (like ${parent} including defaults including constraints)`.execute(trx);
  await sql`lock table ${fallback} in share row exclusive mode`.execute(trx);
  await sql`
    with moved as (delete from ${fallback} where ${sql.ref(column)} >= ${from} and ${sql.ref(column)} < ${to} returning *)
    insert into ${name} select * from moved`.execute(trx);
  await sql`alter table ${parent} attach partition ${name} for values from (${sql.lit(from)}) to (${sql.lit(to)})`.execute(trx);
}

/** The day partitions of `table`, oldest first, with their size; partitions named otherwise are left out. */
export async function listDays(db: Db, table: string): Promise<DayPartition[]> {
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

export function partitionName(table: string, day: string): string {
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

/**
 * Notifications (partitioned by their id, a version 7 UUID) with the tables that refer to them (by notification_id):
 * each UTC day of ids is a partition of each, named as the others' (<table>_pYYYYMMDD), created and dropped together,
 * referenced before referring (migration 037).
 */
export const NOTIFICATION_FAMILY = ['notifications', 'delivery_batches', 'fanout_ranges'] as const;
const REFERRING = ['delivery_batches', 'fanout_ranges'] as const;
/**
 * `column`, a notification's id, within the least and greatest of `ids` (time-ordered, so within a few days'
 * partitions): a plan made for any values prunes the others as it starts, which it cannot do by the list itself
 * (`= any(…)`, PLAN_EACH_RUN).
 */
export function withinIds(column: string, ids: string[]) {
  // in the order PostgreSQL gives uuids, their bytes', which lower-case hex text sorts alike
  const sorted = ids.map((id) => id.toLowerCase()).sort();
  return sql<boolean>`${sql.ref(column)} between ${sorted[0]}::uuid and ${sorted.at(-1)}::uuid`;
}
/**
 * The small tables keyed by notification_id, deleted with a dropped day: an A/B test's holdout (migration 039), and
 * the transactional and collapse keys naming the day's notifications (migrations 041, 042).
 */
const KEYED_BY_NOTIFICATION = [
  'ab_holdout_devices',
  'ab_holdout_conversions',
  'notification_transactional_keys',
  'notification_collapse_keys',
] as const;

/** The rows of a notification still in use: not finished, or written within retention (a collapse or a replacement). */
const liveNotification = (cutoff: Date) => sql`(state in ('scheduled', 'sending') or updated_at >= ${cutoff})`;

/** The lowest version 7 UUID of an instant's millisecond, as SQL: the bound of the ids made from then on. */
export function uuid7Floor(at: number): string {
  const hex = at.toString(16).padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8)}-0000-0000-000000000000`;
}

/** The UTC day a version 7 UUID was made on, as SQL. */
export const dayOfId = sql`to_char(
  to_timestamp(('x' || left(replace(id::text, '-', ''), 12))::bit(48)::bigint / 1000.0) at time zone 'UTC',
  'YYYY-MM-DD'
)`;

/** The day partitions of the notification family: each day's in every table, dropped with the rows kept moved out. */
export class NotificationPartitionsRepository {
  /**
   * Gives the day partitions whose replica identity is not their parent's the parent's: those a worker of a version
   * before migration 045 made after it ran (a publication would refuse their batches' updates), and one identified by
   * another index of its own (a publication would log other columns as its rows' key). Each in a short
   * transaction of its own, as its lock stops that day's writes; one that fails (a lock not had in time, a day
   * dropped meanwhile) is answered, and tried again at the next sweep.
   */
  async repairReplicaIdentities(db: Db): Promise<{ repaired: string[]; failed: { partition: string; error: string }[] }> {
    const { rows } = await sql<{ parent: string; partition: string }>`
      select parent.relname as parent, h.inhrelid::regclass::text as partition
      from pg_inherits h
      join pg_class parent on parent.oid = h.inhparent
      join pg_class part on part.oid = h.inhrelid
      where h.inhparent in (${sql.join(NOTIFICATION_FAMILY.map((t) => sql`${t}::regclass`))})
        and parent.relreplident <> 'd'
        and (
          part.relreplident <> parent.relreplident
          -- by an index, it must be the partition's part of the parent's, not another index of its own
          or (
            parent.relreplident = 'i'
            and not exists (
              select 1
              from pg_index parent_index
              join pg_inherits x on x.inhparent = parent_index.indexrelid
              join pg_index part_index on part_index.indexrelid = x.inhrelid
              where parent_index.indrelid = parent.oid
                and parent_index.indisreplident
                and part_index.indrelid = part.oid
                and part_index.indisreplident
            )
          )
        )`.execute(db);
    const result = { repaired: [] as string[], failed: [] as { partition: string; error: string }[] };
    for (const r of rows)
      try {
        const altered = await db.transaction().execute(async (trx) => {
          // bounded as the maintenance's own waits are: DDL queued behind a long query would hold up the day's writes
          await sql`set local lock_timeout = '2s'`.execute(trx);
          return inheritReplicaIdentity(trx, r.parent, r.partition);
        });
        if (altered) result.repaired.push(r.partition);
      } catch (err) {
        result.failed.push({ partition: r.partition, error: (err as Error).message });
      }
    return result;
  }

  /** The day partitions of notifications (those of the others are the same days), oldest first, with their size. */
  async list(db: Db): Promise<DayPartition[]> {
    return listDays(db, 'notifications');
  }

  /** The days of the default partition's notifications from `from` up to `to` (both included, YYYY-MM-DD). */
  async defaultDays(db: Db, from: string, to: string): Promise<string[]> {
    const { rows } = await sql<{ day: string }>`
      select distinct ${dayOfId} as day from notifications_default
      where id >= ${uuid7Floor(dayStart(from))}::uuid and id < ${uuid7Floor(dayStart(to) + DAY_MS)}::uuid`.execute(db);
    return rows.map((r) => r.day);
  }

  /**
   * Creates the day's partition of each table, filled with the day's rows from the default partitions (ids of before
   * migration 033 are random: some fall in any day), then attached: as PartitionsRepository.create does, the
   * referring rows moved first, and attached after it.
   */
  async create(trx: Transaction<Database>, day: string): Promise<void> {
    const [from, to] = idBounds(day);
    for (const table of NOTIFICATION_FAMILY) {
      await sql`
        create table ${sql.table(partitionName(table, day))}
          (like ${sql.table(table)} including defaults including constraints including generated)`.execute(trx);
      await sql`lock table ${sql.table(`${table}_default`)} in share row exclusive mode`.execute(trx);
      // the storage options (delivery_batches' fillfactor) are each partition's own: the default one's, as the migration set them
      const { rows } = await sql<{ options: string[] | null }>`
        select reloptions as options from pg_class where oid = ${`${table}_default`}::regclass`.execute(trx);
      if (rows[0]?.options?.length)
        await sql`alter table ${sql.table(partitionName(table, day))} set (${sql.raw(rows[0].options.join(', '))})`.execute(trx);
      // and so are the columns' statistics targets (migration 018: none for the documents and device lists)
      const { rows: targets } = await sql<{ name: string; target: number }>`
        select attname as name, attstattarget::int as target from pg_attribute
        where attrelid = ${`${table}_default`}::regclass
          and attnum > 0 and not attisdropped and coalesce(attstattarget::int, -1) >= 0`.execute(trx);
      for (const t of targets)
        await sql`
          alter table ${sql.table(partitionName(table, day))}
          alter column ${sql.ref(t.name)} set statistics ${sql.lit(t.target)}`.execute(trx);
    }
    for (const table of [...REFERRING, 'notifications'] as const) {
      const key = sql.ref(table === 'notifications' ? 'id' : 'notification_id');
      const columns = await insertableColumns(trx, table);
      await sql`
        with moved as (delete from ${sql.table(`${table}_default`)} where ${key} >= ${from}::uuid and ${key} < ${to}::uuid returning *)
        insert into ${sql.table(partitionName(table, day))} (${columns}) select ${columns} from moved`.execute(trx);
    }
    for (const table of NOTIFICATION_FAMILY) {
      await sql`
        alter table ${sql.table(table)}
        attach partition ${sql.table(partitionName(table, day))} for values from (${sql.lit(from)}) to (${sql.lit(to)})`.execute(trx);
      await inheritReplicaIdentity(trx, table, partitionName(table, day));
    }
  }

  /**
   * Drops the day's partitions whole but for the notifications still in use at `cutoff` (a collapse_key or
   * transactional key's notification re-sent since, one not finished), which go with their batches and ranges into
   * the default partitions, the day being covered no more. The referring partitions are detached first (and any
   * foreign key to notifications, which a detached table keeps, dropped: migration 037 made none, a database may
   * add one), or detaching the notifications' would fail on their rows. Answers the bytes the partitions held.
   */
  async drop(trx: Transaction<Database>, day: string, cutoff: Date): Promise<number> {
    await lockKeys(trx);
    const { rows } = await sql<{ bytes: number }>`
      select sum(pg_total_relation_size(c.oid))::float8 as bytes from pg_class c
      where c.relname in (${sql.join(NOTIFICATION_FAMILY.map((t) => partitionName(t, day)))}) and c.relkind = 'r'`.execute(trx);
    for (const table of [...REFERRING, 'notifications'] as const) {
      const name = partitionName(table, day);
      await sql`alter table ${sql.table(table)} detach partition ${sql.table(name)}`.execute(trx);
      if (table === 'notifications') continue;
      const { rows: keys } = await sql<{ name: string }>`
        select conname as name from pg_constraint
        where conrelid = ${name}::regclass and contype = 'f' and conparentid = 0 and confrelid = 'notifications'::regclass`.execute(trx);
      for (const key of keys) await sql`alter table ${sql.table(name)} drop constraint ${sql.ref(key.name)}`.execute(trx);
    }
    const columns = await insertableColumns(trx, 'notifications');
    await sql`
      insert into notifications (${columns})
      select ${columns} from ${sql.table(partitionName('notifications', day))} where ${liveNotification(cutoff)}`.execute(trx);
    for (const table of REFERRING)
      await sql`
        insert into ${sql.table(table)}
        select r.* from ${sql.table(partitionName(table, day))} r
        where exists (select 1 from notifications_default n where n.id = r.notification_id)`.execute(trx);
    for (const table of NOTIFICATION_FAMILY) await sql`drop table ${sql.table(partitionName(table, day))}`.execute(trx);
    // the rows of those tables go with their notification (few: not partitioned)
    const [from, to] = idBounds(day);
    for (const table of KEYED_BY_NOTIFICATION)
      await sql`
        delete from ${sql.table(table)} h
        where h.notification_id >= ${from}::uuid and h.notification_id < ${to}::uuid
          and not exists (select 1 from notifications_default n where n.id = h.notification_id)`.execute(trx);
    return rows[0]!.bytes ?? 0;
  }

  /**
   * Deletes up to `limit` notifications of the default partition not in use at `cutoff`, with their batches, ranges,
   * transactional and collapse keys: ids of before migration 033, and those a drop kept. Its own index on updated_at
   * (migration 037) finds them without reading the others. Answers how many went.
   */
  async purgeDefault(trx: Transaction<Database>, cutoff: Date, limit: number): Promise<number> {
    await lockKeys(trx);
    const { rows } = await sql<{ count: number }>`
      with gone as (
        delete from notifications_default where id in (
          select id from notifications_default
          where updated_at < ${cutoff} and state not in ('scheduled', 'sending')
          order by updated_at
          limit ${limit})
        returning id),
      batches as (delete from delivery_batches_default where notification_id in (select id from gone)),
      ranges as (delete from fanout_ranges_default where notification_id in (select id from gone)),
      held as (delete from ab_holdout_devices where notification_id in (select id from gone)),
      held_conversions as (delete from ab_holdout_conversions where notification_id in (select id from gone)),
      keys as (delete from notification_transactional_keys where notification_id in (select id from gone)),
      collapse_keys as (delete from notification_collapse_keys where notification_id in (select id from gone))
      select count(*)::int as count from gone`.execute(trx);
    return rows[0]!.count;
  }
}

/**
 * Holds off sends with a key until the transaction ends, before it locks notifications: a send locks its key's row,
 * then its notification, so a drop or purge taking them the other way round would deadlock with it.
 */
async function lockKeys(trx: Transaction<Database>): Promise<void> {
  await sql`lock table notification_transactional_keys, notification_collapse_keys in share row exclusive mode`.execute(trx);
}

const DAY_MS = 86_400_000;
const dayStart = (day: string) => Date.parse(`${checkedDay(day)}T00:00:00Z`);
/** A day's ids: [the lowest id of its first millisecond, that of the next day's). */
export const idBounds = (day: string): [string, string] => [uuid7Floor(dayStart(day)), uuid7Floor(dayStart(day) + DAY_MS)];

/**
 * Gives an attached partition its parent's replica identity (delivery_batches' names an index: migration 045), which
 * PostgreSQL does not pass on: by an index, the partition's own part of it, which attaching made; else FULL or
 * NOTHING as the parent has it (the default needs nothing).
 */
async function inheritReplicaIdentity(trx: Transaction<Database>, parent: string, partition: string): Promise<boolean> {
  const { rows } = await sql<{ identity: string; index: string | null; target: string }>`
    select
      pc.relreplident as identity,
      ${partition}::regclass::text as target,
      (select c.relname
       from pg_index p
       join pg_inherits x on x.inhparent = p.indexrelid
       join pg_index i on i.indexrelid = x.inhrelid
       join pg_class c on c.oid = i.indexrelid
       where p.indrelid = pc.oid and p.indisreplident and i.indrelid = ${partition}::regclass) as index
    from pg_class pc
    where pc.oid = ${parent}::regclass`.execute(trx);
  const { identity, index, target } = rows[0]!;
  // an index the partition has no part of cannot be named: left as it is
  if (identity === 'd' || (identity === 'i' && !index)) return false;
  const clause = identity === 'i' && index ? sql`using index ${sql.ref(index)}` : identity === 'f' ? sql`full` : sql`nothing`;
  // the name as PostgreSQL quotes it (and qualifies it when its schema is not on the search path)
  await sql`alter table ${sql.raw(target)} replica identity ${clause}`.execute(trx);
  return true;
}

/** A table's columns but generated ones, which an insert may not name. */
async function insertableColumns(trx: Transaction<Database>, table: string) {
  const { rows } = await sql<{ name: string }>`
    select attname as name from pg_attribute
    where attrelid = ${table}::regclass and attnum > 0 and not attisdropped and attgenerated = ''
    order by attnum`.execute(trx);
  return sql.join(rows.map((r) => sql.ref(r.name)));
}
