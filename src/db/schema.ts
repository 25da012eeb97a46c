import type { Filter } from '../domain/filters.js';
import type { FrequencyCap } from '../domain/frequency-caps.js';
import type { KeyRole } from '../domain/keys.js';
import type { NotificationState } from '../domain/notification-request.js';
import type { LocalPlan } from '../domain/campaign.js';
import type { PushPriority } from '../domain/delivery-options.js';
import type { LiveActivityRef } from '../domain/live-activity.js';
import type { Localized } from '../domain/localized.js';
import type { QuietHours } from '../domain/quiet-hours.js';
import type { Sealed } from '../domain/secrets.js';
import type { TemplateData } from '../domain/template-data.js';
import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';

import type { Counter, Json, Timestamp } from './tables/columns.js';
import type { DeviceMessagesTable, MessagesTable } from './tables/messages.js';
import type { LiveActivityChannelsTable, LiveActivityStartTokensTable, LiveActivityTokensTable } from './tables/live-activities.js';
import type {
  JourneyEnteredTable,
  JourneyEntrantHistoryTable,
  JourneyEntrantsTable,
  JourneyStepCountsTable,
  JourneysTable,
  JourneyVersionsTable,
} from './tables/journeys.js';
import type { WebhookAttemptsTable, WebhookEndpointsTable, WebhookEventsTable } from './tables/webhooks.js';
import type { TemplatesTable, TemplateVersionsTable } from './tables/templates.js';

export type { KeyRole };
export type Platform = 'ios' | 'android' | 'web' | 'huawei';
export type { NotificationState };
export type AttributeType = 'string' | 'integer' | 'float' | 'date' | 'boolean';

export interface AppsTable {
  id: Generated<string>;
  bundle_id: string;
  name: string;
  /** each credential a JSON document sealed under the secrets key (src/domain/secrets.ts, migration 046) */
  apns_credentials: Sealed | null;
  fcm_credentials: Sealed | null;
  web_push_credentials: Sealed | null;
  /** the app's HMS app id and client secret (migration 026) */
  hms_credentials: Sealed | null;
  created_at: Generated<Date>;
  default_time_zone: string | null;
  /** quiet hours of its notifications that name none (src/domain/quiet-hours.ts) */
  quiet_hours: Json<QuietHours> | null;
  /** ceilings on the pushes one device receives per window (src/domain/frequency-caps.ts, migration 032) */
  frequency_caps: Json<FrequencyCap[]> | null;
  max_per_minute: number | null;
  pace_next_at: Date | null;
  /** the HMAC key of identity verification (migration 019); kept while it is off, so turning it on again keeps it */
  identity_secret: Sealed | null;
  /** whether sdk-key writes of user_id / user_email must carry its hash: on for apps created since 019 */
  identity_verification: Generated<boolean>;
}

export interface ApiKeysTable {
  id: Generated<string>;
  app_id: string;
  role: KeyRole;
  key_hash: Buffer;
  key_hint: string;
  created_at: Generated<Date>;
  revoked_at: Date | null;
  /** when a request last authenticated with it, written at most every few minutes (null: never, or before 054) */
  last_used_at: Generated<Date | null>;
  /** A limit of its own (both set or both null); null: the configured default for the role. */
  rate_limit_per_second: Generated<number | null>;
  rate_limit_burst: Generated<number | null>;
}

export interface DevicesTable {
  id: Generated<string>;
  app_id: string;
  platform: Platform;
  token: string | null;
  /** a web device's subscription keys (migration 022) */
  web_push_p256dh: string | null;
  web_push_auth: string | null;
  development: Generated<boolean>;
  locale: string | null;
  time_zone: string | null;
  os_name: string | null;
  os_version: string | null;
  app_version: string | null;
  sdk_version: string | null;
  marketing_name: string | null;
  badge: number | null;
  user_id: string | null;
  user_email: string | null;
  tags: Generated<string[]>;
  country: string | null;
  notifications_allowed: 'Enabled' | 'Disabled' | 'Unknown' | null;
  sdk_latitude: number | null;
  sdk_longitude: number | null;
  ip_address: string | null;
  ip_latitude: number | null;
  ip_longitude: number | null;
  /** GeoIP's city and country code for ip_address (shown as location.geoip) */
  ip_city: string | null;
  ip_country: string | null;
  created_at: Generated<Date>;
  registered_at: Generated<Date>;
  erased_at: Date | null;
  token_invalidated_at: Date | null;
  token_invalid_reason: string | null;
  /** The last app open the SDK reported (a session start or a push open). */
  last_opened_at: Date | null;
  /** the SHA-256 of the device's credential, answered once on creation; null: registered before (migration 053) */
  credential_hash: Buffer | null;
  /** whether the device's client sent its credential back once: from then on the sdk key's changes need it */
  credential_held: Generated<boolean>;
}

export interface DeviceAttributesTable {
  device_id: string;
  app_id: string;
  name: string;
  type: AttributeType;
  position: Generated<number>;
  is_array: Generated<boolean>;
  str_value: string | null;
  num_value: number | null;
  date_value: Date | null;
  bool_value: boolean | null;
}

export interface DeviceEventsTable {
  device_id: string;
  app_id: string;
  source: Generated<string>;
  name: string;
  count: number;
  first_happened_at: Timestamp;
  last_happened_at: Timestamp;
}

export interface AudiencesTable {
  id: Generated<string>;
  app_id: string;
  name: string;
  kind: 'all' | 'filters';
  /** The canonical filter list, validated before it is stored (kind 'filters'); null for 'all'. */
  filters: Json<Filter[] | null> | null;
  /** the key of its canonical spec (`audienceSpec`), a digest as a uuid (the all-devices one's the nil uuid); null once retired */
  spec_key: string | null;
  test: Generated<boolean>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  /** when the retention found nothing naming it (migration 052): deleted a grace later if still nothing does */
  retired_at: Generated<Date | null>;
}

export interface NotificationsTable {
  id: Generated<string>;
  app_id: string;
  /** null for a transactional send, which names its devices */
  audience_id: string | null;
  send_group: string | null;
  request: Json<Record<string, unknown>>;
  payload: Json<Record<string, unknown>>;
  /** content per language (src/domain/localized.ts); null: the payload in every language */
  localized: Json<Localized> | null;
  collapse_key: string | null;
  state: Generated<NotificationState>;
  generation: Generated<number>;
  devices_targeted: Counter;
  pushes_succeeded: Counter;
  pushes_failed: Counter;
  tokens_invalidated: Counter;
  failure_reason: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  published_at: Date | null;
  finished_at: Date | null;
  fanout_cursor: string | null;
  fanout_seq: Generated<number>;
  fanout_done: Generated<boolean>;
  send_at: Date | null;
  next_due_at: Date | null;
  /** a best-time send's first and last wave, once cut (migration 067) */
  best_time_first_at: Date | null;
  best_time_last_at: Date | null;
  local_plan: Json<LocalPlan> | null;
  wave: Generated<number>;
  skipped_past_local_time: Counter;
  /** devices due inside their quiet hours and not sent to (`then: drop`) */
  skipped_quiet_hours: Counter;
  throttle_per_minute: number | null;
  pace_next_at: Date | null;
  canceled_at: Date | null;
  /** The in-app message this notification was sent with, whose id its push carries. */
  message_id: string | null;
  /** after this instant no push of it is sent (a ttl is stored as created_at + ttl); null: no expiry */
  expires_at: Date | null;
  priority: PushPriority | null;
  pushes_expired: Counter;
  /** matched devices not sent a visible push: their notifications are Disabled */
  devices_not_allowed: Counter;
  /** a transactional send's collapse_key with its recipient, JSON [field, value, key]: the same key and recipient, the same notification */
  transactional_key: string | null;
  /** a Live Activity push's event, type and activity (migration 027); null for a notification */
  live_activity: Json<LiveActivityRef | null> | null;
  /** whether the app's frequency caps apply (migration 032, computed from the request) */
  capped: Generated<boolean>;
  /** devices not sent to because they had reached a frequency cap */
  pushes_capped: Counter;
  /** an A/B test's stage after its test share (migration 034): waiting for the winner, or sending it to the rest */
  ab_stage: 'waiting' | 'rest' | null;
  /** the winning variant's index, once picked */
  ab_winner: number | null;
  ab_picked_at: Date | null;
  /** devices of the holdout share (sent nothing) */
  ab_holdout: Counter;
  /** what its templates render with (migration 055; src/domain/template-data.ts); null: no per-send data */
  template_data: Json<TemplateData> | null;
  /** who created it (migration 057), as the audit log names an actor; null when no request did (a journey's step) */
  actor_key_id: string | null;
  actor_role: 'read' | 'write' | 'sdk' | 'cli' | null;
  client_address: string | null;
  request_id: string | null;
}

/** A delivery batch; its id (src/domain/batch-id.ts) is made of (notification_id, generation, seq), its key (migration 043). */
export interface DeliveryBatchesTable {
  notification_id: string;
  generation: number;
  seq: number;
  platform: Platform;
  development: boolean;
  device_ids: string[];
  /** the devices still to send, once an attempt is recorded; null before: all of device_ids (migration 043) */
  pending_device_ids: string[] | null;
  state: Generated<'pending' | 'done' | 'superseded' | 'canceled'>;
  attempts: Generated<number>;
  succeeded: Generated<number>;
  failed: Generated<number>;
  invalidated: Generated<number>;
  expired: Generated<number>;
  capped: Generated<number>;
  last_error: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  not_before: Date | null;
  /** the delivery job that sends it when not its own (migration 014) */
  job_id: string | null;
  /** why a push of it was not delivered, the latest (migration 029; the notification shows its batches' latest) */
  failure_reason: string | null;
  /** its failed pushes by reason (migration 065), summed over its attempts */
  failed_by_reason: Json<Record<string, number>> | null;
  /** an A/B test's variant its devices are sent (migration 034), and whether they are the rest's (the winner) */
  variant: number | null;
  ab_rest: Generated<boolean>;
  /** a best-time wave's batch not released yet: no delivery job has it (migration 064) */
  held: Generated<boolean>;
}

/** A range of the device id space one job fans out, with its own checkpoint (migration 029). */
export interface FanoutRangesTable {
  notification_id: string;
  generation: number;
  range_no: number;
  cursor_id: string;
  up_to_id: string | null;
  next_seq: number;
  done: Generated<boolean>;
  devices_targeted: Generated<number>;
  devices_not_allowed: Generated<number>;
  updated_at: Generated<Date>;
}

/** Kept by a trigger from devices.tags (migration 002), so the tags filter reads an index. */
export interface DeviceTagsTable {
  device_id: string;
  app_id: string;
  tag: string;
}

/** The first answer of an app's Idempotency-Key (migration 008). */
export interface IdempotencyKeysTable {
  app_id: string;
  key: string;
  request_hash: Buffer;
  /** null while the first request has not answered yet (a transactional send in flight) */
  status: number | null;
  body: Json<unknown> | null;
  resource_id: string | null;
  created_at: Generated<Date>;
}

/** An app session the SDK reported (migration 012); the client-made id is unique per device. */
export interface AppSessionsTable {
  device_id: string;
  id: string;
  app_id: string;
  started_at: Date;
  duration_seconds: number | null;
  created_at: Generated<Date>;
}

/** A push open the SDK reported, once per notification, kind and device (migration 012). */
export interface PushOpensTable {
  notification_id: string;
  kind: 'direct' | 'indirect';
  device_id: string;
  app_id: string;
  opened_at: Date;
}

/** Which device received which push, when: what its events are attributed to (migration 012; by day, 023). */
export interface DevicePushesTable {
  device_id: string;
  notification_id: string;
  received_at: Date;
}

/** Events a device sent within the conversion window after receiving a push (migration 012). */
export interface NotificationConversionsTable {
  notification_id: string;
  source: string;
  name: string;
  device_id: string;
  /** the UTC day of the events counted (its partition, migration 030) */
  day: ColumnType<Date, string, string>;
  count: ColumnType<string, number, number>;
}

/** The devices of an A/B test's holdout share, and when its fan-out met them (migration 039). */
export interface AbHoldoutDevicesTable {
  notification_id: string;
  device_id: string;
  since: Date;
}

/** Events a holdout device sent within the conversion window after `since` (migration 039). */
export interface AbHoldoutConversionsTable {
  notification_id: string;
  device_id: string;
  source: string;
  name: string;
  count: ColumnType<string, number, number>;
}

/** The daily figures, per app, UTC day and shard of device ids; kept by triggers (migration 012). */
export interface AppDailyStatsTable {
  app_id: string;
  day: ColumnType<Date, string, string>;
  shard: number;
  installs: Counter;
  sessions: Counter;
  opens: Counter;
  active_users: Counter;
}

/** The devices active on a day, so each counts once in active_users (migration 012; by day, 023). */
export interface AppActiveDevicesTable {
  app_id: string;
  day: ColumnType<Date, string, string>;
  device_id: string;
}

/** One change of consequence to an app, who made it and from where (migration 047), kept by UTC day of `at`. */
export interface AuditLogTable {
  id: Generated<string>;
  at: Generated<Date>;
  app_id: string;
  action: string;
  /** the key that made it; null from the command line */
  actor_key_id: string | null;
  actor_role: KeyRole | 'cli' | 'system';
  client_address: string | null;
  request_id: string | null;
  details: Json<Record<string, unknown>>;
}

export interface LeasesTable {
  name: string;
  holder: string;
  expires_at: Date;
}

export interface Database {
  apps: AppsTable;
  api_keys: ApiKeysTable;
  devices: DevicesTable;
  device_attributes: DeviceAttributesTable;
  device_events: DeviceEventsTable;
  device_tags: DeviceTagsTable;
  audiences: AudiencesTable;
  notifications: NotificationsTable;
  delivery_batches: DeliveryBatchesTable;
  idempotency_keys: IdempotencyKeysTable;
  app_sessions: AppSessionsTable;
  push_opens: PushOpensTable;
  device_pushes: DevicePushesTable;
  notification_conversions: NotificationConversionsTable;
  ab_holdout_devices: AbHoldoutDevicesTable;
  ab_holdout_conversions: AbHoldoutConversionsTable;
  app_daily_stats: AppDailyStatsTable;
  app_active_devices: AppActiveDevicesTable;
  messages: MessagesTable;
  device_messages: DeviceMessagesTable;
  leases: LeasesTable;
  fanout_ranges: FanoutRangesTable;
  live_activity_tokens: LiveActivityTokensTable;
  live_activity_start_tokens: LiveActivityStartTokensTable;
  live_activity_channels: LiveActivityChannelsTable;
  audit_log: AuditLogTable;
  journeys: JourneysTable;
  journey_versions: JourneyVersionsTable;
  journey_step_counts: JourneyStepCountsTable;
  journey_entrants: JourneyEntrantsTable;
  journey_entered: JourneyEnteredTable;
  journey_entrant_history: JourneyEntrantHistoryTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_events: WebhookEventsTable;
  webhook_attempts: WebhookAttemptsTable;
  templates: TemplatesTable;
  template_versions: TemplateVersionsTable;
}

export type App = Selectable<AppsTable>;
export type FanoutRangeRow = Selectable<FanoutRangesTable>;
export type ApiKey = Selectable<ApiKeysTable>;
export type Device = Selectable<DevicesTable>;
export type NewDevice = Insertable<DevicesTable>;
export type DeviceUpdate = Updateable<DevicesTable>;
export type Audience = Selectable<AudiencesTable>;
export type Notification = Selectable<NotificationsTable>;
export type DeliveryBatch = Selectable<DeliveryBatchesTable>;
export type IdempotencyKey = Selectable<IdempotencyKeysTable>;
export type Message = Selectable<MessagesTable>;
export type LiveActivityToken = Selectable<LiveActivityTokensTable>;
export type LiveActivityStartToken = Selectable<LiveActivityStartTokensTable>;
export type LiveActivityChannel = Selectable<LiveActivityChannelsTable>;
export type AuditLogRow = Selectable<AuditLogTable>;
export type Journey = Selectable<JourneysTable>;
export type JourneyEntrant = Selectable<JourneyEntrantsTable>;
export type WebhookEndpoint = Selectable<WebhookEndpointsTable>;
export type WebhookAttempt = Selectable<WebhookAttemptsTable>;
export type TemplateRow = Selectable<TemplatesTable>;
export type TemplateVersionRow = Selectable<TemplateVersionsTable>;
