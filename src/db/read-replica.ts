import { Kysely, PostgresDialect, sql } from 'kysely';
import type pg from 'pg';
import type { Logger } from '../platform/logger.js';
import type { DatabaseHandle, Db } from './database.js';
import type { Database } from './schema.js';

/** How often the replica's replay lag is read: reads pick the replica or the primary from the last reading. */
export const LAG_CHECK_MS = 1000;

/**
 * A streaming replica for the reads that need not see the caller's own writes. `db` is one Kysely instance whose
 * every connection comes from the replica while its replay lag, read every LAG_CHECK_MS, is within `maxLagSeconds`,
 * and from the primary otherwise (too far behind, or unreachable), so a service holds one handle for such reads.
 */
export class ReadReplica {
  readonly db: Db;
  /** the last replay lag read, in seconds; null until one was read or while the replica does not answer */
  lagSeconds: number | null = null;
  /** whether reads go to the replica now */
  inUse = false;
  private timer: NodeJS.Timeout | undefined;
  private checking = false;

  private readonly replica: DatabaseHandle;
  private readonly maxLagSeconds: number;
  private readonly log: Logger;

  constructor(opts: { replica: DatabaseHandle; primary: pg.Pool; maxLagSeconds: number; log: Logger }) {
    ({ replica: this.replica, maxLagSeconds: this.maxLagSeconds, log: this.log } = opts);
    const pick = () => (this.inUse ? this.replica.pool : opts.primary);
    // the pools themselves are closed by their handles
    const pool = { connect: () => pick().connect(), end: async () => undefined };
    this.db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  }

  /** Reads the lag once (so the first reads already pick), then every LAG_CHECK_MS. */
  async start(checkMs = LAG_CHECK_MS): Promise<void> {
    await this.check();
    if (!this.inUse) this.logSwitch();
    this.timer = setInterval(() => void this.check(), checkMs);
    this.timer.unref();
  }

  /**
   * Replay lag: none when everything received is replayed (an idle primary sends nothing to replay), else the age of
   * the last transaction replayed. A server that is not in recovery (a primary named as the replica) has none.
   */
  async check(): Promise<void> {
    // a check still waiting when the next is due: the replica does not answer in time, so reads leave it
    if (this.checking) {
      this.lagSeconds = null;
      this.inUse = false;
      return;
    }
    this.checking = true;
    const wasInUse = this.inUse;
    try {
      const { rows } = await sql<{ lag: number | null }>`
        select case
                 when not pg_is_in_recovery() then 0
                 when pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() then 0
                 else extract(epoch from now() - pg_last_xact_replay_timestamp())::float8
               end as lag
      `.execute(this.replica.db);
      this.lagSeconds = Math.max(0, rows[0]?.lag ?? 0);
      this.inUse = this.lagSeconds <= this.maxLagSeconds;
    } catch {
      this.lagSeconds = null;
      this.inUse = false;
    } finally {
      this.checking = false;
      if (wasInUse !== this.inUse) this.logSwitch();
    }
  }

  private logSwitch(): void {
    if (this.inUse) this.log.info({ lagSeconds: this.lagSeconds }, 'reading from the replica');
    else
      this.log.warn(
        { lagSeconds: this.lagSeconds, maxLagSeconds: this.maxLagSeconds },
        this.lagSeconds === null
          ? 'the replica does not answer: reads go to the primary'
          : 'the replica is behind: reads go to the primary',
      );
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.db.destroy();
    await this.replica.close();
  }
}
