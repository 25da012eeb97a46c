import { z } from 'zod';
import { deliveryOptionFields, isoInstant } from './delivery-options.js';
import { parseIsoInstant } from './date-math.js';
import { ValidationError } from './errors.js';
import { toSchema } from './notification-request.js';
import { templatedTexts, templateProblems } from './templates.js';
import { CREDENTIAL_FIELD } from './device-input.js';

/**
 * iOS Live Activities (ActivityKit push notifications): the tokens a device registers, the request that starts,
 * updates or ends an activity, and the APNs payload it becomes. Pure.
 */

export const LIVE_ACTIVITY_EVENTS = ['start', 'update', 'end'] as const;
export type LiveActivityEvent = (typeof LIVE_ACTIVITY_EVENTS)[number];

/** What a stored Live Activity push targets: `notifications.live_activity`. */
export interface LiveActivityRef {
  event: LiveActivityEvent;
  /** the ActivityAttributes type (a start goes to its push-to-start tokens) */
  activity_type: string | null;
  /** the activity an update or end goes to (its update tokens); null for a start and a broadcast */
  activity_id: string | null;
  /** the broadcast channel (APNs' channel id) it went to instead of tokens */
  channel: string | null;
}

/** Activities one device holds tokens of at most, and activity types with a push-to-start token. */
export const MAX_ACTIVITIES_PER_DEVICE = 50;
export const MAX_START_TYPES_PER_DEVICE = 20;
/** ActivityKit's tokens are hex: APNs device tokens are 32 bytes, activity tokens longer; this bounds them. */
const TOKEN = /^(?:[0-9a-fA-F]{2}){16,256}$/;
/** A Swift type name (what `attributes-type` names), possibly module-qualified. */
const ACTIVITY_TYPE = /^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$/;
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

export const liveActivityToken = z
  .string({ error: 'must be a hex string' })
  .regex(TOKEN, 'must be an even number of hex digits, 32 to 512')
  .transform((t) => t.toLowerCase());
export const activityType = z
  .string({ error: 'must be a string' })
  .max(100, 'must be at most 100 characters')
  .regex(ACTIVITY_TYPE, 'must be the ActivityAttributes type name, e.g. DeliveryAttributes');
/**
 * ActivityKit's `Activity.id`, a UUID the system makes: an sdk key ships in every copy of the app, and only an id
 * nobody can guess keeps another install from registering a token to receive someone else's activity.
 */
export const activityId = z
  .string({ error: 'must be a string' })
  .regex(UUID, "must be the activity's id, a UUID (ActivityKit's Activity.id)")
  .transform((id) => id.toLowerCase());

/**
 * The proofs of the user a device is bound to, which an sdk caller sends while the app verifies identities (as it
 * does to change the device's own token): without them one phone could take another user's activities.
 */
export const identityProofs = {
  user_id_auth_hash: z.string().max(128).optional(),
  user_email_auth_hash: z.string().max(128).optional(),
  // the device's credential (docs/identity.md), proof in place of its user's hash
  [CREDENTIAL_FIELD]: z.string().max(256).optional(),
};
export const activityTokenBody = z.strictObject(
  { activity_type: activityType, token: liveActivityToken, ...identityProofs },
  { error: (issue) => (issue.code === 'invalid_type' ? 'body must be {"activity_type", "token"}' : undefined) },
);
export const startTokenBody = z.strictObject(
  { token: liveActivityToken, ...identityProofs },
  { error: (issue) => (issue.code === 'invalid_type' ? 'body must be {"token"}' : undefined) },
);

const jsonObject = (what: string) =>
  z
    .record(z.string(), z.unknown(), { error: `must be a JSON object (${what})` })
    .refine((o) => !Array.isArray(o), `must be a JSON object (${what})`);

export const liveActivityRequestSchema = z.strictObject(
  {
    live_activity: z
      .strictObject(
        {
          event: z.enum(LIVE_ACTIVITY_EVENTS, { error: 'must be "start", "update" or "end"' }),
          activity_type: activityType.optional(),
          activity_id: activityId.optional(),
          to: toSchema.optional(),
          channel: z.string({ error: 'must be a channel id string' }).min(1).max(100).optional(),
          content_state: jsonObject('the ContentState of the activity').optional(),
          attributes: jsonObject('the ActivityAttributes of the activity').optional(),
          alert: z
            .strictObject({
              title: z.string({ error: 'must be a string' }).max(1000).optional(),
              body: z.string({ error: 'must be a string' }).max(2000).optional(),
              sound: z.string({ error: 'must be a string' }).max(200).optional(),
            })
            .optional(),
          stale_date: isoInstant().optional(),
          dismissal_date: isoInstant().optional(),
          relevance_score: z.number({ error: 'must be a number' }).min(0, 'must be at least 0').optional(),
          send_at: isoInstant().optional(),
          ...deliveryOptionFields,
        },
        { error: (issue) => (issue.code === 'invalid_type' ? 'must be an object with event' : undefined) },
      )
      .superRefine((r, ctx) => {
        const texts = { content_state: r.content_state, alert: r.alert };
        for (const { path, message } of templateProblems(texts)) ctx.addIssue({ code: 'custom', path, message });
        // a channel's broadcast is one push APNs copies to every subscriber: there is no device to render it for
        if (r.channel !== undefined && templatedTexts(texts).length)
          ctx.addIssue({
            code: 'custom',
            path: ['channel'],
            message: 'a channel broadcast cannot carry templates (one push for every subscriber)',
          });
      }),
  },
  { error: (issue) => (issue.code === 'invalid_type' ? 'body must be {"live_activity": {"event", ...}}' : undefined) },
);
export type LiveActivityRequest = z.output<typeof liveActivityRequestSchema>['live_activity'];

/** The cross-field rules of a request (which fields each event needs and refuses); throws naming the field. */
export function checkLiveActivity(r: LiveActivityRequest): LiveActivityRef {
  const refuse = (field: string, why: string) => {
    throw new ValidationError(`live_activity.${field}: ${why}`);
  };
  if (r.event === 'start') {
    if (r.to === undefined) refuse('to', 'a start needs the devices to start it on ("*", an audience or filters)');
    if (r.activity_type === undefined) refuse('activity_type', 'a start needs the ActivityAttributes type');
    if (r.attributes === undefined) refuse('attributes', 'a start needs the activity attributes');
    if (r.content_state === undefined) refuse('content_state', 'a start needs the initial content state');
    if (r.activity_id !== undefined) refuse('activity_id', 'a start names no activity: iOS gives the new one its id');
    if (r.channel !== undefined) refuse('channel', 'a channel carries updates and ends, not starts');
  } else {
    if (r.to !== undefined) refuse('to', `an ${r.event} goes to the devices holding the activity's token; give activity_id`);
    if (r.attributes !== undefined) refuse('attributes', 'only a start carries attributes');
    if (r.channel === undefined && r.activity_id === undefined)
      refuse('activity_id', `an ${r.event} needs the activity's id (or a channel)`);
    if (r.channel !== undefined && r.activity_id !== undefined) refuse('channel', 'give activity_id or channel, not both');
    if (r.event === 'update' && r.content_state === undefined) refuse('content_state', 'an update needs the new content state');
  }
  if (r.dismissal_date !== undefined && r.event !== 'end') refuse('dismissal_date', 'only an end carries a dismissal date');
  if (r.channel !== undefined && r.send_at !== undefined) refuse('send_at', 'a channel broadcast goes out at once');
  return { event: r.event, activity_type: r.activity_type ?? null, activity_id: r.activity_id ?? null, channel: r.channel ?? null };
}

const seconds = (iso: string) => Math.floor(parseIsoInstant(iso)!.getTime() / 1000);

/**
 * The payload APNs gets (Apple's "Starting and updating Live Activities with ActivityKit push notifications"):
 * `aps.timestamp` is when it goes out (its send time, else now), so of two pushes the later one wins on the device.
 */
export function liveActivityPayload(r: LiveActivityRequest, now: Date): { aps: Record<string, unknown> } {
  const aps: Record<string, unknown> = {
    timestamp: r.send_at !== undefined ? seconds(r.send_at) : Math.floor(now.getTime() / 1000),
    event: r.event,
  };
  if (r.content_state !== undefined) aps['content-state'] = r.content_state;
  if (r.event === 'start') {
    aps['attributes-type'] = r.activity_type;
    aps.attributes = r.attributes;
  }
  if (r.stale_date !== undefined) aps['stale-date'] = seconds(r.stale_date);
  if (r.dismissal_date !== undefined) aps['dismissal-date'] = seconds(r.dismissal_date);
  if (r.relevance_score !== undefined) aps['relevance-score'] = r.relevance_score;
  if (r.alert !== undefined) {
    // a Live Activity's alert carries its sound inside it (Apple's examples), unlike a notification's aps.sound
    const { title, body, sound } = r.alert;
    aps.alert = { ...(title !== undefined && { title }), ...(body !== undefined && { body }), ...(sound !== undefined && { sound }) };
  }
  return { aps };
}

/** The apns-topic of Live Activity pushes: the app's topic with Apple's suffix. */
export const liveActivityTopic = (topic: string) => `${topic}.push-type.liveactivity`;

/** Channel storage policies APNs knows: 0 keeps no message for an offline device, 1 keeps the most recent. */
export const channelBody = z.strictObject(
  {
    message_storage_policy: z
      .union([z.literal(0), z.literal(1)], { error: 'must be 0 (no storage) or 1 (most recent message)' })
      .default(0),
    development: z.boolean({ error: 'must be a boolean' }).default(false),
  },
  { error: (issue) => (issue.code === 'invalid_type' ? 'body must be {"message_storage_policy", "development"}' : undefined) },
);
