import { sql } from 'kysely';
import { basic, type Harness } from '../helpers/harness.js';

/** ISO 8601, UTC, exactly three fraction digits: the only timestamp format the API may answer with. */
export const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export type AppWithKeys = Awaited<ReturnType<Harness['createApp']>>;

/** POST a notification body (any JSON value) as application/json with a Basic credential. */
export function postNotification(h: Harness, key: string, body: unknown, opts: { version?: 'v3' | 'v5' | 'v6'; username?: string } = {}) {
  return h.server.inject({
    method: 'POST',
    url: `/${opts.version ?? 'v6'}/notifications`,
    headers: { authorization: basic(key, opts.username ?? ''), 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
}

/** A transactional answer's `results` when its one device was not reached, for `reason`. */
export const oneFailure = (deviceId: string, reason: string) => ({
  success: 0,
  uninstalled: 0,
  failures: [deviceId],
  failure_reasons: [{ device_id: deviceId, reason }],
  not_allowed: 0,
});

export function get(h: Harness, key: string, url: string) {
  return h.server.inject({ method: 'GET', url, headers: { authorization: basic(key) } });
}

/** Row count of a table in the harness database, optionally for one app. */
export async function countRows(h: Harness, table: 'notifications' | 'audiences', appId?: string): Promise<number> {
  let q = h.db.db.selectFrom(table).select(sql<number>`count(*)::int`.as('n'));
  if (appId) q = q.where('app_id', '=', appId);
  return (await q.executeTakeFirstOrThrow()).n;
}
