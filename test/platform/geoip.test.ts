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
        {
          cidr: '81.2.69.0/24',
          record: { city: { names: { en: 'London' } }, country: { iso_code: 'GB' }, location: { ...LONDON, accuracy_radius: 5 } },
        },
        { cidr: '2.125.160.0/20', record: { city: { names: { en: 'Paris' } }, country: { iso_code: 'FR' }, location: PARIS } },
        { cidr: '192.0.2.0/24', record: { country: { iso_code: 'NL' }, location: { latitude: 52.38, longitude: 4.9 } } },
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
    expect(lookupIn(reader, '81.2.69.160')).toEqual({ ...LONDON, city: 'London', country: 'GB' });
    expect(lookupIn(reader, '::ffff:2.125.170.1')).toEqual({ ...PARIS, city: 'Paris', country: 'FR' });
    expect(lookupIn(reader, '192.0.2.1')).toEqual({ latitude: 52.38, longitude: 4.9, city: null, country: 'NL' }); // no city
    expect(lookupIn(reader, '10.0.0.1')).toBeNull();
    expect(lookupIn(reader, '2001:db8::1')).toBeNull(); // IPv6 against an IPv4 database
    expect(lookupIn(reader, 'not an ip')).toBeNull();
  });

  it("an SDK registration gets its IP's location, city and country; `location` filters find it, `sdk_location` does not", async () => {
    const d = await register(h, app.keys.sdk, { platform: 'ios', locale: 'en_GB' }, { 'x-forwarded-for': '81.2.69.160' });
    const device = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json().device;
    expect(device.location).toEqual({ gps: {}, geoip: { lat: '51.5142', lng: '-0.0931', city: 'London', country: 'GB' } });
    expect(device.sdk_location).toBeNull();
    expect(device.country).toBe('GB');
    const near = (name: string) => [
      { name, criteria: [{ point: LONDON, distance: 1, unit: 'km' }] },
      { name: 'locale', criteria: ['en_GB'] },
    ];
    expect(await countVia(h, app.app.id, app.keys.read, near('location'))).toBe(1);
    expect(await countVia(h, app.app.id, app.keys.read, near('sdk_location'))).toBe(0);
  });

  it('GPS and GeoIP are shown apart, GPS wins for the `location` filter; a country the device sent is kept; an update moves the IP location', async () => {
    const d = await register(h, app.keys.sdk, { platform: 'android', country: 'DE', location: PARIS }, { 'x-forwarded-for': '81.2.69.10' });
    let device = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json().device;
    expect(device.location).toEqual({
      gps: { lat: '48.8566', lng: '2.3522' },
      geoip: { lat: '51.5142', lng: '-0.0931', city: 'London', country: 'GB' },
    });
    expect(device.country).toBe('DE'); // the device's own; GeoIP's is location.geoip.country
    expect(
      await countVia(h, app.app.id, app.keys.read, [
        { name: 'location', criteria: [{ point: PARIS, distance: 1, unit: 'km' }] },
        { name: 'device_id', criteria: [d.id] },
      ]),
    ).toBe(1);
    await call(h, 'PUT', `/v6/devices/${d.id}`, app.keys.sdk, { device: { location: null } }, { 'x-forwarded-for': '2.125.161.7' });
    device = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json().device;
    expect(device.location).toEqual({ gps: {}, geoip: { lat: '48.8566', lng: '2.3522', city: 'Paris', country: 'FR' } }); // GeoIP moved
    expect(device.sdk_location).toBeNull();
    expect(device.country).toBe('DE');
  });

  it('an address the database does not know leaves no IP location', async () => {
    const d = await register(h, app.keys.sdk, { platform: 'ios' }, { 'x-forwarded-for': '10.1.2.3' });
    const device = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json().device;
    expect(device.location).toEqual({ gps: {}, geoip: { lat: null, lng: null, city: null, country: null } });
    expect(device.country).toBeNull();
  });

  it('erase empties what GeoIP said too', async () => {
    const d = await register(h, app.keys.sdk, { platform: 'ios' }, { 'x-forwarded-for': '81.2.69.160' });
    const erased = (await call(h, 'POST', `/v6/devices/${d.id}/erase`, app.keys.write)).json().device;
    expect(erased.location).toEqual({ gps: {}, geoip: { lat: null, lng: null, city: null, country: null } });
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
