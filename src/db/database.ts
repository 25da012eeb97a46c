import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.js';

// int8 (counts, counters) as JS numbers: every counter we keep stays far below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

/**
 * A connection the server ends (a restart: 57P01, or the socket closing) emits 'error' on its pg.Client. pg-pool
 * listens only while the client is idle; a client checked out between two queries (ours, or the PostgreSQL queue
 * backend's) has no listener, and an 'error' nobody listens to ends the process. Such an error is dropped here: the
 * next query on that client fails, its transaction rolls back, the pool replaces it, and /ready reports the outage.
 */
const emit = pg.Client.prototype.emit;
pg.Client.prototype.emit = function (this: pg.Client, event: string | symbol, ...args: unknown[]): boolean {
  if (event === 'error' && this.listenerCount('error') === 0) return false;
  return emit.call(this, event, ...args);
};

export type Db = Kysely<Database>;

export interface DatabaseHandle {
  db: Db;
  pool: pg.Pool;
  close(): Promise<void>;
}

export function openDatabase(url: string, max = 10): DatabaseHandle {
  const pool = new pg.Pool({ connectionString: url, max });
  // An idle client that errors (server restart) must not crash the process; the pool replaces it.
  pool.on('error', () => undefined);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    pool,
    async close() {
      await db.destroy();
    },
  };
}
