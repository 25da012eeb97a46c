import { afterEach, describe, expect, it, vi } from 'vitest';
import { DevicesRepository } from '../../src/db/repositories/devices.js';
import { NewDevicesRepository } from '../../src/db/repositories/new-devices.js';
import { TokenReadsRepository, type TokenLookup } from '../../src/db/repositories/token-reads.js';
import type { DeviceUpdate } from '../../src/db/schema.js';
import { credentialHash } from '../../src/domain/device-credential.js';
import { useHarness } from '../helpers/harness.js';
import { call, SAMPLE_COLUMNS, SAMPLE_CUSTOM, token } from './device-support.js';

/**
 * Registrations' reads of the device holding their token, grouped (TokenReadsRepository.readTokens): each lookup told
 * exactly what the one-lookup read (DevicesRepository.findUnlockedByToken) tells, whether its set would change the
 * device, and the device's attributes when it would not.
 */
describe('registrations read in groups', () => {
  const h = useHarness();
  const reads = new TokenReadsRepository();
  const devices = new DevicesRepository();
  afterEach(() => vi.restoreAllMocks());

  const custom = SAMPLE_CUSTOM;
  /** what a phone sends, as the registration's set lays it out */
  const sent: DeviceUpdate = { ...SAMPLE_COLUMNS, sdk_longitude: 0.1 + 0.2, token_invalidated_at: null, token_invalid_reason: null };

  const stored = async (appId: string, t: string, country: string | null) => {
    const values = { ...sent, app_id: appId, platform: 'android' as const, token: t, country, credential_hash: credentialHash('c') };
    const [device] = await new NewDevicesRepository().insertNewTokens(h.db.db, [{ values, changes: custom }]);
    return device!;
  };

  it('tells each lookup what the one-lookup read tells, in one statement', async () => {
    const { app } = await h.createApp();
    const [full, countryless, missing] = [token(), token(), token()];
    const device = await stored(app.id, full, 'DE');
    await stored(app.id, countryless, null);
    const lookups: TokenLookup[] = [
      { appId: app.id, token: full, set: sent, fillCountry: null },
      { appId: app.id, token: full, set: sent, fillCountry: 'FR' },
      { appId: app.id, token: full, set: { ...sent, country: 'DE' }, fillCountry: 'FR' },
      { appId: app.id, token: full, set: { ...sent, country: 'FR' }, fillCountry: null },
      { appId: app.id, token: countryless, set: sent, fillCountry: 'FR' },
      { appId: app.id, token: countryless, set: sent, fillCountry: null },
      { appId: app.id, token: missing, set: sent, fillCountry: null },
      // each column the set names, changed
      ...(
        [
          ['locale', 'de_AT'],
          ['locale', null],
          ['badge', 4],
          ['tags', ['news', 'x"y', 'a,b']],
          ['tags', []],
          ['sdk_longitude', 0.3],
          ['ip_address', '2001:db8::2'],
          ['user_id', 'ü-user'],
          ['platform', 'ios'],
          ['token_invalid_reason', 'gone'],
          ['last_opened_at', new Date('2026-01-02T03:04:05.678Z')],
        ] as const
      ).map(([column, value]) => ({ appId: app.id, token: full, set: { ...sent, [column]: value }, fillCountry: null })),
      // the same values as stored
      { appId: app.id, token: full, set: { ...sent, ip_address: '2001:0db8:0:0::1', tags: ['news', 'a,b', 'x"y'] }, fillCountry: null },
      { appId: app.id, token: full, set: {}, fillCountry: null },
    ];
    const one = vi.spyOn(devices, 'findUnlockedByToken');
    const grouped = await reads.readTokens(h.db.db, lookups);
    expect(one).not.toHaveBeenCalled();
    const alone = [];
    for (const l of lookups) alone.push(await devices.findUnlockedByToken(h.db.db, l.appId, l.token, l.set, l.fillCountry));
    expect(grouped).toEqual(alone);
    expect(grouped.map((f) => f?.changes)).toEqual([
      false,
      false,
      false,
      true,
      true,
      false,
      undefined,
      ...Array.from({ length: 11 }, () => true),
      false,
      false,
    ]);
    expect(grouped[0]!.device).toEqual(device.device);
    expect(grouped[0]!.attributes).toEqual(device.attributes);
    expect(grouped[0]!.attributes.map((a) => a.name)).toEqual(['newsletter', 'plan', 'scores', 'scores', 'scores', 'signed_up']);
  });

  it('reads lookups of several apps, a token repeated and one with a lone surrogate', async () => {
    const [one, two] = [(await h.createApp()).app, (await h.createApp()).app];
    const [shared, lone] = [token(), `lone \ud800 ${token()}`];
    const a = await stored(one.id, shared, null);
    const b = await stored(two.id, shared, null);
    const c = await stored(one.id, lone, null);
    const found = await reads.readTokens(h.db.db, [
      { appId: two.id, token: shared, set: sent, fillCountry: null },
      { appId: one.id, token: lone, set: sent, fillCountry: null },
      { appId: one.id, token: shared, set: sent, fillCountry: null },
      { appId: two.id, token: shared, set: { ...sent, badge: 9 }, fillCountry: null },
    ]);
    expect(found.map((f) => [f?.device.id, f?.changes, f?.attributes.length])).toEqual([
      [b.device.id, false, 6],
      [c.device.id, false, 6],
      [a.device.id, false, 6],
      [b.device.id, true, 0],
    ]);
  });

  it('phones registering again together are read by one statement and answered as stored, writing nothing', async () => {
    const { app, keys } = await h.createApp();
    const tokens = Array.from({ length: 30 }, () => token());
    const body = (t: string, i: number) => ({
      device: { platform: 'ios', token: t, badge: i, tags: [`t${i}`], custom: { n: { type: 'integer', value: i } } },
    });
    const first = await Promise.all(tokens.map((t, i) => call(h, 'POST', '/v6/devices', keys.sdk, body(t, i))));
    expect(first.map((a) => a.statusCode)).toEqual(tokens.map(() => 201));
    const before = await h.db.db.selectFrom('devices').select(['id', 'registered_at']).where('app_id', '=', app.id).orderBy('id').execute();
    const grouped = vi.spyOn(TokenReadsRepository.prototype, 'readTokens');
    const single = vi.spyOn(DevicesRepository.prototype, 'findUnlockedByToken');
    const again = await Promise.all(tokens.map((t, i) => call(h, 'POST', '/v6/devices', keys.sdk, body(t, i))));
    expect(again.map((a) => a.statusCode)).toEqual(tokens.map(() => 200));
    again.forEach((a, i) => expect(a.json().device).toMatchObject({ id: first[i]!.json().device.id, custom: { n: { value: i } } }));
    const sizes = grouped.mock.calls.map(([, lookups]) => lookups.length);
    expect(sizes.reduce((x, y) => x + y, 0)).toBe(30);
    expect(Math.max(...sizes)).toBeGreaterThan(1);
    expect(single).not.toHaveBeenCalled();
    const after = await h.db.db.selectFrom('devices').select(['id', 'registered_at']).where('app_id', '=', app.id).orderBy('id').execute();
    expect(after).toEqual(before);
    // one changed is written the locked way
    const changed = await call(h, 'POST', '/v6/devices', keys.sdk, body(tokens[0]!, 99));
    expect(changed.statusCode).toBe(200);
    expect(changed.json().device).toMatchObject({ badge: 99, custom: { n: { value: 99 } } });
  });

  it('a group the database refuses is read again one lookup at a time', async () => {
    const { keys } = await h.createApp();
    const t = token();
    expect((await call(h, 'POST', '/v6/devices', keys.sdk, { device: { platform: 'ios', token: t } })).statusCode).toBe(201);
    vi.spyOn(TokenReadsRepository.prototype, 'readTokens').mockRejectedValueOnce(new Error('refused'));
    const single = vi.spyOn(DevicesRepository.prototype, 'findUnlockedByToken');
    const again = await call(h, 'POST', '/v6/devices', keys.sdk, { device: { platform: 'ios', token: t } });
    expect(again.statusCode).toBe(200);
    expect(single).toHaveBeenCalledTimes(1);
  });
});
