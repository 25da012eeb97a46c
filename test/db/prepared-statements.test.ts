import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { openDatabase, StatementNames } from '../../src/db/database.js';
import { useHarness } from '../helpers/harness.js';

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

  it('plans each run for its values, whatever a table grew to since the statement was prepared', async () => {
    const handle = openDatabase(h.databaseUrl, 1, 1);
    try {
      const { rows } = await sql<{ plan_cache_mode: string }>`select current_setting('plan_cache_mode') as plan_cache_mode`.execute(
        handle.db,
      );
      expect(rows[0]!.plan_cache_mode).toBe('force_custom_plan');
    } finally {
      await handle.close();
    }
  });
});
