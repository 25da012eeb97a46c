import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { tokenKey } from '../../src/db/repositories/device-queries.js';
import { useHarness } from '../helpers/harness.js';

describe('tokenKey: pushd_token_key (migration 052) computed in Node', () => {
  const h = useHarness();

  it("is the key PostgreSQL's function gives, for every kind of text a token column may hold", async () => {
    const tokens = ['a', 'ab'.repeat(32), 'x'.repeat(4096), 'dGVz:APA91b-_', 'héllo 日本語 🎉', 'lone \ud800 surrogate', ' '];
    for (const t of tokens) {
      const { rows } = await sql<{ key: string }>`select pushd_token_key(${t})::text as key`.execute(h.db.db);
      expect(tokenKey(t), JSON.stringify(t)).toBe(rows[0]!.key);
    }
  });
});
