import { sql } from 'kysely';
import type { Db } from '../database.js';
import type { Device } from '../schema.js';

/** The window of the uninstalled listing: when the token was rejected, from (inclusive) to (exclusive). */
export interface UninstalledWindow {
  from?: Date;
  to?: Date;
}

/**
 * Devices whose token was invalidated by a gateway answer, in (invalidated_at, id) keyset order. A page's rows carry
 * their position with the column's full (microsecond) precision: a JavaScript Date would cut it to milliseconds and
 * the next page would start before the row it ended with.
 */
export class UninstalledRepository {
  async page(
    db: Db,
    appId: string,
    q: UninstalledWindow & { after: { at: string; id: string } | null; limit: number },
  ): Promise<(Device & { position_at: string })[]> {
    return listing(db, appId, q)
      .selectAll()
      .select(sql<string>`to_char(token_invalidated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`.as('position_at'))
      .$if(!!q.after, (qb) => qb.where(sql<boolean>`(token_invalidated_at, id) > (${q.after!.at}::timestamptz, ${q.after!.id}::uuid)`))
      .orderBy('token_invalidated_at')
      .orderBy('id')
      .limit(q.limit)
      .execute();
  }

  /** How many devices the whole listing holds (its pages' `total`). */
  async count(db: Db, appId: string, q: UninstalledWindow): Promise<number> {
    const row = await listing(db, appId, q)
      .select(sql<number>`count(*)::int`.as('n'))
      .executeTakeFirstOrThrow();
    return row.n;
  }
}

function listing(db: Db, appId: string, q: UninstalledWindow) {
  return (
    db
      .selectFrom('devices')
      .where('app_id', '=', appId)
      .where('token_invalidated_at', 'is not', null)
      // kept 60 days, as the public service does
      .where('token_invalidated_at', '>', sql<Date>`now() - interval '60 days'`)
      .$if(!!q.from, (qb) => qb.where('token_invalidated_at', '>=', q.from!))
      .$if(!!q.to, (qb) => qb.where('token_invalidated_at', '<', q.to!))
  );
}
