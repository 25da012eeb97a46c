import { sql } from 'kysely';
import type { Db } from '../database.js';

/** Devices whose token was invalidated by a gateway answer, in (invalidated_at, id) keyset order. */
export class UninstalledRepository {
  async page(db: Db, appId: string, q: { after: { at: Date; id: string } | null; from?: Date; to?: Date; limit: number }) {
    let query = db
      .selectFrom('devices')
      .select(['id', 'platform', 'token', 'token_invalidated_at', 'token_invalid_reason'])
      .where('app_id', '=', appId)
      .where('token_invalidated_at', 'is not', null)
      // kept 60 days, as the public service does
      .where('token_invalidated_at', '>', sql<Date>`now() - interval '60 days'`)
      .orderBy('token_invalidated_at')
      .orderBy('id')
      .limit(q.limit);
    if (q.from) query = query.where('token_invalidated_at', '>=', q.from);
    if (q.to) query = query.where('token_invalidated_at', '<', q.to);
    if (q.after)
      query = query.where(sql<boolean>`(token_invalidated_at, id) > (${q.after.at.toISOString()}::timestamptz, ${q.after.id}::uuid)`);
    const rows = await query.execute();
    return rows.map((r) => ({ ...r, token_invalidated_at: r.token_invalidated_at! }));
  }
}
