import { z } from 'zod';
import { HISTORY_KINDS } from '../domain/journey-history.js';
import { MESSAGE_STATES } from '../domain/message-stream.js';
import { NOTIFICATION_STATES } from '../domain/notification-request.js';
import { parseIsoDate } from '../domain/date-math.js';
import { isUuid } from '../domain/cursor.js';
import { NotFoundError } from '../domain/errors.js';

/** A query's instant: an ISO 8601 date or date-time, read as a Date. */
export const isoDateQuery = z
  .string()
  .refine((s) => parseIsoDate(s) !== null, 'must be an ISO 8601 date')
  .transform((s) => parseIsoDate(s)!);

/** `?per=&page=` of the offset-paged lists (audiences, notifications). */
export const pageQuery = z.object({
  per: z.coerce.number().int().min(1).max(1000).default(50),
  page: z.coerce.number().int().min(1).max(1_000_000).default(1),
});

export const errorResponse = z.object({ error: z.string() });

/**
 * A path's resource id: a UUID, or the answer is the 404 an unknown id gets (`<what> not found`, from the error
 * handler: `isUnknownId`), so a malformed id tells a caller no more than a foreign one and never reaches a uuid column.
 */
export const pathId = (what: string) => z.string().refine(isUuid, { error: new NotFoundError(what).message, params: { unknownId: true } });

/** Whether a validation issue is a `pathId` refusal (the provider keeps the zod issue's fields in `params`). */
export const isUnknownId = (issue: { params?: Record<string, unknown> }): boolean =>
  (issue.params?.params as { unknownId?: boolean } | undefined)?.unknownId === true;

const timestamp = z.string();

/** The journey step that sent a notification (src/services/journey-engine.ts); absent for any other notification. */
export const journeyTag = z.object({ id: z.string(), version: z.number().int(), step: z.string() }).optional();

/** The answer to a create: the record fields of the contract (src/http/serialize.ts builds it). */
export const createdNotificationRecord = z.object({
  id: z.string(),
  created_at: timestamp,
  state: z.enum(NOTIFICATION_STATES),
  // id: null for a transactional send, which names its devices instead of an audience
  to: z.object({ id: z.string().nullable(), type: z.literal('Audience') }),
  notification: z.object({
    to: z.unknown(),
    /** a transactional send's extra filters, as submitted (its `to` is `{field, value}`) */
    extra_filters: z.array(z.unknown()).optional(),
    payload: z.unknown(),
    /** content per language, as submitted (src/domain/localized.ts) */
    localized: z.unknown().optional(),
    // the delivery options as submitted (src/domain/delivery-options.ts)
    expires_at: z.string().optional(),
    ttl: z.number().int().optional(),
    priority: z.enum(['high', 'normal']).optional(),
    // when and how fast, as submitted (src/domain/schedule.ts)
    send_at: z.string().optional(),
    local_time: z.boolean().optional(),
    throttle: z.object({ per_minute: z.number().int() }).optional(),
    quiet_hours: z.union([z.literal(false), z.object({ start: z.string(), end: z.string(), then: z.enum(['hold', 'drop']) })]).optional(),
    // an A/B test, as submitted (src/domain/ab-test.ts)
    variants: z.unknown().optional(),
    test_fraction: z.number().optional(),
    holdout_fraction: z.number().optional(),
    winner: z.unknown().optional(),
    /** whether the app's frequency caps apply, as submitted */
    cap: z.boolean().optional(),
  }),
  journey: journeyTag,
});

/** A notification record as `GET /v6/notifications/:id` answers it (src/http/serialize.ts builds it). */
export const notificationRecord = createdNotificationRecord.extend({
  updated_at: timestamp,
  devices_targeted: z.number().int(),
  /** matched devices not sent the push because it is visible and their notifications are Disabled */
  devices_not_allowed: z.number().int(),
  pushes_succeeded: z.number().int(),
  pushes_failed: z.number().int(),
  tokens_invalidated: z.number().int(),
  /** pushes not sent because the notification expired first */
  pushes_expired: z.number().int(),
  /** devices not sent to because they had reached one of the app's frequency caps */
  pushes_capped: z.number().int(),
  /** the instant after which nothing is sent (a ttl counted from created_at); null: no expiry */
  expires_at: timestamp.nullable(),
  priority: z.enum(['high', 'normal']).nullable(),
  published_at: timestamp.nullable(),
  finished_at: timestamp.nullable(),
  failure_reason: z.string().nullable(),
  /** a transactional send's group */
  group: z.string().nullable(),
  /** when it goes out: the instant asked for, or for a local-time send the first wave */
  send_at: timestamp.nullable(),
  local_time: z.boolean(),
  /** devices skipped by a local-time send because their zone's wall time had passed when it was created */
  skipped_past_local_time: z.number().int(),
  skipped_quiet_hours: z.number().int(),
  throttle: z.object({ per_minute: z.number().int() }).nullable(),
  canceled_at: timestamp.nullable(),
  /** when the last push should be out, from the pace (or the next local-time wave); null when unknown or finished */
  estimated_finish_at: timestamp.nullable(),
});

/** A device as registered or updated (`{device: {...}}`); the fields are checked by the device service. */
export const deviceBody = z.object(
  { device: z.record(z.string(), z.unknown(), { error: 'must be an object' }) },
  { error: 'body must be {"device": {...}}' },
);

/** Events a device or user reports (`{events: [...]}`). */
export const eventsBody = z.object(
  { events: z.array(z.unknown(), { error: 'must be an array of {"name", "date"?}' }) },
  { error: 'body must be {"events": [...]}' },
);

// Answers. Records are loose objects: the fields listed are documented (OpenAPI) and checked; a record never
// loses a field it carries.
const nullableString = z.string().nullable();

/** 4xx/5xx answers of a route that needs a key, besides its own. */
export const authErrors = { 401: errorResponse, 403: errorResponse, 429: errorResponse, 503: errorResponse } as const;

/** What any route with a body may answer: invalid (400), over BODY_LIMIT_BYTES (413), not JSON (415). */
export const bodyErrors = { 400: errorResponse, 413: errorResponse, 415: errorResponse } as const;

/**
 * The headers of a create that takes an Idempotency-Key (src/http/idempotency.ts reads and checks it). Loose: the
 * validated headers replace the request's, which must keep the others.
 */
export const idempotencyHeaders = z.looseObject({
  'idempotency-key': z
    .string()
    .optional()
    .describe(
      'Makes a retry safe: 1 to 255 visible ASCII characters, unique per request of the app. The same key with the same ' +
        'request within 24 hours answers the first answer again (status and body, with Idempotent-Replayed: true) and ' +
        'creates nothing; with another request it answers 422.',
    ),
});

/** Fields of a device write that were not stored, with why. */
export const droppedList = z.array(z.object({ field: z.string(), error: z.string() }));
export const nothingValid = z.object({ error: z.string(), dropped: droppedList });

/** Decimal degrees as a string, as the public API's examples give them. */
const coordinate = z.string().describe('decimal degrees, as a string');

/** The device record (src/http/serialize.ts deviceView): the public API's fields first, then ours. */
export const deviceRecord = z.looseObject({
  id: z.string(),
  user_id: nullableString,
  email: nullableString.describe("the user's e-mail address (user_email)"),
  user_email: nullableString,
  push_enabled: z.boolean(),
  push_token: nullableString,
  platform: z.enum(['iOS', 'Android', 'Web', 'Huawei', 'Unknown']).describe('"Unknown" once erased'),
  installed_at: nullableString.describe('when the device registered; null once erased'),
  last_opened: nullableString.describe('the last app open the SDK reported'),
  user_attributes: z.record(z.string(), z.object({ type: z.string(), value: z.unknown() })),
  user_events: z.record(
    z.string(),
    z.object({ count: z.number().int(), first_happened_at: nullableString, last_happened_at: nullableString }),
  ),
  location: z.object({
    gps: z.union([z.object({ lat: coordinate, lng: coordinate }), z.strictObject({})]).describe('{} without a GPS fix'),
    geoip: z.object({ lat: coordinate.nullable(), lng: coordinate.nullable(), city: nullableString, country: nullableString }),
  }),
  tags: z.array(z.string()),
  erased_at: nullableString,
  token: nullableString,
  development: z.boolean(),
  locale: nullableString,
  time_zone: nullableString,
  country: nullableString,
  sdk_location: z.object({ latitude: z.number(), longitude: z.number() }).nullable(),
  custom: z.record(z.string(), z.unknown()),
  created_at: timestamp,
  registered_at: timestamp,
});
/** What a registration that creates a device answers: the record and, once, the device's credential. */
export const createdDevice = deviceRecord.extend({
  credential: z
    .string()
    .optional()
    .describe(
      "the device's secret (docs/identity.md), answered only here: keep it and send it back as device.credential to " +
        'change the token, subscription, platform, development or notifications_allowed with the sdk key',
    ),
});
/** What registering a known token answers: the id, the platform and only what the caller itself sent. */
export const writtenDevice = deviceRecord.partial();

/**
 * A cursor page of devices: clients repeat with `cursor` until a page comes back with no devices, so every page
 * has a cursor, the last ones too (an empty page answers the position it was asked for).
 */
export const devicePage = z.object({
  meta: z.object({ cursor: z.string(), total: z.number().int().describe('devices in the whole listing') }),
  devices: z.array(deviceRecord),
});

export const audienceRecord = z.looseObject({
  name: z.string(),
  created_at: timestamp,
  updated_at: timestamp,
  id: z.string(),
  test: z.boolean(),
});
export const accepted = z.object({});

/** A message record, the answer of create, read, list and cancel (src/http/serialize.ts messageResponse). */
export const messageRecord = z.object({
  id: z.string(),
  created_at: timestamp,
  state: z.enum(MESSAGE_STATES),
  to: z.object({ id: z.string(), type: z.literal('Audience') }),
  /** the message as submitted */
  message: z.record(z.string(), z.unknown()),
  /** the push sent with it */
  notification_id: z.string().nullable(),
  title: z.string(),
  text: nullableString,
  url: nullableString,
  type: z.string(),
  custom: z.record(z.string(), z.unknown()),
  send_at: timestamp.nullable(),
  /** when it enters streams: send_at, or its creation */
  publish_at: timestamp,
  unpublish_at: timestamp.nullable(),
  /** when it is deleted: MESSAGE_RETENTION_DAYS after unpublish_at, or after publish_at without one */
  expires_at: timestamp,
  canceled_at: timestamp.nullable(),
});

/** A message as a device's stream shows it (src/http/serialize.ts streamMessageView). */
export const streamMessage = z.object({
  id: z.string(),
  title: z.string(),
  text: nullableString,
  url: nullableString,
  type: z.string(),
  custom: z.record(z.string(), z.unknown()),
  created_at: timestamp,
  publish_at: timestamp,
  unpublish_at: timestamp.nullable(),
  read: z.boolean(),
  read_at: timestamp.nullable(),
});

/** A Live Activity push as `GET /v6/live-activities/:id` answers it: what it targets, and a notification's counters. */
export const liveActivityRecord = notificationRecord
  .pick({
    id: true,
    created_at: true,
    updated_at: true,
    state: true,
    devices_targeted: true,
    pushes_succeeded: true,
    pushes_failed: true,
    tokens_invalidated: true,
    pushes_expired: true,
    expires_at: true,
    priority: true,
    send_at: true,
    published_at: true,
    finished_at: true,
    canceled_at: true,
    failure_reason: true,
  })
  .extend({
    event: z.enum(['start', 'update', 'end']),
    activity_type: z.string().nullable(),
    activity_id: z.string().nullable(),
    channel: z.string().nullable(),
    live_activity: z.record(z.string(), z.unknown()),
  });

/** A broadcast channel of the app. */
export const liveActivityChannelRecord = z.object({
  id: z.string().describe("APNs' channel id, which the app subscribes its activities to"),
  development: z.boolean(),
  message_storage_policy: z.number().int(),
  created_at: timestamp,
});

/** One row of the audit log (src/domain/audit.ts, auditRecord). */
export const auditEntryRecord = z.object({
  id: z.string(),
  at: timestamp,
  app_id: z.string(),
  action: z.string(),
  actor: z.object({
    key_id: z.string().nullable().describe('the key that made the change; null from the command line'),
    role: z.enum(['read', 'write', 'sdk', 'cli', 'system']),
  }),
  client_address: z.string().nullable(),
  request_id: z.string().nullable(),
  details: z.record(z.string(), z.unknown()).describe('names and ids of what changed, never a secret'),
});

const stepCount = z.number().int();
/** A journey as the API answers it (src/http/serialize.ts builds it): its definition, state, version and counters. */
export const journeyRecord = z.object({
  id: z.string(),
  name: z.string(),
  state: z.enum(['active', 'paused', 'archived']),
  /** archived, and its entrants are still leaving: the workers exit them a batch at a time */
  exiting: z.boolean(),
  version: z.number().int(),
  trigger: z.unknown(),
  entry_filters: z.unknown().optional(),
  re_entry: z.unknown(),
  exit_on: z.array(z.string()),
  steps: z.array(z.record(z.string(), z.unknown())),
  created_at: timestamp,
  updated_at: timestamp,
  /** its webhook steps' signing secret: answered once, by the create or update that first has a webhook step */
  webhook_secret: z.string().optional(),
  counts: z.object({
    /** entrants the trigger entered, skipped (paused, or a re-entry refused), filtered out, and converted (exit_on) */
    trigger: z.object({ entered: stepCount, skipped: stepCount, filtered: stepCount, converted: stepCount }),
    steps: z.array(
      z.object({
        id: z.string(),
        type: z.string(),
        entered: stepCount,
        waiting: stepCount,
        passed: stepCount,
        sent: stepCount,
        failed: stepCount,
        converted: stepCount,
        exited: stepCount,
        /** a split's entrants per path */
        paths: z.array(z.object({ name: z.string(), percent: z.number().int(), entered: stepCount, converted: stepCount })).optional(),
        /** a step of an earlier version the current one no longer has: the last version that had it */
        version: z.number().int().optional(),
      }),
    ),
  }),
});

/** A device's outcome in a notification a journey step sent (src/domain/journey-history.ts, `deliveryOutcome`). */
const deliveryOutcomeRecord = z.object({
  device_id: z.string(),
  outcome: z.enum(['delivered', 'pending', 'scheduled', 'not_delivered', 'canceled', 'not_sent']),
  at: timestamp.optional(),
  reason: z.string().optional(),
});

/** One entry of an entrant's history (src/domain/journey-history.ts, `historyView`). */
const historyRecord = z.object({
  at: timestamp,
  step: z.string(),
  what: z.enum(HISTORY_KINDS),
  event: z.string().optional(),
  until: timestamp.optional(),
  to: z.string().optional(),
  read: z.record(z.string(), z.unknown()).optional(),
  matched: z.boolean().optional(),
  path: z.string().optional(),
  notification_id: z.string().optional(),
  message_id: z.string().optional(),
  /** an update step's count of the entrant's devices it wrote */
  devices_changed: z.number().int().optional(),
  error: z.string().optional(),
  /** a webhook step's answer status (none: no answer) and attempt */
  status: z.number().int().optional(),
  attempt: z.number().int().optional(),
  /** a digest step's count of events */
  count: z.number().int().optional(),
  deliveries: z.array(deliveryOutcomeRecord).optional(),
});

/** One entry of an entrant into a journey, with where it is and its history. */
export const entrantRecord = z.object({
  entrant: z.union([z.object({ user_id: z.string() }), z.object({ device_id: z.string() })]),
  device_id: z.string(),
  version: z.number().int(),
  entered_at: timestamp,
  step: z.string(),
  phase: z.enum(['arrived', 'waiting', 'done']),
  due_at: timestamp.nullable(),
  outcome: z.enum(['completed', 'converted', 'exited', 'failed']).nullable(),
  left_at: timestamp.nullable(),
  history: z.array(historyRecord),
});

export const webhookRecord = z.object({
  id: z.string(),
  url: z.string(),
  events: z.array(z.string()),
  description: z.string(),
  enabled: z.boolean(),
  /** why pushd disabled it (a 410, failing for days); null when enabled or disabled by a key */
  disabled_reason: z.string().nullable(),
  /** since when its requests fail in a row, null while they succeed */
  failing_since: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  /** the signing secret, answered once: by the create and by a rotation */
  secret: z.string().optional(),
});

/** A stored template with the content of one version (its newest unless one was asked for). */
export const templateRecord = z.object({
  id: z.string(),
  name: z.string(),
  /** the newest version: what a send naming the template without a version takes */
  version: z.number().int(),
  /** the version whose content this is */
  content_version: z.number().int(),
  payload: z.record(z.string(), z.unknown()),
  localized: z.record(z.string(), z.record(z.string(), z.unknown())).nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});

export const templateVersionRecord = z.object({
  version: z.number().int(),
  payload: z.record(z.string(), z.unknown()),
  localized: z.record(z.string(), z.record(z.string(), z.unknown())).nullable(),
  created_at: z.string(),
});

export const webhookAttemptRecord = z.object({
  at: z.string(),
  events: z.number().int(),
  status: z.number().int().nullable(),
  latency_ms: z.number().int(),
  error: z.string().nullable(),
  snippet: z.string().nullable(),
});
