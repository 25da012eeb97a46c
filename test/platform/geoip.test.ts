import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import maxmind, { type CityResponse } from 'maxmind';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGeoIp, lookupIn } from '../../src/platform/geoip.js';
import { createLogger } from '../../src/platform/logger.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { buildMmdb } from './mmdb.js';
import { call, countVia, register } from '../http/device-support.js';

const LONDON = { latitude: 51.5142, longitude: -0.0931 };
const PARIS = { latitude: 48.8566, longitude: 2.3522 };

describe('GeoIP (GEOIP_DB_PATH, a MaxMind City database)', () => {
  let dir: string;
  let file: string;
  let h: Harness;
  let app: Awaited<ReturnType<Harness['createApp']>>;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'pushd-geoip-'));
    file = path.join(dir, 'city.mmdb');
    await writeFile(
      file,
      buildMmdb([
        { cidr: '81.2.69.0/24', record: { country: { iso_code: 'GB' }, location: { ...LONDON, accuracy_radius: 5 } } },
        { cidr: '2.125.160.0/20', record: { country: { iso_code: 'FR' }, location: PARIS } },
      ]),
    );
    // a proxy in front of the API reports the phone's address; the tests play that proxy
    h = await createHarness({ env: { GEOIP_DB_PATH: file, TRUST_PROXY: '1' } });
    app = await h.createApp();
  });
  afterAll(async () => {
    await h?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('the test database reads back through maxmind', async () => {
    const reader = await maxmind.open<CityResponse>(file);
    expect(lookupIn(reader, '81.2.69.160')).toEqual({ ...LONDON, country: 'GB' });
    expect(lookupIn(reader, '::ffff:2.125.170.1')).toEqual({ ...PARIS, country: 'FR' });
    expect(lookupIn(reader, '10.0.0.1')).toBeNull();
    expect(lookupIn(reader, '2001:db8::1')).toBeNull(); // IPv6 against an IPv4 database
    expect(lookupIn(reader, 'not an ip')).toBeNull();
  });

  it("an SDK registration gets its IP's location and country; `location` filters find it, `sdk_location` does not", async () => {
    const d = await register(h, app.keys.sdk, { platform: 'ios', locale: 'en_GB' }, { 'x-forwarded-for': '81.2.69.160' });
    const device = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json().device;
    expect(device.location).toEqual(LONDON);
    expect(device.sdk_location).toBeNull();
    expect(device.country).toBe('GB');
    const near = (name: string) => [
      { name, criteria: [{ point: LONDON, distance: 1, unit: 'km' }] },
      { name: 'locale', criteria: ['en_GB'] },
    ];
    expect(await countVia(h, app.app.id, app.keys.read, near('location'))).toBe(1);
    expect(await countVia(h, app.app.id, app.keys.read, near('sdk_location'))).toBe(0);
  });

  it('GPS wins over GeoIP for `location`; a country the device sent is kept; an update moves the IP location', async () => {
    const d = await register(h, app.keys.sdk, { platform: 'android', country: 'DE', location: PARIS }, { 'x-forwarded-for': '81.2.69.10' });
    let device = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json().device;
    expect(device.location).toEqual(PARIS);
    expect(device.country).toBe('DE');
    await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.sdk, { device: { location: null } }, { 'x-forwarded-for': '2.125.161.7' });
    device = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json().device;
    expect(device.location).toEqual(PARIS); // now from GeoIP
    expect(device.sdk_location).toBeNull();
    expect(device.country).toBe('DE');
  });

  it('an address the database does not know leaves no IP location', async () => {
    const d = await register(h, app.keys.sdk, { platform: 'ios' }, { 'x-forwarded-for': '10.1.2.3' });
    const device = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json().device;
    expect(device.location).toBeNull();
    expect(device.country).toBeNull();
  });

  it('a database that cannot be read disables GeoIP instead of failing requests', async () => {
    const errors: unknown[] = [];
    const log = createLogger('silent');
    log.error = ((...args: unknown[]) => void errors.push(args)) as typeof log.error;
    const geo = createGeoIp(path.join(dir, 'missing.mmdb'), log);
    expect(await geo.lookup('81.2.69.160')).toBeNull();
    expect(errors).toHaveLength(1);
  });
});
