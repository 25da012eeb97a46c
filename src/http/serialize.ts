import type { DeviceAttributeRow } from '../db/repositories/devices.js';
import type { DeviceEventRow } from '../db/repositories/events.js';
import type { Audience, Notification } from '../db/schema.js';
import { estimatedFinish } from '../domain/campaign.js';
import type { DeviceDetails, Written } from '../services/devices.js';
import type { DeliveryOptionsInput } from '../domain/delivery-options.js';

/** ISO 8601, UTC, milliseconds — the only timestamp format the API speaks. */
export const iso = (d: Date | string | null | undefined): string | null => (d == null ? null : new Date(d).toISOString());

/** The create answer: exactly the record fields of the contract. */
export function createdNotificationResponse(n: Notification) {
  // stored as the request schema parsed it (older requests carry no delivery options)
  const request = n.request as unknown as { to: unknown; payload: unknown } & DeliveryOptionsInput;
  const { expires_at, ttl, priority } = request;
  return {
    id: n.id,
    created_at: iso(n.created_at)!,
    state: n.state,
    to: { id: n.audience_id, type: 'Audience' as const },
    notification: { to: request.to, payload: request.payload, expires_at, ttl, priority },
  };
}

/** The stored record with its delivery state and counters. */
export function notificationResponse(n: Notification) {
  return {
    ...createdNotificationResponse(n),
    updated_at: iso(n.updated_at)!,
    devices_targeted: n.devices_targeted,
    pushes_succeeded: n.pushes_succeeded,
    pushes_failed: n.pushes_failed,
    tokens_invalidated: n.tokens_invalidated,
    pushes_expired: n.pushes_expired,
    expires_at: iso(n.expires_at),
    priority: n.priority,
    published_at: iso(n.published_at),
    finished_at: iso(n.finished_at),
    failure_reason: n.failure_reason,
    group: n.send_group,
    send_at: iso(n.send_at),
    local_time: n.local_plan !== null,
    skipped_past_local_time: n.skipped_past_local_time,
    throttle: n.throttle_per_minute === null ? null : { per_minute: n.throttle_per_minute },
    canceled_at: iso(n.canceled_at),
    estimated_finish_at: iso(estimatedFinish(n)),
  };
}

export function audienceResponse(a: Audience) {
  return { name: a.name, created_at: iso(a.created_at)!, updated_at: iso(a.updated_at)!, id: a.id };
}

/** The device as the API shows it: our field names plus the public API's (push_token, user_attributes, ...). */
export function deviceView({ device: d, attributes, events }: DeviceDetails) {
  const custom = customView(attributes);
  const gps = d.sdk_latitude !== null && d.sdk_longitude !== null ? { latitude: d.sdk_latitude, longitude: d.sdk_longitude } : null;
  const ipLocation = d.ip_latitude !== null && d.ip_longitude !== null ? { latitude: d.ip_latitude, longitude: d.ip_longitude } : null;
  return {
    id: d.id,
    platform: d.platform,
    token: d.token,
    push_token: d.token,
    development: d.development,
    locale: d.locale,
    time_zone: d.time_zone,
    os_name: d.os_name,
    os_version: d.os_version,
    app_version: d.app_version,
    sdk_version: d.sdk_version,
    marketing_name: d.marketing_name,
    badge: d.badge,
    user_id: d.user_id,
    user_email: d.user_email,
    tags: d.tags,
    country: d.country,
    notifications_allowed: d.notifications_allowed,
    push_enabled: d.notifications_allowed === 'Enabled',
    // `location` is what the location filter tests: GPS when there is a fix, else GeoIP.
    location: gps ?? ipLocation,
    sdk_location: gps,
    custom,
    user_attributes: custom,
    user_events: eventsView(events),
    created_at: iso(d.created_at),
    installed_at: iso(d.created_at),
    registered_at: iso(d.registered_at),
    erased_at: iso(d.erased_at),
    token_invalidated_at: iso(d.token_invalidated_at),
  };
}

/** The keys of deviceView that show a device field, where they are not the field's own name. */
const VIEW_KEYS: Partial<Record<Written['fields'][number], string[]>> = {
  token: ['token', 'push_token'],
  notifications_allowed: ['notifications_allowed', 'push_enabled'],
  sdk_latitude: ['location', 'sdk_location'],
  sdk_longitude: ['location', 'sdk_location'],
};

/**
 * The answer to registering a token the app already has: the device's id, its platform and what this request
 * wrote, as stored; nothing else of the existing record (its e-mail, location, other attributes, events).
 */
export function writtenView(details: DeviceDetails, written: Written): Partial<ReturnType<typeof deviceView>> {
  const custom = new Set(written.custom);
  const view = deviceView({ ...details, attributes: details.attributes.filter((a) => custom.has(a.name)), events: [] });
  const shown = new Set([
    'id',
    'platform',
    ...written.fields.flatMap((f) => VIEW_KEYS[f] ?? [f]),
    ...(custom.size > 0 ? ['custom', 'user_attributes'] : []),
  ]);
  return Object.fromEntries(Object.entries(view).filter(([key]) => shown.has(key)));
}

type CustomView = Record<string, { type: string; value: unknown }>;

function customView(rows: DeviceAttributeRow[]): CustomView {
  const out: CustomView = {};
  for (const r of rows) {
    const value = r.str_value ?? r.num_value ?? (r.date_value ? iso(r.date_value) : null) ?? r.bool_value;
    const entry = (out[r.name] ??= { type: r.type, value: r.is_array ? [] : value });
    if (r.is_array) (entry.value as unknown[]).push(value);
  }
  return out;
}

/** Keyed as in filter names without `events.`: `<name>` for SDK events, `<source>.<name>` otherwise. */
function eventsView(rows: DeviceEventRow[]) {
  return Object.fromEntries(
    rows.map((e) => [
      e.source ? `${e.source}.${e.name}` : e.name,
      { count: Number(e.count), first_happened_at: iso(e.first_happened_at), last_happened_at: iso(e.last_happened_at) },
    ]),
  );
}
