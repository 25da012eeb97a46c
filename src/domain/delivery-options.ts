import { z } from 'zod';
import { parseIsoDate, parseIsoInstant } from './date-math.js';
import { ValidationError } from './errors.js';

/**
 * How long a notification may wait to be delivered, and how urgently: `expires_at` (an instant) or `ttl`
 * (seconds from creation), and `priority`. The schema fields are spread into the `notification` object of
 * both create requests; the checks that need the clock (`resolveDeliveryOptions`) run when the request is
 * handled, with that operation's `now`.
 */

/** FCM keeps a message at most 28 days (`android.ttl` ceiling), so no expiry may lie further ahead. */
export const MAX_TTL_SECONDS = 2_419_200;

export const PUSH_PRIORITIES = ['high', 'normal'] as const;
export type PushPriority = (typeof PUSH_PRIORITIES)[number];

/** Both expiry forms given: refused whatever the time, at `ttl`. */
export const BOTH_EXPIRIES_ERROR = 'cannot be given with expires_at; give one of them';
const INSTANT_ERROR = 'must be an ISO 8601 date-time with a time zone offset or Z, e.g. 2026-05-01T12:00:00Z';

/** An instant in a request: an ISO 8601 date-time with its offset or Z (expires_at, a message's unpublish_at). */
export const isoInstant = () => z.string({ error: INSTANT_ERROR }).refine((text) => parseIsoInstant(text) !== null, INSTANT_ERROR);

/** Spread into a `notification` object schema: `{...deliveryOptionFields}`. */
export const deliveryOptionFields = {
  expires_at: isoInstant().optional(),
  ttl: z
    .number({ error: `must be an integer number of seconds from 1 to ${MAX_TTL_SECONDS}` })
    .int(`must be an integer number of seconds from 1 to ${MAX_TTL_SECONDS}`)
    // 0 would expire the notification as it is created: nothing could ever be sent.
    .min(1, `must be an integer number of seconds from 1 to ${MAX_TTL_SECONDS}`)
    .max(MAX_TTL_SECONDS, `must be at most ${MAX_TTL_SECONDS} seconds (28 days, FCM's limit)`)
    .optional(),
  priority: z.enum(PUSH_PRIORITIES, { error: 'must be "high" or "normal"' }).optional(),
};

/** Whether the app's frequency caps apply (migration 032 reads it): default yes, for a transactional send no. */
export const capField = { cap: z.boolean({ error: 'must be true or false' }).optional() };

export interface DeliveryOptionsInput {
  expires_at?: string | undefined;
  ttl?: number | undefined;
  priority?: PushPriority | undefined;
}

/** What is stored: an absolute expiry, or a ttl the database adds to the creation time; null when unset. */
export interface DeliveryOptions {
  expiresAt: Date | null;
  ttlSeconds: number | null;
  priority: PushPriority | null;
}

/**
 * The request's options as of `now`. Refuses both expiry forms together, and an `expires_at` that is not in
 * the future or lies more than 28 days ahead; `field` is the path of the object they sit in.
 */
export function resolveDeliveryOptions(input: DeliveryOptionsInput, now: Date, field = 'notification'): DeliveryOptions {
  if (input.expires_at !== undefined && input.ttl !== undefined) throw new ValidationError(`${field}.ttl: ${BOTH_EXPIRIES_ERROR}`);
  let expiresAt: Date | null = null;
  if (input.expires_at !== undefined) {
    expiresAt = parseIsoDate(input.expires_at);
    if (expiresAt === null) throw new ValidationError(`${field}.expires_at: ${INSTANT_ERROR}`);
    if (expiresAt.getTime() <= now.getTime()) throw new ValidationError(`${field}.expires_at: must be in the future`);
    if (expiresAt.getTime() - now.getTime() > MAX_TTL_SECONDS * 1000)
      throw new ValidationError(`${field}.expires_at: must be at most 28 days ahead (FCM keeps a message at most 28 days)`);
  }
  return { expiresAt, ttlSeconds: input.ttl ?? null, priority: input.priority ?? null };
}

/** The instant a resolved expiry stands for when the notification is created at `createdAt`. */
export function expiryOf(options: DeliveryOptions, createdAt: Date): Date | null {
  if (options.ttlSeconds !== null) return new Date(createdAt.getTime() + options.ttlSeconds * 1000);
  return options.expiresAt;
}

/** Whole seconds left before `expiresAt` at `now`, never negative (what FCM's `android.ttl` takes). */
export function secondsLeft(expiresAt: Date, now: Date): number {
  return Math.max(0, Math.floor((expiresAt.getTime() - now.getTime()) / 1000));
}

/** Milliseconds left before `expiresAt` at `now`, never negative; undefined without an expiry. */
export function msLeft(expiresAt: Date | null, now: Date): number | undefined {
  return expiresAt === null ? undefined : Math.max(0, expiresAt.getTime() - now.getTime());
}

/** Whether a push is past its expiry at `now`: from that instant on it is no longer sent. */
export function isExpired(expiresAt: Date | null, now: Date): boolean {
  return expiresAt !== null && now.getTime() >= expiresAt.getTime();
}
