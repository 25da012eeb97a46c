import type { Audience, Notification } from '../db/schema.js';

/** ISO 8601, UTC, milliseconds — the only timestamp format the API speaks. */
export const iso = (d: Date | string | null | undefined): string | null => (d == null ? null : new Date(d).toISOString());

/** The create answer: exactly the record fields of the contract. */
export function createdNotificationResponse(n: Notification) {
  const request = n.request as { to: unknown; payload: unknown };
  return {
    id: n.id,
    created_at: iso(n.created_at)!,
    state: n.state,
    to: { id: n.audience_id, type: 'Audience' as const },
    notification: { to: request.to, payload: request.payload },
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
    published_at: iso(n.published_at),
    finished_at: iso(n.finished_at),
    failure_reason: n.failure_reason,
  };
}

export function audienceResponse(a: Audience) {
  return { name: a.name, created_at: iso(a.created_at)!, updated_at: iso(a.updated_at)!, id: a.id };
}
