import type { Generated } from 'kysely';

/** An activity's update token on a device (migration 027). */
export interface LiveActivityTokensTable {
  device_id: string;
  activity_id: string;
  app_id: string;
  activity_type: string;
  token: string;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

/** An activity type's push-to-start token on a device (migration 027). */
export interface LiveActivityStartTokensTable {
  device_id: string;
  activity_type: string;
  app_id: string;
  token: string;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

/** A broadcast channel APNs created for the app (migration 027). */
export interface LiveActivityChannelsTable {
  id: Generated<string>;
  app_id: string;
  channel_id: string;
  development: boolean;
  message_storage_policy: number;
  created_at: Generated<Date>;
}
