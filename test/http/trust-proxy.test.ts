import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/platform/config.js';
import { useHarness, type Harness } from '../helpers/harness.js';

/** TRUST_PROXY: X-Forwarded-For is believed only from the proxies the operator names. */
const storedAddress = async (h: Harness, forwardedFor: string, remoteAddress = '127.0.0.1') => {
  const { keys } = await h.createApp();
  const res = await h.server.inject({
    method: 'POST',
    url: '/v6/devices',
    remoteAddress,
    headers: { authorization: `Basic ${Buffer.from(`:${keys.sdk}`).toString('base64')}`, 'x-forwarded-for': forwardedFor },
    payload: { device: { platform: 'ios' } },
  });
  expect(res.statusCode, res.body).toBe(201);
  const row = await h.db.db.selectFrom('devices').select('ip_address').where('id', '=', res.json().device.id).executeTakeFirstOrThrow();
  return row.ip_address;
};

describe('TRUST_PROXY unset (the default)', () => {
  const h = useHarness();
  it('ignores X-Forwarded-For: the address is the connection’s', async () => {
    expect(await storedAddress(h, '81.2.69.160')).toBe('127.0.0.1');
  });
});

describe('TRUST_PROXY=1 (one proxy in front)', () => {
  const h = useHarness({ env: { TRUST_PROXY: '1' } });
  it('takes the address the nearest proxy reports, and no further back', async () => {
    expect(await storedAddress(h, '81.2.69.160')).toBe('81.2.69.160');
    expect(await storedAddress(h, '6.6.6.6, 81.2.69.160')).toBe('81.2.69.160');
  });
});

describe('TRUST_PROXY as proxy addresses', () => {
  const h = useHarness({ env: { TRUST_PROXY: '10.0.0.0/8, 127.0.0.1' } });
  it('believes the header from a listed proxy, not from anyone else', async () => {
    expect(await storedAddress(h, '81.2.69.160', '10.1.2.3')).toBe('81.2.69.160');
    expect(await storedAddress(h, '81.2.69.160', '192.0.2.7')).toBe('192.0.2.7');
  });
});

describe('TRUST_PROXY parsing', () => {
  it('reads a hop count or a list of addresses and CIDRs', () => {
    expect(loadConfig({}).TRUST_PROXY).toBeUndefined();
    expect(loadConfig({ TRUST_PROXY: '2' }).TRUST_PROXY).toBe(2);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, ::1,fd00::/8' }).TRUST_PROXY).toEqual(['10.0.0.0/8', '::1', 'fd00::/8']);
  });
  it.each(['true', '10.0.0.0/33', 'proxy.local', '1.2.3.4/8/9'])('refuses %s naming the variable', (value) => {
    expect(() => loadConfig({ TRUST_PROXY: value })).toThrow(/TRUST_PROXY: .* is not a hop count, an IP address or a CIDR/);
  });
});
