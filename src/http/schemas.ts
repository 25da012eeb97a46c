import { z } from 'zod';
import { NOTIFICATION_STATES } from '../domain/notification-request.js';

/** `?per=&page=` of the offset-paged lists (audiences, notifications). */
export const pageQuery = z.object({
  per: z.coerce.number().int().min(1).max(1000).default(50),
  page: z.coerce.number().int().min(1).max(1_000_000).default(1),
});

export const errorResponse = z.object({ error: z.string() });

const timestamp = z.string();

/** The answer to a create: the record fields of the contract (src/http/serialize.ts builds it). */
export const createdNotificationRecord = z.object({
  id: z.string(),
  created_at: timestamp,
  state: z.enum(NOTIFICATION_STATES),
  // id: null for a transactional send, which names its devices instead of an audience
  to: z.object({ id: z.string().nullable(), type: z.literal('Audience') }),
  notification: z.object({
    to: z.unknown(),
    payload: z.unknown(),
    // the delivery options as submitted (src/domain/delivery-options.ts)
    expires_at: z.string().optional(),
    ttl: z.number().int().optional(),
    priority: z.enum(['high', 'normal']).optional(),
  }),
});

/** A notification record as `GET /v6/notifications/:id` answers it (src/http/serialize.ts builds it). */
export const notificationRecord = createdNotificationRecord.extend({
  updated_at: timestamp,
  devices_targeted: z.number().int(),
  pushes_succeeded: z.number().int(),
  pushes_failed: z.number().int(),
  tokens_invalidated: z.number().int(),
  /** pushes not sent because the notification expired first */
  pushes_expired: z.number().int(),
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
export const authErrors = { 401: errorResponse, 403: errorResponse, 429: errorResponse } as const;

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

/** A device as GET /v6/devices/:id answers it (src/http/serialize.ts deviceView). */
export const deviceRecord = z.looseObject({
  id: z.string(),
  platform: z.enum(['ios', 'android']),
  token: nullableString,
  push_token: nullableString,
  development: z.boolean(),
  locale: nullableString,
  time_zone: nullableString,
  user_id: nullableString,
  user_email: nullableString,
  tags: z.array(z.string()),
  country: nullableString,
  push_enabled: z.boolean(),
  location: z.object({ latitude: z.number(), longitude: z.number() }).nullable(),
  custom: z.record(z.string(), z.unknown()),
  user_attributes: z.record(z.string(), z.unknown()),
  user_events: z.record(z.string(), z.unknown()),
  installed_at: nullableString,
  erased_at: nullableString,
});
/** What registering a known token answers: the id, the platform and only what the caller itself sent. */
export const writtenDevice = deviceRecord.partial();

export const audienceRecord = z.looseObject({ name: z.string(), created_at: timestamp, updated_at: timestamp, id: z.string() });
export const accepted = z.object({});
