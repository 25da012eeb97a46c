import type { AuditRepository } from '../db/repositories/audit.js';
import type { Actor } from '../domain/audit.js';
import type { Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { ImpressionCounts, MessagesRepository, MessageWithPush } from '../db/repositories/messages.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { Database } from '../db/schema.js';
import { DIRECT_AUDIENCE_MAX_DEVICES, namesFewDevices } from '../domain/audience-spec.js';
import { ConflictError, NotFoundError } from '../domain/errors.js';
import { messageTiming, messageTypeOf, withMessageId, type MessageRequest } from '../domain/message-request.js';
import { messageState, type MessageState } from '../domain/message-stream.js';
import type { Clock } from '../platform/clock.js';
import { Replay, type IdempotencyKeys, type IdempotentRequest } from './idempotency.js';
import type { ServiceDeps } from './deps.js';
import type { CreatedNotification, JourneyTag, NotificationService, ResolvedAudience } from './notifications.js';

/** A message as the API answers it: the row, the push sent with it, and its state. */
export interface MessageRecord {
  message: MessageWithPush;
  state: MessageState;
}

/**
 * In-app messages, the app's side: create (with the push sent with it), read, list, cancel, statistics. A message
 * targets an audience as a notification does; its push is a notification created in the message's transaction by
 * the notification service, so it is scheduled, paced and expired like any other and carries the message id.
 */
export type MessageServiceDeps = Pick<ServiceDeps, 'db' | 'readDb' | 'repos' | 'clock' | 'idempotency'> & {
  /** creates each message's push */
  notificationService: NotificationService;
  /** MESSAGE_RETENTION_DAYS */
  retentionDays: number;
};

export class MessageService {
  private readonly db: Db;
  private readonly readDb: Db;
  private readonly messages: MessagesRepository;
  private readonly audit: AuditRepository;
  private readonly devices: DevicesRepository;
  private readonly notificationRows: NotificationsRepository;
  private readonly notifications: NotificationService;
  private readonly clock: Clock;
  private readonly idempotency: IdempotencyKeys;
  private readonly retentionDays: number;

  constructor(deps: MessageServiceDeps) {
    this.db = deps.db;
    this.readDb = deps.readDb;
    this.messages = deps.repos.messages;
    this.audit = deps.repos.audit;
    this.devices = deps.repos.devices;
    this.notificationRows = deps.repos.notifications;
    this.notifications = deps.notificationService;
    this.clock = deps.clock;
    this.idempotency = deps.idempotency;
    this.retentionDays = deps.retentionDays;
  }

  /**
   * Stores the message (its audience resolved as a notification's) and its push in one transaction, then releases
   * the push. A message to a few named devices or users is put in their streams now; any other is evaluated
   * against each device when it reads its stream. The answer is the record as created: `scheduled`, as the public
   * API answers.
   */
  async create(
    appId: string,
    request: MessageRequest,
    actor: Actor,
    idempotency?: IdempotentRequest<MessageRecord>,
  ): Promise<MessageRecord | Replay> {
    const now = this.clock.now();
    const checked = this.check(request.message, now);
    const created = await this.db.transaction().execute(async (trx) => {
      const replay = await this.idempotency.claim(trx, appId, idempotency);
      if (replay) return replay;
      const stored = await this.insert(trx, appId, request.message, now, checked);
      await this.audit.recordChange(trx, actor, appId, 'message.created', { message_id: stored.record.message.id });
      await this.idempotency.store(trx, appId, idempotency, stored.record);
      return stored;
    });
    if (created instanceof Replay) return created;
    if (created.notification) await this.notifications.release(created.notification);
    return created.record;
  }

  /**
   * Stores a message and its push in the caller's transaction (a journey's message step, whose step the push is
   * tagged with as a send step's is); the caller releases the push (`NotificationService.release`) once it committed.
   */
  async insertIn(
    trx: Transaction<Database>,
    appId: string,
    m: MessageRequest['message'],
    now: Date,
    journey?: JourneyTag,
  ): Promise<{ record: MessageRecord; notification: CreatedNotification | null }> {
    return this.insert(trx, appId, m, now, this.check(m, now), journey);
  }

  /** The checks that need the clock: the message's times, and its push's options. */
  private check(m: MessageRequest['message'], now: Date) {
    const timing = messageTiming(m, now, this.retentionDays);
    // the push goes to the message's audience at the message's send time
    const pushFields = m.notification && { ...m.notification, to: m.to, send_at: m.send_at };
    const pushOptions = pushFields && this.notifications.checkedOptions(pushFields, now, 'message.notification');
    return { timing, pushFields, pushOptions };
  }

  private async insert(
    trx: Transaction<Database>,
    appId: string,
    m: MessageRequest['message'],
    now: Date,
    { timing, pushFields, pushOptions }: ReturnType<MessageService['check']>,
    journey?: JourneyTag,
  ): Promise<{ record: MessageRecord; notification: CreatedNotification | null }> {
    const audience = await this.notifications.resolveAudience(trx, appId, m.to);
    const named = await this.namedDevices(trx, appId, audience, now);
    const message = await this.messages.insert(trx, {
      appId,
      audienceId: audience.id,
      request: m,
      title: m.title,
      text: m.text ?? null,
      url: m.url ?? null,
      type: messageTypeOf(m),
      custom: m.custom ?? {},
      timing,
      createdAt: now,
      resolved: named !== null,
    });
    if (named) await this.messages.addToStreams(trx, message.id, named);
    let notification: CreatedNotification | null = null;
    if (pushFields && pushOptions) {
      const fields = { ...pushFields, payload: withMessageId(pushFields.payload, message.id) };
      notification = await this.notifications.insertForMessage(trx, appId, fields, {
        audience,
        now,
        options: pushOptions,
        messageId: message.id,
        journey,
      });
    }
    const record: MessageRecord = { message: { ...message, notification_id: notification?.notification.id ?? null }, state: 'scheduled' };
    return { record, notification };
  }

  /**
   * The ids of the devices an audience names when it picks out a few devices or users (as a notification's direct
   * path does), or null for any other audience: those are evaluated against each device when it reads its stream.
   */
  private async namedDevices(trx: Transaction<Database>, appId: string, audience: ResolvedAudience, now: Date): Promise<string[] | null> {
    if (!namesFewDevices(audience.filters)) return null;
    const devices = await this.devices.listAudience(trx, appId, audience.filters, { limit: DIRECT_AUDIENCE_MAX_DEVICES + 1, now });
    return devices.length > DIRECT_AUDIENCE_MAX_DEVICES ? null : devices.map((d) => d.id);
  }

  async get(appId: string, id: string): Promise<MessageRecord> {
    const now = this.clock.now();
    const message = await this.messages.findForApp(this.db, appId, id, now);
    if (!message) throw new NotFoundError('message');
    return { message, state: messageState(message, now) };
  }

  /** The app's messages, newest first. */
  async list(appId: string, page: { per: number; page: number }): Promise<MessageRecord[]> {
    const now = this.clock.now();
    const rows = await this.messages.listForApp(this.readDb, appId, now, page.per, (page.page - 1) * page.per);
    return rows.map((message) => ({ message, state: messageState(message, now) }));
  }

  /**
   * Cancels a message that waits for its send time: it never enters a stream, and its push is canceled with it.
   * One already published (or canceled) cannot be: 409, as for a finished notification.
   */
  async cancel(appId: string, id: string): Promise<MessageRecord> {
    const now = this.clock.now();
    return this.db.transaction().execute(async (trx) => {
      const canceled = await this.messages.cancelScheduled(trx, appId, id, now);
      const message = await this.messages.findForApp(trx, appId, id, now);
      if (!message) throw new NotFoundError('message');
      if (!canceled) throw new ConflictError(`message: it is ${messageState(message, now)} and can no longer be canceled`);
      if (message.notification_id) await this.notificationRows.cancel(trx, appId, message.notification_id);
      return { message, state: 'canceled' };
    });
  }

  /** Impressions over every device, by kind. */
  async impressions(appId: string, id: string): Promise<ImpressionCounts> {
    const { message } = await this.get(appId, id);
    return this.messages.impressionTotals(this.readDb, message);
  }
}
