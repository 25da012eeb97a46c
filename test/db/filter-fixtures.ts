import type { Db } from '../../src/db/database.js';
import type { RefDevice } from './filter-reference.js';

/** Writes reference devices as rows (devices, custom attributes, events) for one app, then erases the erased ones. */
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
        erased_at: null,
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
    d.events.map((e) => ({
      device_id: d.id,
      app_id: appId,
      source: e.source,
      name: e.name,
      count: e.count,
      first_happened_at: e.first,
      last_happened_at: e.last,
    })),
  );
  if (events.length) await db.insertInto('device_events').values(events).execute();
  // Erased as the service erases (the column data stays here on purpose: erased_at alone must exclude them;
  // the trigger removes their attribute, event and tag rows).
  const erased = devices.filter((d) => d.erased).map((d) => d.id);
  if (erased.length) await db.updateTable('devices').set({ erased_at: new Date() }).where('id', 'in', erased).execute();
}
