import { AudiencesRepository } from '../../src/db/repositories/audiences.js';
import { canonicalFilters, specKey } from '../../src/domain/audience-spec.js';
import type { CustomChanges } from '../../src/domain/device-input.js';
import type { Filter } from '../../src/domain/filters.js';
import { basic, type Harness } from '../helpers/harness.js';

/** Custom attributes of each kind a device's rows store (a string, floats as an array, a date, a boolean). */
export const SAMPLE_CUSTOM: CustomChanges = new Map([
  ['plan', { type: 'string', isArray: false, values: ['pro'] }],
  ['scores', { type: 'float', isArray: true, values: [1.5, -2.25, 1e21] }],
  ['signed_up', { type: 'date', isArray: false, values: [new Date('2024-02-29T12:34:56.789Z')] }],
  ['newsletter', { type: 'boolean', isArray: false, values: [false] }],
]);

/** A device's columns of each type a phone gives (text with quotes and commas, an array, floats, an address). */
export const SAMPLE_COLUMNS = {
  platform: 'android' as const,
  locale: 'de_DE',
  time_zone: 'Europe/Berlin',
  os_version: '15',
  badge: 3,
  user_id: 'ü-user "quoted" \\ back',
  tags: ['news', 'a,b', 'x"y'],
  sdk_latitude: 52.520008,
  sdk_longitude: 13.404954,
  ip_address: '2001:db8::1',
  notifications_allowed: 'Enabled' as const,
};

/** HTTP helpers for the device API tests: JSON in, the real server, a Basic credential. */
export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

export function call(h: Harness, method: Method, url: string, key: string, body?: unknown, headers: Record<string, string> = {}) {
  return h.server.inject({
    method,
    url,
    headers: { authorization: basic(key), ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { payload: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
}

export async function register(h: Harness, key: string, device: Record<string, unknown>, headers: Record<string, string> = {}) {
  const res = await call(h, 'POST', '/v6/devices', key, { device }, headers);
  if (res.statusCode !== 201 && res.statusCode !== 200) throw new Error(`register failed: ${res.statusCode} ${res.body}`);
  return res.json().device as Record<string, unknown> & { id: string };
}

let seq = 0;
/** A distinct APNs-like token per call. */
export const token = () => `${(++seq).toString(16).padStart(8, '0')}${'ab'.repeat(28)}`;

/** device_count of an on-the-fly audience, through the audience API (stored via the repository). */
export async function audienceFor(h: Harness, appId: string, filters: unknown[]) {
  const f = filters as Filter[];
  return new AudiencesRepository().upsertFilters(h.db.db, appId, specKey(f), canonicalFilters(f));
}

export async function countVia(h: Harness, appId: string, readKey: string, filters: unknown[]): Promise<number> {
  const audience = await audienceFor(h, appId, filters);
  const res = await call(h, 'GET', `/v6/audiences/${audience.id}`, readKey);
  if (res.statusCode !== 200) throw new Error(`count failed: ${res.statusCode} ${res.body}`);
  return res.json().audience.device_count as number;
}

/**
 * Holds the device's row lock in a transaction of the test's own, as other work on the device would, until `release`;
 * answers once the lock is taken.
 */
export async function holdDevice(h: Harness, deviceId: string): Promise<{ release: () => Promise<void> }> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const lockTaken = new Promise<void>((resolve) => (locked = resolve));
  const holder = h.db.db.transaction().execute(async (trx) => {
    await trx.selectFrom('devices').select('id').where('id', '=', deviceId).forUpdate().execute();
    locked();
    await released;
  });
  await lockTaken;
  return {
    release: async () => {
      release();
      await holder;
    },
  };
}
