import type { StreamRow } from '../db/repositories/messages.js';
import type { CutNotification } from '../db/repositories/notifications.js';
import type {
  Audience,
  AuditLogRow,
  LiveActivityChannel,
  Notification,
  TemplateVersionRow,
  WebhookAttempt,
  WebhookEndpoint,
} from '../db/schema.js';
import type { TemplateWithContent } from '../db/repositories/templates.js';
import { auditRecord } from '../domain/audit.js';
import type { DeviceLiveActivities } from '../db/repositories/live-activities.js';
import { estimatedFinish } from '../domain/campaign.js';
import { parseMetric } from '../domain/ab-test.js';
import type { NotificationEngagement } from '../services/activity.js';
import type { DeliveryOptionsInput } from '../domain/delivery-options.js';
import type { ScheduleInput } from '../domain/notification-request.js';
import type { MessageRecord } from '../services/messages.js';
import type { EntrantHistory, JourneyRecord } from '../services/journeys.js';
import { historyView } from '../domain/journey-history.js';
import type { StepCounts } from '../db/repositories/journeys.js';

/** ISO 8601, UTC, milliseconds — the only timestamp format the API speaks. */
export const iso = (d: Date | string | null | undefined): string | null => (d == null ? null : new Date(d).toISOString());

/** The create answer: exactly the record fields of the contract, `notification` being what was submitted. */
export function createdNotificationResponse(n: CutNotification) {
  return {
    id: n.id,
    created_at: iso(n.created_at)!,
    state: n.state,
    to: { id: n.audience_id, type: 'Audience' as const },
    notification: submittedNotification(n.request),
    journey: journeyOf(n),
  };
}

/** The journey step that sent a notification, or undefined (src/services/journey-engine.ts stores it with the request). */
const journeyOf = (n: Pick<Notification, 'request'>) => (n.request as { journey?: { id: string; version: number; step: string } }).journey;

type SubmittedFields = { to: unknown; payload: unknown; localized?: unknown; cap?: boolean } & DeliveryOptionsInput &
  ScheduleInput &
  AbInput;
type AbInput = { variants?: unknown; test_fraction?: number; holdout_fraction?: number; winner?: unknown };

/**
 * What was submitted, in the one shape of every record: `{to, payload, …options}`. A notification stores its
 * fields as the request schema parsed them (older ones carry no delivery options); a transactional send stores
 * its whole request, whose payload and options sit in its own `notification` and whose extra filters go beside `to`.
 */
function submittedNotification(stored: Notification['request']) {
  const request = stored as unknown as SubmittedFields | { to: unknown; notification: SubmittedFields; extra_filters?: unknown[] };
  const { expires_at, ttl, priority, payload, localized, cap } = 'notification' in request ? request.notification : request;
  // a transactional send has extra filters and no schedule; a notification the reverse
  const { send_at, local_time, throttle, quiet_hours } = 'notification' in request ? ({} as ScheduleInput) : request;
  const extra_filters = 'notification' in request ? request.extra_filters : undefined;
  const { variants, test_fraction, holdout_fraction, winner } = 'notification' in request ? ({} as AbInput) : request;
  return {
    to: request.to,
    extra_filters,
    // an A/B test was submitted with variants, its payload the first's
    payload: variants ? undefined : payload,
    localized,
    variants,
    test_fraction,
    holdout_fraction,
    winner,
    expires_at,
    ttl,
    priority,
    send_at,
    local_time,
    throttle,
    quiet_hours,
    cap,
  };
}

/** The stored record with its delivery state and counters. */
export function notificationResponse(n: Notification) {
  return {
    ...createdNotificationResponse(n),
    updated_at: iso(n.updated_at)!,
    devices_targeted: n.devices_targeted,
    devices_not_allowed: n.devices_not_allowed,
    pushes_succeeded: n.pushes_succeeded,
    pushes_failed: n.pushes_failed,
    tokens_invalidated: n.tokens_invalidated,
    pushes_expired: n.pushes_expired,
    pushes_capped: n.pushes_capped,
    expires_at: iso(n.expires_at),
    priority: n.priority,
    published_at: iso(n.published_at),
    finished_at: iso(n.finished_at),
    failure_reason: n.failure_reason,
    group: n.send_group,
    // a best-time send's: its first wave, once cut
    send_at: iso(n.send_at ?? n.best_time_first_at),
    local_time: n.local_plan !== null && n.local_plan.wallTime !== null,
    skipped_past_local_time: n.skipped_past_local_time,
    skipped_quiet_hours: n.skipped_quiet_hours,
    throttle: n.throttle_per_minute === null ? null : { per_minute: n.throttle_per_minute },
    canceled_at: iso(n.canceled_at),
    estimated_finish_at: iso(estimatedFinish(n)),
  };
}

/**
 * GET /v6/stats/notifications/:id/events. Opens: `direct_opens` (tapped), `indirect_opens` (opened without a
 * tap), `influenced_opens` (the two together), `opens` (devices that opened, either way); conversions keyed as
 * events are in filter names (`<name>` for SDK events, `<source>.<name>` otherwise).
 */
export function notificationEventsResponse({ notification: n, opens, conversions, failedByReason, abTest }: NotificationEngagement) {
  return {
    id: n.id,
    audience_id: n.audience_id,
    message_id: n.message_id,
    push_text: typeof (n.payload as { alert?: unknown }).alert === 'string' ? (n.payload as { alert: string }).alert : null,
    published_time: iso(n.published_at),
    direct_opens: opens.direct,
    indirect_opens: opens.indirect,
    influenced_opens: opens.direct + opens.indirect,
    opens: opens.devices,
    pushes_succeeded: n.pushes_succeeded,
    pushes_rejected: n.pushes_failed,
    pushes_rejected_by_reason: failedByReason,
    pushes_expired: n.pushes_expired,
    pushes_capped: n.pushes_capped,
    devices_not_allowed: n.devices_not_allowed,
    event_conversions: Object.fromEntries(conversions.map((c) => [eventKey(c), c.count])),
    ...(abTest && { ab_test: abTestStats(n, abTest) }),
    journey: journeyOf(n),
  };
}

/** The share of `part` in `whole`, 0 when there is none (rounded to 4 places). */
const rate = (part: number, whole: number) => (whole > 0 ? Math.round((part / whole) * 10_000) / 10_000 : 0);

/** `part` per `whole`, 0 when there is none (unrounded: a lift divides two of them). */
const ratio = (part: number, whole: number) => (whole > 0 ? part / whole : 0);

/** How much more `rate` is than the holdout's `base`, as a share of it (0.25: a quarter more); null when `base` is 0. */
const lift = (rate: number, base: number) => (base > 0 ? Math.round(((rate - base) / base) * 10_000) / 10_000 : null);

/**
 * An A/B test's figures: each variant's test share (pushes sent, direct opens, devices that opened, conversions per
 * event, app opens in the window, and their rates per push sent), the rest's (sent the winner), and the holdout's
 * (sent nothing: its devices, those that opened the app and their conversions in the same window after the test's
 * fan-out met them), with each variant's lift over the holdout's rates.
 */
function abTestStats(n: Notification, { test, figures, appOpens, windowHours }: NonNullable<NotificationEngagement['abTest']>) {
  const eventsOf = (bucket: number) => figures.conversions.filter((c) => c.bucket === bucket);
  const share = (bucket: number) => {
    const f = figures.buckets.find((b) => b.bucket === bucket);
    const sent = f?.sent ?? 0;
    const events = eventsOf(bucket);
    return {
      sent,
      failed: f?.failed ?? 0,
      direct_opens: f?.direct_opens ?? 0,
      opened: f?.opened ?? 0,
      direct_open_rate: rate(f?.direct_opens ?? 0, sent),
      conversions: Object.fromEntries(events.map((c) => [eventKey(c), c.count])),
      conversion_rates: Object.fromEntries(events.map((c) => [eventKey(c), rate(c.count, sent)])),
    };
  };
  const appOpened = (bucket: number) => appOpens.find((a) => a.bucket === bucket)?.app_opened ?? 0;
  const holdoutDevices = n.ab_holdout;
  const holdoutEvents = new Map(eventsOf(-1).map((c) => [eventKey(c), c.count]));
  const holdoutAppRate = ratio(appOpened(-1), holdoutDevices);
  const metric = test.winner === 'manual' ? null : parseMetric(test.winner.metric);
  const variant = (v: number) => {
    const s = share(v);
    const appRate = ratio(appOpened(v), s.sent);
    // the winner's event always, with those either side counted
    const events = new Set([
      ...(metric?.kind === 'conversions' ? [metric.event] : []),
      ...Object.keys(s.conversions),
      ...holdoutEvents.keys(),
    ]);
    return {
      variant: v,
      ...s,
      app_opened: appOpened(v),
      app_open_rate: rate(appOpened(v), s.sent),
      lift: {
        app_opens: lift(appRate, holdoutAppRate),
        conversions: Object.fromEntries(
          [...events].sort().map((e) => [e, lift(ratio(s.conversions[e] ?? 0, s.sent), ratio(holdoutEvents.get(e) ?? 0, holdoutDevices))]),
        ),
      },
    };
  };
  const waiting = n.ab_stage === 'waiting' && n.next_due_at instanceof Date && Number.isFinite(n.next_due_at.getTime());
  return {
    stage: n.ab_stage ?? ('test' as const),
    metric: test.winner === 'manual' ? ('manual' as const) : test.winner.metric,
    winner_due_at: waiting ? iso(n.next_due_at) : null,
    winner: n.ab_winner,
    winner_picked_at: iso(n.ab_picked_at),
    test_fraction: test.test_fraction,
    holdout_fraction: test.holdout_fraction ?? 0,
    window_hours: windowHours,
    variants: test.variants.map((_, v) => variant(v)),
    rest: { variant: n.ab_winner, ...share(-2) },
    holdout: {
      devices: holdoutDevices,
      app_opened: appOpened(-1),
      app_open_rate: rate(appOpened(-1), holdoutDevices),
      conversions: Object.fromEntries(holdoutEvents),
      conversion_rates: Object.fromEntries([...holdoutEvents].map(([k, c]) => [k, rate(c, holdoutDevices)])),
    },
  };
}

/** An event's name as filters spell it: `<name>` for SDK events, `<source>.<name>` otherwise. */
export const eventKey = (e: { source: string; name: string }) => (e.source ? `${e.source}.${e.name}` : e.name);

export function audienceResponse(a: Audience) {
  return { name: a.name, created_at: iso(a.created_at)!, updated_at: iso(a.updated_at)!, id: a.id, test: a.test };
}

/** A message record: the create answer's fields (`message` as submitted) with what it shows and when. */
export function messageResponse({ message: m, state }: MessageRecord) {
  return {
    id: m.id,
    created_at: iso(m.created_at)!,
    state,
    to: { id: m.audience_id, type: 'Audience' as const },
    message: m.request,
    notification_id: m.notification_id,
    title: m.title,
    text: m.text,
    url: m.url,
    type: m.type,
    custom: m.custom,
    send_at: iso(m.send_at),
    publish_at: iso(m.publish_at)!,
    unpublish_at: iso(m.unpublish_at),
    expires_at: iso(m.expires_at)!,
    canceled_at: iso(m.canceled_at),
  };
}

/** A message in a device's stream, with whether that device has read it. */
export function streamMessageView(r: StreamRow) {
  return {
    id: r.id,
    title: r.title,
    text: r.text,
    url: r.url,
    type: r.type,
    custom: r.custom,
    created_at: iso(r.created_at)!,
    publish_at: iso(r.publish_at)!,
    unpublish_at: iso(r.unpublish_at),
    read: r.read_at !== null,
    read_at: iso(r.read_at),
  };
}

/** A Live Activity push: what it targets, the request as submitted, and its delivery counters. */
export function liveActivityResponse(n: Notification) {
  const ref = n.live_activity!;
  const r = notificationResponse(n);
  return {
    id: r.id,
    created_at: r.created_at,
    updated_at: r.updated_at,
    state: n.state,
    event: ref.event,
    activity_type: ref.activity_type,
    activity_id: ref.activity_id,
    channel: ref.channel,
    live_activity: n.request,
    devices_targeted: r.devices_targeted,
    pushes_succeeded: r.pushes_succeeded,
    pushes_failed: r.pushes_failed,
    tokens_invalidated: r.tokens_invalidated,
    pushes_expired: r.pushes_expired,
    expires_at: r.expires_at,
    priority: r.priority,
    send_at: r.send_at,
    published_at: r.published_at,
    finished_at: r.finished_at,
    canceled_at: r.canceled_at,
    failure_reason: r.failure_reason,
  };
}

/** A device's Live Activity tokens, as its record shows them. */
export function deviceLiveActivitiesView(la: DeviceLiveActivities) {
  return {
    live_activities: la.activities.map((a) => ({
      activity_id: a.activity_id,
      activity_type: a.activity_type,
      token: a.token,
      updated_at: iso(a.updated_at)!,
    })),
    live_activity_start_tokens: la.startTokens.map((s) => ({
      activity_type: s.activity_type,
      token: s.token,
      updated_at: iso(s.updated_at)!,
    })),
  };
}

export function liveActivityChannelView(c: LiveActivityChannel) {
  return { id: c.channel_id, development: c.development, message_storage_policy: c.message_storage_policy, created_at: iso(c.created_at)! };
}

/** A row of the audit log: the document `pushd audit` prints too. */
export const auditEntryView = (r: AuditLogRow) => auditRecord(r);
/**
 * A journey with its counters: the trigger's, each step's of the current version (a split's per path), then each
 * step's of earlier versions the current one no longer has (with the last version that had it).
 */
export function journeyResponse({ journey: j, counts, retired, webhookSecret }: JourneyRecord) {
  const of = (step: string): StepCounts =>
    counts.get(step) ?? { entered: 0, waiting: 0, passed: 0, sent: 0, failed: 0, converted: 0, exited: 0, skipped: 0, filtered: 0 };
  const trigger = of('');
  const d = j.definition;
  return {
    id: j.id,
    name: j.name,
    state: j.state,
    exiting: j.exiting,
    version: j.version,
    trigger: d.trigger,
    entry_filters: d.entry_filters,
    re_entry: d.re_entry,
    exit_on: d.exit_on,
    steps: d.steps as unknown as Record<string, unknown>[],
    created_at: iso(j.created_at)!,
    updated_at: iso(j.updated_at)!,
    ...(webhookSecret !== undefined && { webhook_secret: webhookSecret }),
    counts: {
      trigger: { entered: trigger.entered, skipped: trigger.skipped, filtered: trigger.filtered, converted: trigger.converted },
      steps: [...d.steps, ...retired].map((s) => {
        const { entered, waiting, passed, sent, failed, converted, exited } = of(s.id);
        const paths =
          'paths' in s &&
          s.paths.map((p) => {
            const path = of(`${s.id}/${p.name}`);
            return { name: p.name, percent: p.percent, entered: path.entered, converted: path.converted };
          });
        const version = 'version' in s && s.version;
        return {
          id: s.id,
          type: s.type,
          entered,
          waiting,
          passed,
          sent,
          failed,
          converted,
          exited,
          ...(paths && { paths }),
          ...(version && { version }),
        };
      }),
    },
  };
}

/** An entry of an entrant into a journey, with its history and the deliveries of what it was sent. */
export function entrantHistoryResponse({ entrant: e, deliveries }: EntrantHistory) {
  const key = e.entrant_key.slice(2);
  return {
    entrant: e.entrant_key.startsWith('u:') ? { user_id: key } : { device_id: key },
    device_id: e.device_id,
    version: e.version,
    entered_at: iso(e.entered_at)!,
    step: e.step_id,
    phase: e.phase,
    due_at: iso(e.due_at),
    outcome: e.outcome,
    left_at: iso(e.left_at),
    history: e.history.map((h) => ({ ...historyView(h), ...(h.n !== undefined && { deliveries: deliveries.get(h.n) ?? [] }) })),
  };
}

/** A webhook endpoint as the API shows it: never its secret, which only a create or a rotation answers (`secret`). */
export function webhookResponse(e: WebhookEndpoint & { plain_secret?: string }) {
  return {
    id: e.id,
    url: e.url,
    events: e.events,
    description: e.description,
    enabled: e.enabled,
    disabled_reason: e.disabled_reason,
    failing_since: iso(e.failing_since),
    created_at: iso(e.created_at)!,
    updated_at: iso(e.updated_at)!,
    ...(e.plain_secret !== undefined ? { secret: e.plain_secret } : {}),
  };
}

export function webhookAttemptResponse(a: WebhookAttempt) {
  return { at: iso(a.at)!, events: a.events, status: a.status, latency_ms: a.latency_ms, error: a.error, snippet: a.snippet };
}

export function templateResponse(t: TemplateWithContent) {
  return {
    id: t.id,
    name: t.name,
    version: t.version,
    content_version: t.content_version,
    payload: t.payload,
    localized: t.localized,
    created_at: iso(t.created_at)!,
    updated_at: iso(t.updated_at)!,
  };
}

export function templateVersionResponse(v: TemplateVersionRow) {
  return { version: v.version, payload: v.payload, localized: v.localized, created_at: iso(v.created_at)! };
}
