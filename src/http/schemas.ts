import { z } from 'zod';

/** `?per=&page=` of the offset-paged lists (audiences, notifications). */
export const pageQuery = z.object({
  per: z.coerce.number().int().min(1).max(1000).default(50),
  page: z.coerce.number().int().min(1).max(1_000_000).default(1),
});

export const errorResponse = z.object({ error: z.string() });

const timestamp = z.string();

/** A notification record as `GET /v6/notifications/:id` answers it (src/http/serialize.ts builds it). */
export const notificationRecord = z.object({
  id: z.string(),
  created_at: timestamp,
  state: z.enum(['scheduled', 'sending', 'sent', 'failed']),
  to: z.object({ id: z.string(), type: z.literal('Audience') }),
  notification: z.object({ to: z.unknown(), payload: z.unknown() }),
  updated_at: timestamp,
  devices_targeted: z.number().int(),
  pushes_succeeded: z.number().int(),
  pushes_failed: z.number().int(),
  tokens_invalidated: z.number().int(),
  published_at: timestamp.nullable(),
  finished_at: timestamp.nullable(),
  failure_reason: z.string().nullable(),
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
