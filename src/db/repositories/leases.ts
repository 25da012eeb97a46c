import { sql } from 'kysely';
import type { Db } from '../database.js';

/**
 * Leases on work one process does for the deployment, timed by the database's clock so that every process sees
 * the same expiry. Each call is one statement: it needs no session of its own, so it works behind a pooler in
 * transaction mode.
 */
export class LeasesRepository {
  /** Takes the lease for `holder`, or renews it, until `ms` from now; false while another holds it. */
  async take(db: Db, name: string, holder: string, ms: number): Promise<boolean> {
    const until = sql<Date>`now() + make_interval(secs => ${ms / 1000})`;
    const taken = await db
      .insertInto('leases')
      .values({ name, holder, expires_at: until })
      .onConflict((oc) =>
        oc
          .column('name')
          .doUpdateSet({ holder, expires_at: until })
          .where(({ eb, or }) => or([eb('leases.holder', '=', holder), eb('leases.expires_at', '<', sql<Date>`now()`)])),
      )
      .returning('holder')
      .executeTakeFirst();
    return taken !== undefined;
  }

  /** Gives the lease up (a process that stops), so another takes it at its next try. */
  async release(db: Db, name: string, holder: string): Promise<void> {
    await db.deleteFrom('leases').where('name', '=', name).where('holder', '=', holder).execute();
  }
}
