import { Kysely, PostgresDialect, sql, type Transaction } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.js';
import { withArrayLiterals } from './pg-arrays.js';
import { timestamptzParser } from './timestamps.js';

// int8 (counts, counters) as JS numbers: every counter we keep stays far below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));
/** pg's own timestamptz parser, which ours falls back to (and is tested against) */
export const PG_TIMESTAMPTZ_PARSER = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ);
pg.types.setTypeParser(pg.types.builtins.TIMESTAMPTZ, timestamptzParser(PG_TIMESTAMPTZ_PARSER));

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

/**
 * Runs a group's writes (`GroupRunner`) in a transaction and gives the group's turn up (`release`) before committing:
 * on a disk or a synchronous standby slow to flush, the next group no longer waits for this one's flush as well as
 * its own.
 */
export function writeThenRelease<T>(db: Db, release: () => void, write: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  return db.transaction().execute(async (trx) => {
    const written = await write(trx);
    release();
    return written;
  });
}

/**
 * Marks a statement whose best plan depends on its values, so it is never prepared and PostgreSQL plans each run for
 * what it asks: an audience's filters (a rare tag or a common one), and a statement that finds rows of the
 * notifications' day-partitioned tables (migration 037) by a list of keys (`= any(array)`). PostgreSQL prunes
 * partitions by such a list only when it knows the list as it plans: a generic plan reads every day's partition
 * (the plan cache takes one while they are empty or small), a custom one those of its ids.
 */
export const PLAN_EACH_RUN = '/* planned each run */';

/**
 * Runs the rest of `trx`'s statements on generic plans. A statement that takes its rows as arrays (`unnest($1)`) is
 * estimated at 10 rows in its generic plan and at its arrays' length in a custom one, so the plan cache finds the
 * custom plan cheaper every time and plans it anew on every run, where both read the same indexes: an event's
 * statements took 0.6 ms of planning a request against 0.2 ms of execution. For transactions whose statements read
 * no day-partitioned table by a list of keys (PLAN_EACH_RUN), which need their custom plans.
 */
export async function onGenericPlans(trx: Transaction<Database>): Promise<void> {
  await sql`set local plan_cache_mode = force_generic_plan`.execute(trx);
}

/**
 * Names the statements this process runs often, so each connection prepares them once (as pgjdbc does with its
 * prepareThreshold): PostgreSQL then parses such a statement once per connection, and plans it once as soon as a
 * generic plan proves as good as the custom ones (its plan cache decides, after five executions). Only
 * statements with parameters qualify (one without may hold several statements, which cannot be prepared), and not
 * those marked PLAN_EACH_RUN; the number of names is capped, since each holds memory in every backend that
 * prepared it.
 */
export class StatementNames {
  private readonly seen = new Map<string, number>();
  private readonly names = new Map<string, string>();

  constructor(
    /** uses before a statement is prepared; 0 prepares none */
    private readonly threshold: number,
    private readonly maxNames = 200,
  ) {}

  nameOf(text: string): string | undefined {
    const name = this.names.get(text);
    if (name !== undefined || this.threshold === 0 || this.names.size >= this.maxNames) return name;
    if (text.includes(PLAN_EACH_RUN)) return undefined;
    const uses = (this.seen.get(text) ?? 0) + 1;
    if (uses < this.threshold) {
      // texts that never repeat (generated for one request) must not pile up
      if (this.seen.size >= 10_000) this.seen.clear();
      this.seen.set(text, uses);
      return undefined;
    }
    this.seen.delete(text);
    const named = `pushd_${this.names.size + 1}`;
    this.names.set(text, named);
    return named;
  }
}

/** Makes a new connection run the statements `names` names as prepared statements, their plain arrays encoded fast. */
function prepareNamed(client: pg.PoolClient, names: StatementNames): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  // the driver calls query(text, values); every other call goes through as it came
  (client as { query: unknown }).query = (config: unknown, values?: unknown, callback?: unknown) => {
    if (typeof config !== 'string' || !Array.isArray(values) || values.length === 0) return query(config, values, callback);
    const name = names.nameOf(config);
    const encoded = withArrayLiterals(values);
    return name ? query({ name, text: config, values: encoded }, callback) : query(config, encoded, callback);
  };
}

export interface DatabaseHandle {
  db: Db;
  pool: pg.Pool;
  /** when the oldest statement still waiting for a connection began to wait (performance.now()); none waits: undefined */
  waitingSince(): number | undefined;
  close(): Promise<void>;
}

/**
 * The longest a statement waits for a connection, new or from the pool: during a failover a connection attempt may
 * find no primary to reach (or one that never answers), and a request must be answered (503, src/http/errors.ts)
 * rather than hang. Far above what a busy pool's waits take.
 */
export const CONNECT_TIMEOUT_MS = 10_000;

/** Connections a pool keeps open while idle (pg-pool's `min`: the idle timeout closes none below it). */
export const WARM_CONNECTIONS = 4;

/** How long a connection that prepares statements keeps its plans, in seconds (see openDatabase). */
export interface PlanLifetime {
  minSeconds: number;
  maxSeconds: number;
}

const DAY_MS = 86_400_000;

/**
 * When a connection that planned at `now` forgets its plans: after as long as its plans' tables have been growing,
 * within `lifetime`. That is since the pool opened, or since UTC midnight, when the notifications' new day
 * partitions start empty (migration 037): a plan made on them before midnight scans them whole, so the day starts
 * its plans again as a new pool does, `minSeconds` after midnight at the latest.
 */
export function replanAfter(openedAt: number, now: number, { minSeconds, maxSeconds }: PlanLifetime): number {
  const today = now - (now % DAY_MS);
  const keptMs = 1000 * Math.min(maxSeconds, Math.max(minSeconds, (now - Math.max(openedAt, today)) / 1000));
  return Math.min(now + keptMs, today + DAY_MS + 1000 * minSeconds);
}

/**
 * `prepareThreshold`: uses of a statement before its connections prepare it (StatementNames); 0 prepares none.
 *
 * A prepared statement's generic plan is kept until one of its tables is analyzed again. One made while a table
 * was nearly empty (a new install, a fresh database) scans that table whole, which is right then and slow once it
 * has grown, and a burst can grow it a lot before autovacuum's next analyze. So a connection that prepares forgets
 * its plans (DISCARD PLANS, before its borrower's first statement) once it has kept them as long as the pool had
 * been open when it made them (within `lifetime`), and plans again: soon while everything is new, every few
 * minutes later on, and soon again after UTC midnight (`replanAfter`). The connection itself is kept: a new backend
 * reads the catalogs afresh, which made its borrowers' first statements ~19 ms slower, and the pool's connections,
 * opened together, were renewed together.
 */
export function openDatabase(
  url: string,
  max = 10,
  prepareThreshold = 5,
  lifetime: PlanLifetime = { minSeconds: 5, maxSeconds: 600 },
): DatabaseHandle {
  const openedAt = Date.now();
  const nextReplan = (now: number) => replanAfter(openedAt, now, lifetime);
  const replanAt = new WeakMap<pg.PoolClient, number>();
  // a few connections stay open through a quiet spell: a broadcast after one would open them on its way to the
  // first push (3-10 ms each here, and a new backend reads its catalogs on its first statements)
  // keepAlive: a connection to a server that vanished (a machine lost) ends when TCP notices, not never
  const pool: pg.Pool = new pg.Pool({
    connectionString: url,
    max,
    min: Math.min(WARM_CONNECTIONS, max),
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    keepAlive: true,
  });
  const names = new StatementNames(prepareThreshold);
  pool.on('connect', (client) => {
    prepareNamed(client, names);
    if (prepareThreshold > 0) replanAt.set(client, nextReplan(Date.now()));
  });
  pool.on('acquire', (client) => {
    const now = Date.now();
    const due = replanAt.get(client);
    if (due === undefined || now < due) return;
    replanAt.set(client, nextReplan(now));
    // runs on the connection before the borrower's statements; a failure there fails those too
    client.query('DISCARD PLANS').catch(() => undefined);
  });
  // An idle client that errors (server restart) must not crash the process; the pool replaces it.
  pool.on('error', () => undefined);
  const waits = connectWaits(pool);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: waits.pool }) });
  return {
    db,
    pool,
    waitingSince: waits.oldest,
    async close() {
      await db.destroy();
    },
  };
}

/**
 * The pool as Kysely takes connections from it, with when each connection asked for still waits: the oldest wait is
 * what admission control reads (src/platform/admission.ts). In order of asking, answered or not, so finding the oldest
 * still waiting skips those answered since.
 */
function connectWaits(pool: pg.Pool): { pool: Pick<pg.Pool, 'connect' | 'end'>; oldest: () => number | undefined } {
  const asked: { since: number; done: boolean }[] = [];
  const oldest = () => {
    while (asked.length && asked[0]!.done) asked.shift();
    return asked[0]?.since;
  };
  const connect = async () => {
    // a connection free at once is no wait
    if (pool.idleCount > 0 || pool.totalCount < (pool.options.max ?? 10)) return pool.connect();
    const wait = { since: performance.now(), done: false };
    asked.push(wait);
    try {
      return await pool.connect();
    } finally {
      wait.done = true;
      oldest();
    }
  };
  return { pool: { connect, end: () => pool.end() } as Pick<pg.Pool, 'connect' | 'end'>, oldest };
}
