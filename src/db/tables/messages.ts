import type { Generated } from 'kysely';
import type { Counter, Json } from './columns.js';

/** An in-app message (migration 011). */
export interface MessagesTable {
  id: Generated<string>;
  app_id: string;
  audience_id: string;
  request: Json<Record<string, unknown>>;
  title: string;
  text: string | null;
  url: string | null;
  type: string;
  custom: Json<Record<string, unknown>>;
  send_at: Date | null;
  /** when it enters streams: send_at, or its creation */
  publish_at: Date;
  unpublish_at: Date | null;
  /** deleted by the retention purge once past */
  expires_at: Date;
  /** its few devices were put in their streams when it was created; never evaluated against a device again */
  resolved: Generated<boolean>;
  canceled_at: Date | null;
  created_at: Generated<Date>;
}

/** A message in a device's stream, with the device's state and impressions (migration 011). */
export interface DeviceMessagesTable {
  device_id: string;
  message_id: string;
  /** when its message's retention starts: unpublish_at, else publish_at (its partition, migration 030) */
  retention_from: Date;
  added_at: Generated<Date>;
  read_at: Date | null;
  deleted_at: Date | null;
  stream_impressions: Counter;
  full_screen_impressions: Counter;
  in_app_impressions: Counter;
}
