import type { Db } from '../../src/db/database.js';
import type { RefDevice } from './reference.js';

/** Writes reference devices as rows (devices, custom attributes, events) for one app, in three statements. */
export async function insertDevices(db: Db, appId: string, devices: RefDevice[]): Promise<void> {
  if (devices.length === 0) return;
  await db
    .insertInto('devices')
    .values(
      devices.map((d) => ({
        id: d.id,
        app_id: appId,
        platform: d.platform,
        token: d.id.startsWith('0') ? null : `token-${d.id}`,
        development: d.development,
        ...(d.strings as Record<string, string | null>),
        notifications_allowed: d.strings.notifications_allowed as 'Enabled' | 'Disabled' | 'Unknown' | null,
        badge: d.badge,
        tags: d.tags,
        created_at: d.created_at,
        registered_at: d.registered_at,
        // erased rows keep their data here on purpose: the erased_at test alone must exclude them
        erased_at: d.erased ? new Date() : null,
        sdk_latitude: d.sdk?.lat ?? null,
        sdk_longitude: d.sdk?.lng ?? null,
        ip_latitude: d.ip?.lat ?? null,
        ip_longitude: d.ip?.lng ?? null,
      })),
    )
    .execute();
  const attributes = devices.flatMap((d) =>
    Object.entries(d.custom).flatMap(([name, a]) =>
      a.values.map((v, position) => ({
        device_id: d.id,
        app_id: appId,
        name,
        type: a.type,
        position,
        is_array: a.values.length > 1,
        str_value: typeof v === 'string' ? v : null,
        num_value: typeof v === 'number' ? v : null,
        date_value: v instanceof Date ? v : null,
        bool_value: typeof v === 'boolean' ? v : null,
      })),
    ),
  );
  if (attributes.length) await db.insertInto('device_attributes').values(attributes).execute();
  const events = devices.flatMap((d) =>
    d.events.map((e) => ({ device_id: d.id, app_id: appId, source: e.source, name: e.name, count: e.count, first_happened_at: e.first, last_happened_at: e.last })),
  );
  if (events.length) await db.insertInto('device_events').values(events).execute();
}
