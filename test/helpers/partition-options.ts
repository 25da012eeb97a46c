import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.js';

/** The storage options of each partition of `parent`: the default one's and each day's, those the maintenance made included. */
export async function partitionOptions(db: Kysely<Database>, parent: string): Promise<(string[] | null)[]> {
  const { rows } = await sql<{ options: string[] | null }>`
    select c.reloptions as options from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = ${parent}::regclass`.execute(db);
  return rows.map((r) => r.options);
}
