import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { Database } from '../schema.js';
import { createFromDefault, dayOfId, idBounds, listDays, partitionName, type DayPartition } from './partitions.js';

const DAY_MS = 86_400_000;

/**
 * The day partitions of messages (migration 040): by their id, a version 7 UUID made from the instant the message's
 * retention ends, so a day's partition is past retention once the day is over. Only rows from before that migration
 * (ids made at their creation) can still be in use then; they are kept in the default partition.
 */
export class MessagePartitionsRepository {
  /** The day partitions of messages, oldest first, with their size. */
  async list(db: Db): Promise<DayPartition[]> {
    return listDays(db, 'messages');
  }

  /** The days of the default partition's ids from `from` up to `to` (both included, YYYY-MM-DD). */
  async defaultDays(db: Db, from: string, to: string): Promise<string[]> {
    const [low] = idBounds(from);
    const [, high] = idBounds(to);
    const { rows } = await sql<{ day: string }>`
      select distinct ${dayOfId} as day from messages_default
      where id >= ${low}::uuid and id < ${high}::uuid`.execute(db);
    return rows.map((r) => r.day);
  }

  /**
   * Creates the day's partition, filled with the day's rows from the default partition (a message whose day had no
   * partition yet), then attached: as PartitionsRepository.create does for the other tables.
   */
  async create(trx: Transaction<Database>, day: string): Promise<void> {
    await createFromDefault(trx, 'messages', 'id', day, idBounds(day));
  }

  /**
   * Drops the day's partition whole, but for the messages still in use at `now` (only rows from before migration
   * 040 can be), which are copied into the default partition first, the day being covered no more. Answers the
   * bytes it held.
   */
  async drop(trx: Transaction<Database>, day: string, now: Date): Promise<number> {
    const name = partitionName('messages', day);
    const { rows } = await sql<{ bytes: number }>`select pg_total_relation_size(${name}::regclass)::float8 as bytes`.execute(trx);
    await sql`alter table messages detach partition ${sql.table(name)}`.execute(trx);
    await sql`insert into messages select * from ${sql.table(name)} where expires_at > ${now}`.execute(trx);
    await sql`drop table ${sql.table(name)}`.execute(trx);
    return rows[0]!.bytes;
  }

  /**
   * Makes the default partition again with only its rows still in use at `now`, and drops the old one whole, once its
   * oldest row is a day past retention (so at most about once a day): rows from before migration 040, and those of a
   * day that had no partition while the maintenance did not run. Writes to it wait meanwhile; the other partitions'
   * readers and writers wait only for the swap. Answers the bytes dropped, 0 when it was not due.
   */
  async rebuildDefault(trx: Transaction<Database>, now: Date): Promise<number> {
    const { rows } = await sql<{ due: boolean; bytes: number }>`
      select coalesce(min(expires_at) <= ${new Date(now.getTime() - DAY_MS)}, false) as due,
             pg_total_relation_size('messages_default'::regclass)::float8 as bytes
      from messages_default`.execute(trx);
    if (!rows[0]!.due) return 0;
    await sql`create table messages_default_kept (like messages including defaults including constraints)`.execute(trx);
    await sql`lock table messages_default in share row exclusive mode`.execute(trx);
    await sql`insert into messages_default_kept select * from messages_default where expires_at > ${now}`.execute(trx);
    await sql`alter table messages detach partition messages_default`.execute(trx);
    await sql`drop table messages_default`.execute(trx);
    await sql`alter table messages_default_kept rename to messages_default`.execute(trx);
    await sql`create index messages_default_expires_idx on messages_default (expires_at)`.execute(trx);
    await sql`alter table messages attach partition messages_default default`.execute(trx);
    return rows[0]!.bytes;
  }
}
