import type { CutNotification } from '../db/repositories/notifications.js';
import type { Notification } from '../db/schema.js';
import { namesFewDevices } from '../domain/audience-spec.js';
import type { Actor, AuditDetails } from '../domain/audit.js';
import type { DeliveryOptions } from '../domain/delivery-options.js';
import type { Filter } from '../domain/filters.js';
import type { LiveActivityRef } from '../domain/live-activity.js';
import { targetOf, type NotificationRequest } from '../domain/notification-request.js';
import type { TemplateData } from '../domain/template-data.js';
import type { NewBatch } from '../domain/batches.js';

/** The shapes a notification is created in, and the rules that sort a creation (grouped, audited). */

export type NotificationFields = NotificationRequest['notification'];

/** The journey step a notification was sent by. */
export interface JourneyTag {
  id: string;
  version: number;
  step: string;
}

/** An audience a notification goes to: its id, and its filters (null: every device). */
export interface ResolvedAudience {
  id: string;
  filters: Filter[] | null;
}

/** The most devices a send naming them (a journey's batch) is cut for at once, as a fan-out page would be read. */
export const NAMED_MAX_DEVICES = 10_000;

/** A notification stored in its transaction, and its batches when it was cut at once (to enqueue after commit). */
export interface CreatedNotification<N extends CutNotification = Notification> {
  notification: N;
  batchIds: string[] | null;
  /**
   * its batches with their devices' tokens, when the statement that cut them read those: sent without the queue, all
   * at once, or (`journey`, a journey's batch of more than DIRECT_AUDIENCE_MAX_DEVICES) in the journeys' turns
   */
  sendable?: { batches: NewBatch[]; tokens: ReadonlyMap<string, string>; journey?: boolean };
}

export interface UnicastItem {
  appId: string;
  request: NotificationRequest;
  now: Date;
  options: DeliveryOptions;
  actor: Actor;
}

/** What the audit log says of a notification created: the devices it was cut for, unknown until its fan-out if not. */
export const createdDetails = (n: Pick<Notification, 'id' | 'fanout_done' | 'devices_targeted'>): AuditDetails['notification.created'] => ({
  notification_id: n.id,
  audience_size: n.fanout_done ? n.devices_targeted : null,
});

/**
 * Whether a creation goes in the audit log as well as on its row: a broadcast (every device, an audience, filters
 * that name no few devices) is a change of consequence; one to a few named devices or users keeps its actor on its
 * own row alone (`GET /v6/audit?notification_id=` answers from there), or every message would be copied there.
 */
export function isAuditedCreation(to: NotificationFields['to']): boolean {
  const target = targetOf(to);
  return target.kind !== 'filters' || !namesFewDevices(target.filters);
}

/**
 * Whether a request is the common small shape that is created in groups: to a few named devices or users
 * (filters), now, at full speed, without a collapse_key (which may replace a notification already sending).
 */
export function isUnicast(request: NotificationRequest): boolean {
  const n = request.notification;
  const target = targetOf(n.to);
  return (
    target.kind === 'filters' &&
    namesFewDevices(target.filters) &&
    n.send_at === undefined &&
    !n.local_time &&
    n.throttle === undefined &&
    !n.quiet_hours &&
    !n.variants &&
    typeof n.payload.collapse_key !== 'string'
  );
}

/**
 * The create answer: the notification as accepted, `scheduled` as the public API answers, whether it waits for its
 * send time or was cut into its batches at once (then stored `sending`).
 */
export const accepted = <T extends CutNotification>(n: T): T => ({ ...n, state: 'scheduled' });

/** How `NotificationService`'s named inserts store a notification: its audience and timing, and what its caller adds. */
export interface InsertSpec {
  /** none: `fields.to`'s filters name the devices (a journey's batch) */
  audience?: ResolvedAudience;
  now: Date;
  options: DeliveryOptions;
  messageId?: string;
  /** a Live Activity push (its payload Apple's `{aps}`), stored with the request it came as */
  liveActivity?: { ref: LiveActivityRef; request: Record<string, unknown> };
  /** a journey's send: the journey, version and step, stored with the request and shown with the record */
  journey?: JourneyTag;
  /** what its templates render with, when not only the request's (a journey's entrants' events) */
  templateData?: TemplateData | null;
  /** who created it, kept on its row */
  actor?: Actor;
}
