import { isIP } from 'node:net';
import maxmind, { type CityResponse, type Reader } from 'maxmind';
import { snapCoordinate } from '../domain/geo.js';
import type { Logger } from './logger.js';

/**
 * Optional GeoIP: with GEOIP_DB_PATH set to a MaxMind City database (.mmdb, e.g. GeoLite2-City), a device's
 * IP address gives it an approximate location (the `location` filter uses it when there is no GPS fix), a city,
 * and a country (also the device's when it sent none). The file is re-read when it changes on disk (geoipupdate).
 */
export interface GeoIpResult {
  latitude: number;
  longitude: number;
  /** the English name, as the City database gives it */
  city: string | null;
  country: string | null;
}

export interface GeoIp {
  readonly enabled: boolean;
  lookup(ip: string): Promise<GeoIpResult | null>;
}

export const noGeoIp: GeoIp = { enabled: false, lookup: async () => null };

/** Starts loading the database now; lookups wait for it. A file that cannot be read disables GeoIP, logged once. */
export function createGeoIp(path: string | undefined, log: Logger): GeoIp {
  if (!path) return noGeoIp;
  const reader: Promise<Reader<CityResponse> | null> = maxmind
    .open<CityResponse>(path, { watchForUpdates: true, watchForUpdatesNonPersistent: true })
    .catch((err: unknown) => {
      log.error({ err, path }, 'GeoIP database could not be opened; devices get no IP-based location');
      return null;
    });
  return {
    enabled: true,
    async lookup(ip) {
      const db = await reader;
      if (!db) return null;
      return lookupIn(db, ip);
    },
  };
}

export function lookupIn(db: Reader<CityResponse>, ip: string): GeoIpResult | null {
  const address = normaliseIp(ip);
  if (!maxmind.validate(address)) return null;
  let found: CityResponse | null;
  try {
    found = db.get(address);
  } catch {
    return null; // e.g. an IPv6 address against an IPv4-only database
  }
  const { latitude, longitude } = found?.location ?? {};
  if (typeof latitude !== 'number' || typeof longitude !== 'number') return null;
  const country = found?.country?.iso_code ?? found?.registered_country?.iso_code ?? null;
  const city = found?.city?.names?.en ?? null;
  return { latitude: snapCoordinate(latitude), longitude: snapCoordinate(longitude), city, country };
}

/**
 * The client address as PostgreSQL's inet stores it, or null when it is none: an X-Forwarded-For value can be
 * anything, and an IPv6 zone (`fe80::1%eth0`) is not storable.
 */
export function storableIp(ip: string): string | null {
  const address = normaliseIp(ip);
  return isIP(address) && !address.includes('%') ? address : null;
}

/** `::ffff:1.2.3.4` (IPv4 on a dual-stack socket) -> `1.2.3.4`. */
export function normaliseIp(ip: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  return m ? m[1]! : ip;
}
