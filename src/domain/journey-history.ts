/**
 * An entrant's history: what it did at each step and why, one entry a thing that happened, written beside it
 * (`journey_entrant_history`) by the statement that moves it. Stored compact (`t` epoch ms, `s` the step, `k` what
 * happened, a few short fields); the API names them in full (`historyView`).
 */
export const HISTORY_KINDS = [
  /** entered the journey at `s`, by the trigger event `e` (none: through the API) */
  'entered',
  /** began to wait at `s` until `u`; at a wait_for, for the event `e` */
  'waiting',
  /** the event `e` it waited for came; on to `to` */
  'event',
  /** a wait_for's timeout came first; on to `to` */
  'timeout',
  /** a branch's filters read `v` (the values they name) and matched (`to` is then's) or not */
  'branch',
  /** a split put it on the path `p`, to `to` */
  'split',
  /** a send or message step made the notification `n` (and the message `m`) for it */
  'sent',
  /** an update step changed its devices' attributes and tags (`c`: the devices changed) */
  'updated',
  /** a webhook step's request came to the status `st` (none: no answer, `err`) at attempt `a`: on to `to`, or tried again at `u` */
  'webhook',
  /** a digest step's window ended with `x` events `e` of the entrant's; on to `to` */
  'digest',
  /** left converted by the exit event `e` */
  'converted',
  /** left when the journey was archived */
  'exited',
  /** left because its step failed (`err`) */
  'failed',
] as const;
export type HistoryKind = (typeof HISTORY_KINDS)[number];

export interface HistoryEntry {
  t: number;
  s: string;
  k: HistoryKind;
  e?: string;
  u?: number;
  to?: string;
  v?: Record<string, unknown>;
  matched?: boolean;
  p?: string;
  n?: string;
  m?: string;
  c?: number;
  err?: string;
  /** a webhook's answer status and attempt, and the entrant's seq when it arrived at the step (its request id) */
  st?: number;
  a?: number;
  q?: number;
  /** a digest's count, and (on its waiting entry) the entrant's count of the event when the window began */
  x?: number;
  b?: number;
}

/** An entry made at `now` for the step `step`. */
export function historyEntry(now: Date, step: string, k: HistoryKind, detail: Omit<HistoryEntry, 't' | 's' | 'k'> = {}): HistoryEntry {
  return { t: now.getTime(), s: step, k, ...detail };
}

/** The entry as the API shows it. */
export function historyView(h: HistoryEntry) {
  return {
    at: new Date(h.t).toISOString(),
    step: h.s,
    what: h.k,
    ...(h.e !== undefined && { event: h.e }),
    ...(h.u !== undefined && { until: new Date(h.u).toISOString() }),
    ...(h.to !== undefined && { to: h.to }),
    ...(h.v !== undefined && { read: h.v }),
    ...(h.matched !== undefined && { matched: h.matched }),
    ...(h.p !== undefined && { path: h.p }),
    ...(h.n !== undefined && { notification_id: h.n }),
    ...(h.m !== undefined && { message_id: h.m }),
    ...(h.c !== undefined && { devices_changed: h.c }),
    ...(h.err !== undefined && { error: h.err }),
    ...(h.st !== undefined && { status: h.st }),
    ...(h.a !== undefined && { attempt: h.a }),
    ...(h.x !== undefined && { count: h.x }),
  };
}
export type HistoryView = ReturnType<typeof historyView>;

/** A device's outcome in a notification, as the history shows it beside the `sent` entry. */
export interface DeliveryOutcome {
  device_id: string;
  /** delivered; pending (cut, not sent yet); scheduled (held: a send time, quiet hours); not_delivered (see reason); not_sent */
  outcome: 'delivered' | 'pending' | 'scheduled' | 'not_delivered' | 'canceled' | 'not_sent';
  at?: string;
  reason?: string;
}

/** What became of a device in a notification, from its batch and the notification's own state and counters. */
export function deliveryOutcome(r: {
  state: string;
  next_due_at: Date | null;
  skipped_quiet_hours: number;
  device_id: string;
  batch_state: string | null;
  unsent: boolean | null;
  failure_reason: string | null;
  received_at: Date | null;
}): DeliveryOutcome {
  const device_id = r.device_id;
  if (r.received_at) return { device_id, outcome: 'delivered', at: r.received_at.toISOString() };
  if (r.batch_state === 'pending' && r.unsent) return { device_id, outcome: 'pending' };
  if (r.batch_state === 'canceled' || (r.batch_state === null && r.state === 'canceled')) return { device_id, outcome: 'canceled' };
  if (r.batch_state !== null) return { device_id, outcome: 'not_delivered', ...(r.failure_reason && { reason: r.failure_reason }) };
  if (r.state === 'scheduled' && r.next_due_at) return { device_id, outcome: 'scheduled', at: r.next_due_at.toISOString() };
  // in no batch of a notification that was cut: quiet hours (drop) skipped it, or it was not allowed to be sent
  return { device_id, outcome: 'not_sent', ...(Number(r.skipped_quiet_hours) > 0 && { reason: 'quiet_hours' }) };
}
