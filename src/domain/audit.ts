import type { KeyRole } from './keys.js';

/**
 * What each action of the audit log records besides who and when: names and ids, never a secret or a credential's
 * value. An action is a key of this map, so recording one with the wrong details does not compile; a new kind of
 * change (journeys) adds its entry here and its sentence to AUDIT_ACTIONS.
 */
export interface AuditDetails {
  'app.created': { bundle_id: string; name: string; key_ids: Record<KeyRole, string> };
  'key.created': { key_id: string; role: KeyRole };
  'key.revoked': { key_id: string; role: KeyRole };
  'key.limit_set': { key_id: string; role: KeyRole; limit: { per_second: number; burst: number } | null };
  'credentials.set': { platform: 'apns' | 'fcm' | 'web_push' | 'hms' };
  'settings.changed': { changed: AppSettingName[] };
  'identity_verification.on': Record<string, never>;
  'identity_verification.off': Record<string, never>;
  'identity_verification.rotated': Record<string, never>;
  /** audience_size: the devices it was cut for at once, null when its fan-out counts them later */
  'notification.created': { notification_id: string; audience_size: number | null; transactional?: true };
  'notification.canceled': { notification_id: string };
  'notification.winner_picked': { notification_id: string; variant: number };
  'journey.created': { journey_id: string; name: string };
  /** version: the new version entrants from now on take */
  'journey.updated': { journey_id: string; version: number };
  'journey.paused': { journey_id: string };
  'journey.resumed': { journey_id: string };
  'journey.archived': { journey_id: string };
  /** outcome: what the entry did (`entered`, or why not), as the API answered */
  'journey.entered': { journey_id: string; outcome: string };
  'device.erased': { device_id: string };
  /** the devices erased, never the user id, which the erasure removed */
  'user.erased': { device_ids: string[] };
  'message.created': { message_id: string };
  'live_activity_channel.created': { channel_id: string };
  'live_activity_channel.deleted': { channel_id: string };
  'webhook.created': { endpoint_id: string; url: string; events: string[] };
  'webhook.updated': { endpoint_id: string; changed: string[] };
  'webhook.deleted': { endpoint_id: string; url: string };
  'webhook.secret_rotated': { endpoint_id: string };
  /** by pushd: the receiver answered 410, or failed for days */
  'webhook.disabled': { endpoint_id: string; url: string; reason: string };
  'webhook.replayed': { endpoint_id: string; since: string; until: string; events: number };
  'template.created': { template_id: string; name: string };
  /** version: the newest after the change (the same when only the name changed) */
  'template.updated': { template_id: string; version: number; changed: string[] };
  'template.deleted': { template_id: string; name: string };
}

export type AuditAction = keyof AuditDetails;

/** Every action, with what it means (the API's documentation and the console read it). */
export const AUDIT_ACTIONS: Record<AuditAction, string> = {
  'app.created': 'an app was created with its three keys',
  'key.created': 'a key was issued',
  'key.revoked': 'a key was revoked',
  'key.limit_set': "a key's own rate limit was set, or returned to its role's default (null)",
  'credentials.set': "a gateway's credentials were stored (which gateway; never the credentials)",
  'settings.changed': "the app's sending settings were changed (which ones)",
  'identity_verification.on': 'identity verification was turned on',
  'identity_verification.off': 'identity verification was turned off',
  'identity_verification.rotated': 'the identity secret was replaced',
  'notification.created': 'a notification was created (by the key, to how many devices when known)',
  'notification.canceled': 'a notification was canceled',
  'notification.winner_picked': "an A/B test's winner was picked by hand",
  'journey.created': 'a journey was created',
  'journey.updated': "a journey's definition was changed (a new version)",
  'journey.paused': 'a journey was paused',
  'journey.resumed': 'a paused journey was resumed',
  'journey.archived': 'a journey was archived (its entrants left)',
  'journey.entered': 'a device or user was entered into a journey through the API (what came of it)',
  'device.erased': 'a device was erased',
  'user.erased': "a user's devices were erased (which devices; not the user id)",
  'message.created': 'an in-app message was created',
  'live_activity_channel.created': 'a Live Activity broadcast channel was created',
  'live_activity_channel.deleted': 'a Live Activity broadcast channel was deleted',
  'webhook.created': 'a webhook endpoint was created',
  'webhook.updated': 'a webhook endpoint was changed (which fields)',
  'webhook.deleted': 'a webhook endpoint was deleted',
  'webhook.secret_rotated': "a webhook endpoint's signing secret was replaced (the old one signs for 24 hours more)",
  'webhook.disabled': 'pushd disabled a webhook endpoint (its receiver answered 410, or failed for days)',
  'webhook.replayed': "a window of a webhook endpoint's events was sent again",
  'template.created': 'a stored template was created',
  'template.updated': 'a stored template was changed (a new version when its content changed)',
  'template.deleted': 'a stored template was deleted with its versions',
};

export const AUDIT_ACTION_NAMES = Object.keys(AUDIT_ACTIONS) as [AuditAction, ...AuditAction[]];

/** The app settings `settings.changed` names, as the API names them. */
export type AppSettingName = 'max_per_minute' | 'default_time_zone' | 'quiet_hours' | 'frequency_caps';

/**
 * Who made a change: the key of the request (its id and role), the client address and the request's id, as the
 * HTTP layer knows them; the operator's command line is `CLI_ACTOR`, pushd itself `SYSTEM_ACTOR`.
 */
export interface Actor {
  keyId: string | null;
  role: KeyRole | 'cli' | 'system';
  address: string | null;
  requestId: string | null;
}

export const CLI_ACTOR: Actor = Object.freeze({ keyId: null, role: 'cli', address: null, requestId: null });
/** pushd acting on its own (a webhook endpoint disabled because it failed). */
export const SYSTEM_ACTOR: Actor = Object.freeze({ keyId: null, role: 'system', address: null, requestId: null });

/** One change as the audit log stores it, before it has a time and an id. */
export interface AuditEntry<A extends AuditAction = AuditAction> {
  appId: string;
  action: A;
  actor: Actor;
  details: AuditDetails[A];
}

/** A stored row of the audit log, as the repository reads it. */
export interface StoredAuditRow {
  id: string;
  at: Date;
  app_id: string;
  action: string;
  actor_key_id: string | null;
  actor_role: Actor['role'];
  client_address: string | null;
  request_id: string | null;
  details: Record<string, unknown>;
}

/** One row as the API and the command line show it: the same document in both. */
export function auditRecord(r: StoredAuditRow) {
  return {
    id: r.id,
    at: r.at.toISOString(),
    app_id: r.app_id,
    action: r.action,
    actor: { key_id: r.actor_key_id, role: r.actor_role },
    client_address: r.client_address,
    request_id: r.request_id,
    details: r.details,
  };
}
