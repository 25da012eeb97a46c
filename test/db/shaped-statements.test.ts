import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { DevicesRepository } from '../../src/db/repositories/devices.js';
import { ShapedStatements } from '../../src/db/shaped-statements.js';
import { useHarness } from '../helpers/harness.js';

describe('ShapedStatements: a statement compiled once a shape, bound to each request', () => {
  const h = useHarness();

  it("answers each request with its own values through the text compiled for the shape's first", async () => {
    const shaped = new ShapedStatements();
    const ask = (a: number, b: string) =>
      shaped.query(
        h.db.db,
        'pair',
        (binder) => ({ a: binder.slot(a), b: binder.slot(b) }),
        (p) => sql<{ a: number; b: string }>`select ${p.a}::int as a, ${p.b}::text as b`,
      );
    const first = ask(1, 'one');
    const second = ask(2, 'two');
    expect(second.sql).toBe(first.sql);
    expect(second.parameters).toEqual([2, 'two']);
    expect((await h.db.db.executeQuery(second)).rows).toEqual([{ a: 2, b: 'two' }]);
    expect((await h.db.db.executeQuery(first)).rows).toEqual([{ a: 1, b: 'one' }]);
  });

  it('refuses a statement with a value its Binder did not collect, which would be kept for every request', () => {
    const shaped = new ShapedStatements();
    expect(() =>
      shaped.query(
        h.db.db,
        'computed',
        (binder) => ({ a: binder.slot(1) }),
        (p) => sql`select ${p.a}::int, ${'fixed'}::text`,
      ),
    ).toThrow(/did not collect/);
  });

  it('gives a registration read the changes of its own values, the columns it sets and the country it fills', async () => {
    const { app } = await h.createApp();
    const devices = new DevicesRepository();
    const token = `shaped-${Date.now()}`;
    await devices.insert(h.db.db, { app_id: app.id, platform: 'android', token, locale: 'en', country: null });
    const changes = async (set: Record<string, unknown>, fill: string | null = null) =>
      (await devices.findUnlockedByToken(h.db.db, app.id, token, set, fill))?.changes;
    // the same shape (locale) with another value, then a shape that also fills the country, then one that sets it
    expect(await changes({ locale: 'en' })).toBe(false);
    expect(await changes({ locale: 'fr' })).toBe(true);
    expect(await changes({ locale: 'en' })).toBe(false);
    expect(await changes({ locale: 'en' }, 'DE')).toBe(true);
    expect(await changes({ locale: 'en', country: null }, 'DE')).toBe(false);
    expect(await devices.findUnlockedByToken(h.db.db, app.id, `${token}-other`, { locale: 'en' }, null)).toBeUndefined();
  });
});
