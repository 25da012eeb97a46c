import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { useDatabaseBefore } from '../helpers/migrations-before.js';

/**
 * 053 on a database holding APNs tokens in both cases: a phone registered twice (once per case) becomes one device,
 * the bound one kept (else the one registered last), the other without the token; every iPhone's token lower-case.
 */
describe('migration 053 (device credential, APNs tokens lower-case) on a database in use', () => {
  const db = useDatabaseBefore('053');

  it('merges the stored pairs, keeping the bound device, and lower-cases the rest', async () => {
    const pool = db.pool();
    await migrate(pool, db.before());
    const app = async (bundle: string) =>
      (await pool.query<{ id: string }>(`INSERT INTO apps (bundle_id, name) VALUES ($1, $1) RETURNING id`, [bundle])).rows[0]!.id;
    const [a, b] = [await app('com.example.m53a'), await app('com.example.m53b')];
    const hex = (c: string) => c.repeat(64);
    const device = async (
      appId: string,
      platform: string,
      token: string,
      userId: string | null,
      createdAgo: number,
      registeredAgo: number,
    ) =>
      (
        await pool.query<{ id: string }>(
          `INSERT INTO devices (app_id, platform, token, user_id, created_at, registered_at)
           VALUES ($1, $2, $3, $4, now() - make_interval(mins => $5), now() - make_interval(mins => $6)) RETURNING id`,
          [appId, platform, token, userId, createdAgo, registeredAgo],
        )
      ).rows[0]!.id;
    // the victim's phone, bound; the same token in upper case, registered later for nobody
    const victim = await device(a, 'ios', hex('a'), 'victim', 60, 60);
    const copy = await device(a, 'ios', hex('A'), null, 5, 5);
    // two unbound copies: the one registered last is kept
    const older = await device(a, 'ios', hex('b'), null, 60, 50);
    const newer = await device(a, 'ios', hex('B'), null, 40, 1);
    // both bound: the first created (the other case came later)
    const first = await device(a, 'ios', hex('C'), 'u-first', 60, 30);
    const later = await device(a, 'ios', hex('c'), 'mallory', 10, 1);
    // alone in upper case; an FCM token in mixed case; another app's copy of the victim's token
    const alone = await device(a, 'ios', hex('D'), null, 10, 10);
    const fcm = await device(a, 'android', 'Ab:APA91bXyZ', null, 10, 10);
    const otherApp = await device(b, 'ios', hex('A'), 'someone', 10, 10);
    await pool.query(
      `INSERT INTO live_activity_tokens (device_id, activity_id, app_id, activity_type, token) VALUES ($1, 'act-1', $2, 'Ride', $3)`,
      [alone, a, hex('E')],
    );

    await migrate(pool);
    const { rows } = await pool.query<{ id: string; token: string | null; user_id: string | null }>(
      `SELECT id, token, user_id FROM devices`,
    );
    const tokenOf = new Map(rows.map((r) => [r.id, r.token]));
    expect(Object.fromEntries([victim, copy, older, newer, first, later, alone, fcm, otherApp].map((id) => [id, tokenOf.get(id)]))).toEqual(
      {
        [victim]: hex('a'),
        [copy]: null,
        [older]: null,
        [newer]: hex('b'),
        [first]: hex('c'),
        [later]: null,
        [alone]: hex('d'),
        [fcm]: 'Ab:APA91bXyZ',
        [otherApp]: hex('a'),
      },
    );
    // what referred to them stays theirs: the devices are all there, with their users
    expect(rows.find((r) => r.id === later)).toMatchObject({ user_id: 'mallory' });
    const { rows: activities } = await pool.query(`SELECT token FROM live_activity_tokens`);
    expect(activities).toEqual([{ token: hex('e') }]);
    const { rows: columns } = await pool.query(`SELECT credential_hash, credential_held FROM devices WHERE id = $1`, [victim]);
    expect(columns).toEqual([{ credential_hash: null, credential_held: false }]);
  });
});
