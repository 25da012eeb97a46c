import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/schema.js';
import { withinIds } from '../../src/db/repositories/partitions.js';

// compiled only: no connection is made
const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool() }) });

describe('a list of notification ids as the range of the partition key', () => {
  it("bounds the column by the least and greatest id as PostgreSQL orders them, whatever the ids' case and order", () => {
    const ids = ['019a7f00-0000-7000-8000-00000000000b', 'C0FFEE00-1234-4ABC-8DEF-0123456789AB', '019a7e00-0000-7000-8000-0000000000ff'];
    const compiled = withinIds('b.notification_id', ids).compile(db);
    expect(compiled.sql).toBe('"b"."notification_id" between $1::uuid and $2::uuid');
    expect(compiled.parameters).toEqual(['019a7e00-0000-7000-8000-0000000000ff', 'c0ffee00-1234-4abc-8def-0123456789ab']);
    expect(withinIds('n.id', [ids[0]!]).compile(db).parameters).toEqual([ids[0], ids[0]]);
  });
});
