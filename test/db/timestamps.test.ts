import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { parseIsoTimestamptz } from '../../src/db/timestamps.js';
import { openDatabase, PG_TIMESTAMPTZ_PARSER } from '../../src/db/database.js';
import { useHarness } from '../helpers/harness.js';

// pg's own parser, as src/db/database.ts found it before putting ours in its place: what every value is read against
const reference = (text: string) => PG_TIMESTAMPTZ_PARSER(text) as Date;

describe('timestamptz read without regular expressions', () => {
  it('reads what postgres-date reads, to the millisecond, for every fraction and zone PostgreSQL writes', () => {
    const zones = ['+00', '-05', '+05:30', '+05:45', '-09:30', '+13', '-00:25:21', '+14'];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const pad = (v: number, w: number) => String(v).padStart(w, '0');
    for (let i = 0; i < 5000; i++) {
      const at = new Date(Date.UTC(1900, 0, 1) + Math.floor(next() * 300 * 365.25 * 86_400_000));
      const places = i % 7;
      const fraction = places ? `.${pad(Math.floor(next() * 10 ** places), places)}` : '';
      const text =
        `${pad(at.getUTCFullYear(), 4)}-${pad(at.getUTCMonth() + 1, 2)}-${pad(at.getUTCDate(), 2)} ` +
        `${pad(at.getUTCHours(), 2)}:${pad(at.getUTCMinutes(), 2)}:${pad(at.getUTCSeconds(), 2)}${fraction}${zones[i % zones.length]}`;
      const read = parseIsoTimestamptz(text);
      expect(read, text).toBeInstanceOf(Date);
      expect(read!.getTime(), text).toBe(reference(text).getTime());
    }
  });

  it('leaves every other shape to the parser it replaces', () => {
    for (const text of [
      'infinity',
      '-infinity',
      '0044-03-15 12:00:00+00 BC',
      '0099-01-01 00:00:00+00',
      '12345-01-01 00:00:00+00',
      '2026-11-29 07:30:12.+00',
      '2026-11-29 07:30:12.5Z',
      '2026-11-29 07:30:12+0530',
      '2026-11-29T07:30:12+00',
      '2026-11-29',
    ])
      expect(parseIsoTimestamptz(text), text).toBeNull();
  });

  describe('on a real connection', () => {
    const h = useHarness();

    it('reads the instants PostgreSQL writes in each session time zone as pg did', async () => {
      const handle = openDatabase(h.databaseUrl, 1, 0);
      try {
        for (const zone of ['UTC', 'Asia/Kolkata', 'America/St_Johns', 'Pacific/Chatham', 'Europe/Amsterdam']) {
          await sql`select set_config('TimeZone', ${zone}, false)`.execute(handle.db);
          const { rows } = await sql<{ at: Date; text: string }>`
            select v as at, v::text as text
            from unnest(array[
              '2026-11-29 07:30:12.123456+00', '2026-03-29 01:00:00+00', '1970-01-01 00:00:00+00',
              '2099-12-31 23:59:59.999999+00', '1910-06-01 12:00:00+00', '2026-11-29 07:30:12.5+00'
            ]::timestamptz[]) as v`.execute(handle.db);
          for (const row of rows) {
            // read by ours (the pool's parser), against pg's
            expect(parseIsoTimestamptz(row.text), row.text).not.toBeNull();
            expect(row.at.getTime(), row.text).toBe(reference(row.text).getTime());
          }
        }
      } finally {
        await handle.close();
      }
    });
  });
});
