import { sql, type SqlBool } from 'kysely';
import { isUuid } from '../../domain/cursor.js';
import type { Filter } from '../../domain/filters.js';
import type { MessageTiming } from '../../domain/message-request.js';
import type { ImpressionKind } from '../../domain/message-stream.js';
import { timeOrderedUuid } from '../../platform/random-id.js';
import type { Db } from '../database.js';
import type { Message } from '../schema.js';

export interface NewMessage {
  appId: string;
  audienceId: string;
  /** The request's message as it was parsed, stored as the record's `message`. */
  request: Record<string, unknown>;
  title: string;
  text: string | null;
  url: string | null;
  type: string;
  custom: Record<string, unknown>;
  timing: MessageTiming;
  /** the instant the request was taken at: publish_at, when it has no send_at, is this same instant */
  createdAt: Date;
  /** its devices are put in their streams now (addToStreams), never evaluated at read time */
  resolved: boolean;
}

/** A message with the id of the push sent with it (null without one, or once a collapse_key took it over). */
export type MessageWithPush = Message & { notification_id: string | null };

/** A message as a device's stream shows it, with that device's read state. */
export type StreamRow = Pick<
  Message,
  'id' | 'title' | 'text' | 'url' | 'type' | 'custom' | 'created_at' | 'publish_at' | 'unpublish_at'
> & {
  read_at: Date | null;
};

/** The keyset position of a stream page: newest first by publish time, then id. */
export interface StreamPosition {
  publishAt: Date;
  id: string;
}

export type ImpressionCounts = Record<ImpressionKind, number>;

const DAY_MS = 86_400_000;

/** Live at `now` (alias `m`): published, not canceled, not unpublished, not past its retention. */
const live = (now: Date) =>
  sql<SqlBool>`(
    m.canceled_at is null
    and m.publish_at <= ${now}
    and (m.unpublish_at is null or m.unpublish_at > ${now})
    and m.expires_at > ${now}
  )`;

/**
 * Kept at `now` (alias `m`): until the end of the UTC day its retention ends on, when its day's partition (and its
 * stream rows') is dropped whole. A row the maintenance has not dropped yet, or kept in the default partition, is
 * read no longer than that either.
 */
const kept = (now: Date) => sql<SqlBool>`m.expires_at >= ${new Date(now.getTime() - (now.getTime() % DAY_MS))}`;

/** When a message's retention starts, its stream rows' partition key (alias `m`): as `expires_at` counts it. */
const retentionFrom = sql<Date>`coalesce(m.unpublish_at, m.publish_at)`;

export class MessagesRepository {
  /**
   * Stores a message under an id made from the instant its retention ends: messages are partitioned by the day of
   * their id (migration 040), and a day's partition is dropped whole once the day is over.
   */
  async insert(db: Db, m: NewMessage): Promise<Message> {
    return db
      .insertInto('messages')
      .values({
        id: timeOrderedUuid(m.timing.expiresAt.getTime()),
        app_id: m.appId,
        audience_id: m.audienceId,
        request: JSON.stringify(m.request),
        title: m.title,
        text: m.text,
        url: m.url,
        type: m.type,
        custom: JSON.stringify(m.custom),
        send_at: m.timing.sendAt,
        publish_at: m.timing.publishAt,
        unpublish_at: m.timing.unpublishAt,
        expires_at: m.timing.expiresAt,
        resolved: m.resolved,
        created_at: m.createdAt,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  /** The app's message, unless the day its retention ended on is over at `now` (kept: readable, `unpublished`). */
  async findForApp(db: Db, appId: string, id: string, now: Date): Promise<MessageWithPush | undefined> {
    return this.withPush(db).where('m.app_id', '=', appId).where('m.id', '=', id).where(kept(now)).executeTakeFirst();
  }

  /** The app's messages kept at `now`, newest first. */
  async listForApp(db: Db, appId: string, now: Date, limit: number, offset: number): Promise<MessageWithPush[]> {
    return this.withPush(db)
      .where('m.app_id', '=', appId)
      .where(kept(now))
      .orderBy('m.created_at', 'desc')
      .orderBy('m.id', 'desc')
      .limit(limit)
      .offset(offset)
      .execute();
  }

  private withPush(db: Db) {
    return db
      .selectFrom('messages as m')
      .leftJoin('notifications as n', 'n.message_id', 'm.id')
      .selectAll('m')
      .select('n.id as notification_id');
  }

  /** Cancels a message that is not published yet at `now`; undefined when it is unknown, published or canceled. */
  async cancelScheduled(db: Db, appId: string, id: string, now: Date): Promise<Message | undefined> {
    return db
      .updateTable('messages')
      .set({ canceled_at: now })
      .where('app_id', '=', appId)
      .where('id', '=', id)
      .where('canceled_at', 'is', null)
      .where('publish_at', '>', now)
      .returningAll()
      .executeTakeFirst();
  }

  /**
   * Impressions of a message over every device, by kind. Its stream rows are all of the instant its retention starts
   * (retentionFrom), so the bound on that key reads its one day's partition of device_messages instead of every day's:
   * the row's instant to the microsecond, which a Date truncates to the millisecond, is in [that ms, the next).
   */
  async impressionTotals(db: Db, message: Pick<Message, 'id' | 'publish_at' | 'unpublish_at'>): Promise<ImpressionCounts> {
    const from = message.unpublish_at ?? message.publish_at;
    const row = await db
      .selectFrom('device_messages')
      .select([
        sql<number>`coalesce(sum(stream_impressions), 0)::int`.as('stream'),
        sql<number>`coalesce(sum(full_screen_impressions), 0)::int`.as('full_screen'),
        sql<number>`coalesce(sum(in_app_impressions), 0)::int`.as('in_app'),
      ])
      .where('message_id', '=', message.id)
      .where('retention_from', '>=', from)
      .where('retention_from', '<', new Date(from.getTime() + 1))
      .executeTakeFirstOrThrow();
    return row;
  }

  // ---- streams ----

  /** Puts a message in these devices' streams (a message whose audience was resolved when it was created). */
  async addToStreams(db: Db, messageId: string, deviceIds: string[]): Promise<void> {
    if (deviceIds.length === 0) return;
    // the live ones, locked: an erase (which clears the stream) cannot commit between the check and the insert
    await db
      .insertInto('device_messages')
      .columns(['device_id', 'message_id', 'retention_from'])
      .expression(
        db
          .selectFrom('devices as d')
          .innerJoin('messages as m', (join) => join.on('m.id', '=', messageId))
          .select(['d.id', 'm.id as message_id', retentionFrom.as('retention_from')])
          .where('d.id', 'in', deviceIds)
          .where('d.erased_at', 'is', null)
          .orderBy('d.id')
          .forShare('d'),
      )
      .onConflict((oc) => oc.doNothing())
      .execute();
  }

  /**
   * The audiences of the app's live messages that are evaluated at read time and not yet in this device's stream
   * (each audience once): the ones a stream read tests the device against.
   */
  async openAudiences(db: Db, appId: string, deviceId: string, now: Date): Promise<{ id: string; filters: Filter[] | null }[]> {
    return db
      .selectFrom('messages as m')
      .innerJoin('audiences as a', 'a.id', 'm.audience_id')
      .select(['a.id', 'a.filters'])
      .distinct()
      .where('m.app_id', '=', appId)
      .where('m.resolved', '=', false)
      .where(live(now))
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('device_messages as s')
              .select(sql.lit(1).as('one'))
              .where('s.device_id', '=', deviceId)
              .whereRef('s.message_id', '=', 'm.id'),
          ),
        ),
      )
      .execute();
  }

  /**
   * Adds the app's live messages of these audiences to the device's stream (those already there stay as they are),
   * in id order, so two reads of one device at once wait for each other instead of deadlocking.
   */
  async addOpenToStream(db: Db, appId: string, deviceId: string, audienceIds: string[], now: Date): Promise<void> {
    if (audienceIds.length === 0) return;
    await db
      .insertInto('device_messages')
      .columns(['device_id', 'message_id', 'retention_from'])
      .expression((eb) =>
        eb
          .selectFrom('messages as m')
          .select([sql<string>`${deviceId}::uuid`.as('device_id'), 'm.id', retentionFrom.as('retention_from')])
          .where('m.app_id', '=', appId)
          .where('m.resolved', '=', false)
          .where('m.audience_id', 'in', audienceIds)
          .where(live(now))
          .orderBy('m.id'),
      )
      .onConflict((oc) => oc.doNothing())
      .execute();
  }

  /** The device's live, undeleted messages (alias m, s). */
  private stream(db: Db, deviceId: string, now: Date) {
    return db
      .selectFrom('device_messages as s')
      .innerJoin('messages as m', 'm.id', 's.message_id')
      .where('s.device_id', '=', deviceId)
      .where('s.deleted_at', 'is', null)
      .where(live(now));
  }

  /** One page of the device's stream, newest first, after `after`. */
  async streamPage(db: Db, deviceId: string, now: Date, after: StreamPosition | null, limit: number): Promise<StreamRow[]> {
    return this.stream(db, deviceId, now)
      .select(['m.id', 'm.title', 'm.text', 'm.url', 'm.type', 'm.custom', 'm.created_at', 'm.publish_at', 'm.unpublish_at', 's.read_at'])
      .$if(after !== null, (qb) => qb.where(sql<SqlBool>`(m.publish_at, m.id) < (${after!.publishAt}::timestamptz, ${after!.id}::uuid)`))
      .orderBy('m.publish_at', 'desc')
      .orderBy('m.id', 'desc')
      .limit(limit)
      .execute();
  }

  /** One message of the device's stream. */
  async streamItem(db: Db, deviceId: string, messageId: string, now: Date): Promise<StreamRow | undefined> {
    return this.stream(db, deviceId, now)
      .select(['m.id', 'm.title', 'm.text', 'm.url', 'm.type', 'm.custom', 'm.created_at', 'm.publish_at', 'm.unpublish_at', 's.read_at'])
      .where('m.id', '=', messageId)
      .executeTakeFirst();
  }

  /** How many messages the device's stream holds, and how many of them it has not read. */
  async streamCounts(db: Db, deviceId: string, now: Date): Promise<{ total: number; unread: number }> {
    return this.stream(db, deviceId, now)
      .select([sql<number>`count(*)::int`.as('total'), sql<number>`(count(*) filter (where s.read_at is null))::int`.as('unread')])
      .executeTakeFirstOrThrow();
  }

  /** Marks messages of the device's stream read (the first read time stays); answers the ids it found there. */
  async markRead(db: Db, deviceId: string, messageIds: string[], now: Date): Promise<string[]> {
    return this.updateInStream(db, deviceId, messageIds, now, sql`coalesce(s.read_at, ${now}::timestamptz)`, 'read_at');
  }

  /** Deletes a message from the device's stream for good; false when it is not there. */
  async hide(db: Db, deviceId: string, messageId: string, now: Date): Promise<boolean> {
    return (await this.updateInStream(db, deviceId, [messageId], now, sql`${now}::timestamptz`, 'deleted_at')).length > 0;
  }

  private async updateInStream(
    db: Db,
    deviceId: string,
    messageIds: string[],
    now: Date,
    value: ReturnType<typeof sql>,
    column: 'read_at' | 'deleted_at',
  ): Promise<string[]> {
    const ids = messageIds.filter(isUuid);
    if (ids.length === 0) return [];
    const { rows } = await sql<{ message_id: string }>`
      update device_messages s set ${sql.ref(column)} = ${value}
      from messages m
      where m.id = s.message_id and s.device_id = ${deviceId}::uuid and s.message_id = any(${ids}::uuid[])
        and s.deleted_at is null and ${live(now)}
      returning s.message_id`.execute(db);
    return rows.map((r) => r.message_id);
  }

  /**
   * Adds impressions to messages the device has had in its stream (still counted after it was read, deleted or
   * unpublished: a report can come late); answers the ids it found.
   */
  async addImpressions(db: Db, deviceId: string, counts: Map<string, ImpressionCounts>): Promise<string[]> {
    const entries = [...counts].filter(([id]) => isUuid(id));
    if (entries.length === 0) return [];
    const column = (kind: ImpressionKind) => entries.map(([, c]) => c[kind]);
    const { rows } = await sql<{ message_id: string }>`
      update device_messages s
      set stream_impressions = s.stream_impressions + v.stream,
          full_screen_impressions = s.full_screen_impressions + v.full_screen,
          in_app_impressions = s.in_app_impressions + v.in_app
      from unnest(
          ${entries.map(([id]) => id)}::uuid[],
          ${column('stream')}::int[],
          ${column('full_screen')}::int[],
          ${column('in_app')}::int[]
        ) as v(message_id, stream, full_screen, in_app)
      where s.device_id = ${deviceId}::uuid and s.message_id = v.message_id
      returning s.message_id`.execute(db);
    return rows.map((r) => r.message_id);
  }
}
