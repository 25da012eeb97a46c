import { sql } from 'kysely';
import { describe, expect, it, vi } from 'vitest';
import { onGenericPlans, openDatabase, PLAN_EACH_RUN, replanAfter, StatementNames, WARM_CONNECTIONS } from '../../src/db/database.js';
import { EventsRepository } from '../../src/db/repositories/events.js';
import { useHarness } from '../helpers/harness.js';
import { register } from '../http/device-support.js';

describe('statement names', () => {
  it('names a statement once it has been run `threshold` times, always with the same name', () => {
    const names = new StatementNames(3);
    expect(names.nameOf('select $1')).toBeUndefined();
    expect(names.nameOf('select $1')).toBeUndefined();
    const name = names.nameOf('select $1');
    expect(name).toMatch(/^pushd_\d+$/);
    expect(names.nameOf('select $1')).toBe(name);
    expect(names.nameOf('select $1 + 1')).toBeUndefined();
  });

  it('names none with threshold 0, and no more than its cap', () => {
    const none = new StatementNames(0);
    for (let i = 0; i < 10; i++) expect(none.nameOf('select $1')).toBeUndefined();
    const capped = new StatementNames(1, 2);
    expect(capped.nameOf('a $1')).toBeDefined();
    expect(capped.nameOf('b $1')).toBeDefined();
    expect(capped.nameOf('c $1')).toBeUndefined();
    expect(capped.nameOf('a $1')).toBeDefined();
  });

  it('never names a statement marked to be planned each run', () => {
    const names = new StatementNames(1);
    for (let i = 0; i < 10; i++) expect(names.nameOf(`select ${PLAN_EACH_RUN} $1`)).toBeUndefined();
  });
});

describe('plan lifetime', () => {
  const lifetime = { minSeconds: 5, maxSeconds: 600 };
  const at = (iso: string) => Date.parse(iso);
  const seconds = (from: number, to: number) => (to - from) / 1000;

  it('keeps plans as long as the pool had been open, within the bounds', () => {
    const opened = at('2026-11-30T10:00:00Z');
    expect(seconds(opened + 1_000, replanAfter(opened, opened + 1_000, lifetime))).toBe(5);
    expect(seconds(opened + 60_000, replanAfter(opened, opened + 60_000, lifetime))).toBe(60);
    expect(seconds(opened + 7_200_000, replanAfter(opened, opened + 7_200_000, lifetime))).toBe(600);
  });

  it('plans again soon after UTC midnight, when the new day partitions start empty, as a new pool does', () => {
    const opened = at('2026-11-29T08:00:00Z');
    // planned at 23:58 for 600 s: forgotten 5 s into the new day instead of at 00:08
    expect(replanAfter(opened, at('2026-11-30T23:58:00Z'), lifetime)).toBe(at('2026-12-01T00:00:05Z'));
    // and from then on kept as long as the day is old
    expect(replanAfter(opened, at('2026-12-01T00:00:05Z'), lifetime)).toBe(at('2026-12-01T00:00:10Z'));
    expect(replanAfter(opened, at('2026-12-01T00:00:40Z'), lifetime)).toBe(at('2026-12-01T00:01:20Z'));
    expect(replanAfter(opened, at('2026-12-01T03:00:00Z'), lifetime)).toBe(at('2026-12-01T03:10:00Z'));
  });
});

/** The connections prepare what is run often, and a prepared statement answers as the unprepared one did. */
describe('prepared statements on a real connection', () => {
  const h = useHarness();

  const run = async (handle: ReturnType<typeof openDatabase>, times: number) => {
    const answers: number[] = [];
    for (let i = 0; i < times; i++) {
      const { rows } = await sql<{ n: number }>`select ${i}::int * 2 as n`.execute(handle.db);
      answers.push(rows[0]!.n);
    }
    const { rows } = await sql<{ names: string[] }>`select coalesce(array_agg(name), '{}') as names from pg_prepared_statements`.execute(
      handle.db,
    );
    return { answers, prepared: rows[0]!.names };
  };

  it('prepares a statement from its fifth run on, with the same answers', async () => {
    // one connection, so the statements and pg_prepared_statements are seen on the same session
    const handle = openDatabase(h.databaseUrl, 1, 5);
    try {
      const { answers, prepared } = await run(handle, 8);
      expect(answers).toEqual([0, 2, 4, 6, 8, 10, 12, 14]);
      expect(prepared).toHaveLength(1);
      expect(prepared[0]).toMatch(/^pushd_\d+$/);
    } finally {
      await handle.close();
    }
  });

  it('keeps WARM_CONNECTIONS open through a quiet spell, closing the rest when idle', async () => {
    const handle = openDatabase(h.databaseUrl, 8, 5);
    try {
      const clients = await Promise.all(Array.from({ length: 8 }, () => handle.pool.connect()));
      for (const c of clients) c.release();
      expect(handle.pool.totalCount).toBe(8);
      // pg-pool closes a connection idle 10 s, but none below its min
      await new Promise((resolve) => setTimeout(resolve, 10_800));
      expect(handle.pool.totalCount).toBe(WARM_CONNECTIONS);
    } finally {
      await handle.close();
    }
  }, 20_000);

  it('prepares nothing with threshold 0', async () => {
    const handle = openDatabase(h.databaseUrl, 1, 0);
    try {
      const { answers, prepared } = await run(handle, 8);
      expect(answers).toEqual([0, 2, 4, 6, 8, 10, 12, 14]);
      expect(prepared).toEqual([]);
    } finally {
      await handle.close();
    }
  });

  it('plans a prepared statement once PostgreSQL finds the generic plan as good', async () => {
    const handle = openDatabase(h.databaseUrl, 1, 1);
    try {
      for (let i = 0; i < 8; i++) await sql`select ${i}::int + 1 as n`.execute(handle.db);
      const { rows } = await sql<{ generic_plans: number; custom_plans: number }>`
        select generic_plans, custom_plans from pg_prepared_statements where statement like '%+ 1 as n'`.execute(handle.db);
      expect(rows).toHaveLength(1);
      expect(rows[0]!.generic_plans).toBeGreaterThan(0);
    } finally {
      await handle.close();
    }
  });

  it('plans a statement holding audience filters for its values every run: never prepared', async () => {
    const handle = openDatabase(h.databaseUrl, 1, 1);
    try {
      for (let i = 0; i < 8; i++) await sql`select ${sql.raw(PLAN_EACH_RUN)} ${i}::int as n`.execute(handle.db);
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_prepared_statements`.execute(handle.db);
      expect(rows[0]!.n).toBe(0);
    } finally {
      await handle.close();
    }
  });

  it('runs a transaction on generic plans where the connection would plan each run anew, for that transaction alone', async () => {
    const app = await h.createApp();
    const device = await register(h, app.keys.sdk, { platform: 'ios' });
    const handle = openDatabase(h.databaseUrl, 1, 1);
    const events = new EventsRepository();
    const event = (name: string) => ({ source: '', name, count: 1, first: new Date(), last: new Date() });
    const record = (db: typeof handle.db, name: string) =>
      events.record(db, app.app.id, [{ deviceId: device.id, event: event(name) }], 100);
    const plans = async () => {
      const { rows } = await sql<{ generic_plans: number; custom_plans: number }>`
        select generic_plans, custom_plans from pg_prepared_statements where statement like '%into device_events%'`.execute(handle.db);
      return rows[0]!;
    };
    const mode = async (db: typeof handle.db) =>
      (await sql<{ plan_cache_mode: string }>`show plan_cache_mode`.execute(db)).rows[0]!.plan_cache_mode;
    try {
      // what the plan cache chooses for such a statement on tables of some size (bench/journeys: 8 runs in 10)
      await sql`set plan_cache_mode = force_custom_plan`.execute(handle.db);
      for (let i = 0; i < 6; i++) await record(handle.db, `e${i % 2}`);
      const before = await plans();
      expect(before).toEqual({ generic_plans: 0, custom_plans: 6 });
      for (let i = 0; i < 4; i++)
        await handle.db.transaction().execute(async (trx) => {
          await onGenericPlans(trx);
          await record(trx, `e${i % 2}`);
        });
      expect(await plans()).toEqual({ generic_plans: 4, custom_plans: 6 });
      expect(await mode(handle.db)).toBe('force_custom_plan');
      await record(handle.db, 'e0');
      expect(await plans()).toEqual({ generic_plans: 4, custom_plans: 7 });
    } finally {
      await handle.close();
    }
  });

  it('plans again after its plan lifetime, on the same connection', async () => {
    // The pool's clock is stopped, then moved past the plan's life: on a loaded machine the 100,000-row insert below
    // once outlived a real 5 s, and once a real 10 s, and the plan was made again before the first check.
    vi.useFakeTimers({ toFake: ['Date'] });
    const handle = openDatabase(h.databaseUrl, 1, 1, { minSeconds: 10, maxSeconds: 10 });
    const backend = async () => (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(handle.db)).rows[0]!.pid;
    // a table analyzed with one row: the generic plan scans it whole, and keeps scanning once it has grown
    const count = () => sql<{ n: number }>`select count(*)::int as n from replanned where k = ${1}`.execute(handle.db);
    const plan = async () => {
      const { rows } = await sql<{ name: string }>`
        select name from pg_prepared_statements where statement like '%from replanned where%'`.execute(handle.db);
      const explained = await sql<{ 'QUERY PLAN': string }>`explain execute ${sql.raw(rows[0]!.name)}(1)`.execute(handle.db);
      return explained.rows.map((row) => row['QUERY PLAN']).join('\n');
    };
    // a stale generic plan, made on one row and kept after the table grew. PostgreSQL drops every cached plan of a
    // backend that fell behind the shared invalidation queue, which a backend busy in a long statement does while
    // other tests' migrations fill it (all ten tries of a CI run were dropped so): the table grows from another
    // connection, so this one stays idle and reads the queue as it fills; still up to ten tries
    const stalePlan = async () => {
      await sql`drop table if exists replanned`.execute(handle.db);
      await sql`create table replanned (k int) with (autovacuum_enabled = off)`.execute(handle.db);
      await sql`create index on replanned (k)`.execute(handle.db);
      await sql`insert into replanned values (1)`.execute(handle.db);
      await sql`analyze replanned`.execute(handle.db);
      for (let i = 0; i < 8; i++) await count();
      await sql`insert into replanned select g from generate_series(2, 100000) g`.execute(h.db.db);
      return (await plan()).includes('Seq Scan');
    };
    try {
      const first = await backend();
      const preparedAt = Date.now();
      let stale = false;
      for (let tries = 0; tries < 10 && !stale; tries++) {
        if (tries > 0) await new Promise((r) => setTimeout(r, 300));
        stale = await stalePlan();
      }
      expect(stale).toBe(true);
      vi.setSystemTime(preparedAt + 10_100);
      expect((await count()).rows[0]!.n).toBe(1);
      expect(await plan()).not.toContain('Seq Scan');
      expect(await backend()).toBe(first);
    } finally {
      await sql`drop table if exists replanned`.execute(handle.db);
      await handle.close();
      vi.useRealTimers();
    }
  });
});
