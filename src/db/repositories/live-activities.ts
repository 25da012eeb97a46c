import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { Database, LiveActivityChannel, LiveActivityStartToken, LiveActivityToken } from '../schema.js';

/** A device's Live Activity tokens: its activities' update tokens and its activity types' push-to-start tokens. */
export interface DeviceLiveActivities {
  activities: Pick<LiveActivityToken, 'activity_id' | 'activity_type' | 'token' | 'updated_at'>[];
  startTokens: Pick<LiveActivityStartToken, 'activity_type' | 'token' | 'updated_at'>[];
}

/** The Live Activity registry (tokens per device) and the app's broadcast channels. */
export class LiveActivitiesRepository {
  /**
   * Registers or replaces an activity's update token on a device, unless the device already holds `max` other
   * activities (then false). The caller holds the device's row lock, so concurrent registrations count in turn.
   */
  async putToken(
    trx: Transaction<Database>,
    t: { appId: string; deviceId: string; activityId: string; activityType: string; token: string },
    max: number,
  ): Promise<boolean> {
    const { rows } = await sql`
      insert into live_activity_tokens (device_id, activity_id, app_id, activity_type, token)
      select ${t.deviceId}::uuid, ${t.activityId}, ${t.appId}::uuid, ${t.activityType}, ${t.token}
      where (
        select count(*)
        from live_activity_tokens
        where device_id = ${t.deviceId}::uuid and activity_id <> ${t.activityId}
      ) < ${max}::int
      on conflict (device_id, activity_id) do update
        set activity_type = excluded.activity_type, token = excluded.token, updated_at = now()
      returning 1`.execute(trx);
    return rows.length > 0;
  }

  /** Registers or replaces the push-to-start token of an activity type on a device (false: `max` other types held). */
  async putStartToken(
    trx: Transaction<Database>,
    t: { appId: string; deviceId: string; activityType: string; token: string },
    max: number,
  ): Promise<boolean> {
    const { rows } = await sql`
      insert into live_activity_start_tokens (device_id, activity_type, app_id, token)
      select ${t.deviceId}::uuid, ${t.activityType}, ${t.appId}::uuid, ${t.token}
      where (
        select count(*)
        from live_activity_start_tokens
        where device_id = ${t.deviceId}::uuid and activity_type <> ${t.activityType}
      ) < ${max}::int
      on conflict (device_id, activity_type) do update
        set token = excluded.token, updated_at = now()
      returning 1`.execute(trx);
    return rows.length > 0;
  }

  /** Forgets an activity's token on a device; whether there was one. */
  async deleteToken(db: Db, deviceId: string, activityId: string): Promise<boolean> {
    const r = await db
      .deleteFrom('live_activity_tokens')
      .where('device_id', '=', deviceId)
      .where('activity_id', '=', activityId)
      .executeTakeFirst();
    return r.numDeletedRows > 0n;
  }

  /** Forgets an activity type's push-to-start token on a device; whether there was one. */
  async deleteStartToken(db: Db, deviceId: string, activityType: string): Promise<boolean> {
    const r = await db
      .deleteFrom('live_activity_start_tokens')
      .where('device_id', '=', deviceId)
      .where('activity_type', '=', activityType)
      .executeTakeFirst();
    return r.numDeletedRows > 0n;
  }

  async ofDevice(db: Db, deviceId: string): Promise<DeviceLiveActivities> {
    const [activities, startTokens] = await Promise.all([
      db
        .selectFrom('live_activity_tokens')
        .select(['activity_id', 'activity_type', 'token', 'updated_at'])
        .where('device_id', '=', deviceId)
        .orderBy('activity_id')
        .execute(),
      db
        .selectFrom('live_activity_start_tokens')
        .select(['activity_type', 'token', 'updated_at'])
        .where('device_id', '=', deviceId)
        .orderBy('activity_type')
        .execute(),
    ]);
    return { activities, startTokens };
  }

  async insertChannel(
    db: Db,
    c: { appId: string; channelId: string; development: boolean; messageStoragePolicy: number },
  ): Promise<LiveActivityChannel> {
    return db
      .insertInto('live_activity_channels')
      .values({ app_id: c.appId, channel_id: c.channelId, development: c.development, message_storage_policy: c.messageStoragePolicy })
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async listChannels(db: Db, appId: string): Promise<LiveActivityChannel[]> {
    return db.selectFrom('live_activity_channels').selectAll().where('app_id', '=', appId).orderBy('created_at').orderBy('id').execute();
  }

  /** The app's channel by APNs' channel id. */
  async findChannel(db: Db, appId: string, channelId: string): Promise<LiveActivityChannel | undefined> {
    return db
      .selectFrom('live_activity_channels')
      .selectAll()
      .where('app_id', '=', appId)
      .where('channel_id', '=', channelId)
      .executeTakeFirst();
  }

  async deleteChannel(db: Db, appId: string, channelId: string): Promise<boolean> {
    const r = await db
      .deleteFrom('live_activity_channels')
      .where('app_id', '=', appId)
      .where('channel_id', '=', channelId)
      .executeTakeFirst();
    return r.numDeletedRows > 0n;
  }
}
