import type { Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { MessagesRepository, StreamPosition, StreamRow } from '../db/repositories/messages.js';
import type { Database } from '../db/schema.js';
import { decodeCursor, encodeCursor, isUuid } from '../domain/cursor.js';
import { parseIsoInstant } from '../domain/date-math.js';
import { ErasedError, NotFoundError } from '../domain/errors.js';
import { countImpressions, type Impression } from '../domain/message-stream.js';
import type { Clock } from '../platform/clock.js';
import type { IdempotencyKeys, IdempotentRequest, Replay } from './idempotency.js';
import type { ServiceDeps } from './deps.js';

export interface StreamPage {
  items: StreamRow[];
  /** messages in the stream, and how many of them are unread */
  total: number;
  unread: number;
  cursor: string | null;
}

export type MessageStreamServiceDeps = Pick<ServiceDeps, 'db' | 'repos' | 'clock' | 'idempotency'>;

/**
 * A device's message stream, the SDK's side (the device id is its capability). Which messages it holds: those of
 * the app that are live (published, not unpublished, canceled or past retention) and that the device has been in
 * the audience of at some read while they were live — each read tests the device against the audiences of the
 * live messages not yet in its stream, in one statement per 100 audiences, and keeps the ones it matched, so a
 * device that later leaves an audience keeps the message. A message to a few named devices or users was put in
 * their streams when it was created instead. Deleted messages never come back.
 */
export class MessageStreamService {
  private readonly db: Db;
  private readonly messages: MessagesRepository;
  private readonly devices: DevicesRepository;
  private readonly clock: Clock;
  private readonly idempotency: IdempotencyKeys;

  constructor(deps: MessageStreamServiceDeps) {
    this.db = deps.db;
    this.messages = deps.repos.messages;
    this.devices = deps.repos.devices;
    this.clock = deps.clock;
    this.idempotency = deps.idempotency;
  }

  /** One page of the stream, newest first, with the unread count; `cursor` continues it. */
  async page(appId: string, deviceId: string, opts: { cursor?: string; per: number }): Promise<StreamPage> {
    const listing = `messages:${deviceId}`;
    const after = opts.cursor ? positionOf(decodeCursor(opts.cursor, listing, 2)) : null;
    const now = this.clock.now();
    return this.db.transaction().execute(async (trx) => {
      await this.refresh(trx, appId, deviceId, now, 'read');
      const rows = await this.messages.streamPage(trx, deviceId, now, after, opts.per + 1);
      const counts = await this.messages.streamCounts(trx, deviceId, now);
      const items = rows.slice(0, opts.per);
      const last = items.at(-1);
      const cursor = rows.length > opts.per && last ? encodeCursor(listing, [last.publish_at.toISOString(), last.id]) : null;
      return { items, ...counts, cursor };
    });
  }

  /** One message of the stream (the one a push names in `_st.mid`). */
  async one(appId: string, deviceId: string, messageId: string): Promise<StreamRow> {
    const now = this.clock.now();
    return this.db.transaction().execute(async (trx) => {
      await this.refresh(trx, appId, deviceId, now, 'read');
      const row = await this.messages.streamItem(trx, deviceId, messageId, now);
      if (!row) throw new NotFoundError('message');
      return row;
    });
  }

  /** Marks messages read; every id must be in the stream, else 404 and nothing is marked. Answers the unread count. */
  async markRead(appId: string, deviceId: string, messageIds: string[]): Promise<number> {
    const now = this.clock.now();
    return this.db.transaction().execute(async (trx) => {
      await this.refresh(trx, appId, deviceId, now, 'write');
      const wanted = new Set(messageIds);
      const found = new Set(await this.messages.markRead(trx, deviceId, [...wanted], now));
      const missing = [...wanted].find((id) => !found.has(id));
      if (missing !== undefined) throw new NotFoundError(`message ${JSON.stringify(missing)}`);
      return (await this.messages.streamCounts(trx, deviceId, now)).unread;
    });
  }

  /** Deletes a message from the stream for good. Answers the unread count. */
  async delete(appId: string, deviceId: string, messageId: string): Promise<number> {
    const now = this.clock.now();
    return this.db.transaction().execute(async (trx) => {
      await this.refresh(trx, appId, deviceId, now, 'write');
      if (!(await this.messages.hide(trx, deviceId, messageId, now))) throw new NotFoundError('message');
      return (await this.messages.streamCounts(trx, deviceId, now)).unread;
    });
  }

  /**
   * Counts impressions of messages the device has had in its stream (all or nothing: an unknown id is a 404). They
   * add to counts, so a retry counts again unless it carries the first request's Idempotency-Key.
   */
  async recordImpressions(
    appId: string,
    deviceId: string,
    impressions: Impression[],
    idempotency?: IdempotentRequest<void>,
  ): Promise<void | Replay> {
    const now = this.clock.now();
    return this.db.transaction().execute(async (trx) => {
      const replay = await this.idempotency.claim(trx, appId, idempotency);
      if (replay) return replay;
      await this.refresh(trx, appId, deviceId, now, 'write');
      const counts = countImpressions(impressions);
      const found = new Set(await this.messages.addImpressions(trx, deviceId, counts));
      const missing = [...counts.keys()].find((id) => !found.has(id));
      if (missing !== undefined) throw new NotFoundError(`message ${JSON.stringify(missing)}`);
      await this.idempotency.store(trx, appId, idempotency, undefined);
    });
  }

  /**
   * Checks the device (404 unknown; an erased one reads an empty stream and may change nothing: 451) and adds to its
   * stream the live messages whose audience selects it now.
   */
  private async refresh(trx: Transaction<Database>, appId: string, deviceId: string, now: Date, access: 'read' | 'write') {
    // shared lock: an erase (which clears the stream) cannot commit between this check and the rows added below
    const device = await this.devices.lock(trx, appId, deviceId, 'share');
    if (!device) throw new NotFoundError('device');
    if (device.erased_at) {
      if (access === 'write') throw new ErasedError();
      return;
    }
    const open = await this.messages.openAudiences(trx, appId, deviceId, now);
    const matched = await this.devices.audiencesContaining(trx, appId, deviceId, open, now);
    await this.messages.addOpenToStream(trx, appId, deviceId, matched, now);
  }
}

/** A stream cursor's position; an unknown or foreign cursor is a 404, as for the other cursor pages. */
function positionOf(position: string[] | null): StreamPosition {
  const [at, id] = position ?? [];
  // a cursor is not signed: a forged time outside PostgreSQL's range must be refused here, not fail the query
  const publishAt = at === undefined ? null : parseIsoInstant(at);
  if (id === undefined || !isUuid(id) || publishAt === null) throw new NotFoundError('cursor');
  return { publishAt, id };
}
