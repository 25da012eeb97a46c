import { z } from 'zod';
import { parseIsoDate } from './date-math.js';
import { capField, deliveryOptionFields, isoInstant } from './delivery-options.js';
import { ValidationError } from './errors.js';
import { isPlainObject } from './filters.js';
import { throttleSchema, toSchema } from './notification-request.js';
import { payloadSchema, type Payload } from './payload.js';
import { checkLocalized, localizedSchema } from './localized.js';
import { quietHoursField } from './quiet-hours.js';
import { gatewaySizeProblem } from './push-mapping.js';
import { sendAtProblem } from './schedule.js';

/**
 * An in-app message as `POST /v6/messages` takes it: what the app shows (title, text, url, type, custom), to whom
 * (`to`, the three forms of notifications), when (send_at, unpublish_at), and optionally a push sent with it.
 */

export const MESSAGE_LIMITS = {
  title: 255,
  text: 10_000,
  url: 2048,
  customKeys: 50,
  customKey: 128,
  customString: 1024,
  customBytes: 4096,
};

/** The type when none is given: a message with a url and no text is a link, anything else text. */
export const DEFAULT_MESSAGE_TYPES = { text: 'text_message', link: 'link_message' } as const;

// Schemes that run or read something in the app's web view rather than open a page or a screen of the app.
const REFUSED_SCHEMES = new Set(['javascript', 'data', 'vbscript', 'file', 'blob', 'about']);
const URL_ERROR = 'must be an http(s) URL or an app URL (scheme://...), without spaces';

/** An http(s) URL with a host, or an app's own `scheme://…` link. */
export function isMessageUrl(text: string): boolean {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/\S+$/.exec(text);
  if (!m || /\p{Cc}/u.test(text) || REFUSED_SCHEMES.has(m[1]!.toLowerCase())) return false;
  try {
    const url = new URL(text);
    return !/^https?:$/.test(url.protocol) || url.hostname !== '';
  } catch {
    return false;
  }
}

const str = () => z.string({ error: 'must be a string' });

const customValue = z.union([str().max(MESSAGE_LIMITS.customString), z.number(), z.boolean()], {
  error: (issue) =>
    issue.code === 'invalid_union' || issue.code === 'invalid_type'
      ? `must be a string (at most ${MESSAGE_LIMITS.customString} characters), a number or a boolean`
      : undefined,
});

/** Key-value attributes the app reads with the message (the public API's "message attributes"). */
const customSchema = z
  .record(
    str().min(1, 'keys must not be empty').max(MESSAGE_LIMITS.customKey, `keys must be at most ${MESSAGE_LIMITS.customKey} characters`),
    customValue,
    {
      error: 'must be an object of string, number or boolean values',
    },
  )
  .superRefine((custom, ctx) => {
    if (Object.keys(custom).length > MESSAGE_LIMITS.customKeys)
      ctx.addIssue({ code: 'custom', message: `must have at most ${MESSAGE_LIMITS.customKeys} keys` });
    else if (Buffer.byteLength(JSON.stringify(custom)) > MESSAGE_LIMITS.customBytes)
      ctx.addIssue({ code: 'custom', message: `must be at most ${MESSAGE_LIMITS.customBytes} bytes as JSON` });
  });

/** Stands for the message id while the push is checked before the message exists (the same length, so sizes are exact). */
const MEASURING_MESSAGE_ID = '00000000-0000-0000-0000-000000000000';

/** The push sent with a message: a notification without `to` (it goes to the message's audience) or `send_at` (the message's). */
const messageNotificationSchema = z
  .strictObject(
    {
      payload: payloadSchema,
      localized: localizedSchema.optional(),
      throttle: throttleSchema.optional(),
      quiet_hours: quietHoursField.optional(),
      ...deliveryOptionFields,
      ...capField,
    },
    { error: (issue) => (issue.code === 'invalid_type' ? 'must be an object with payload' : undefined) },
  )
  .superRefine((notification, ctx) => {
    const st = notification.payload._st;
    if (st !== undefined && !isPlainObject(st)) {
      ctx.addIssue({ code: 'custom', path: ['payload', '_st'], message: 'must be an object (pushd adds the message id to it as mid)' });
      return;
    }
    const measured = (payload: Payload) => {
      const tooLarge = gatewaySizeProblem(withMessageId(payload, MEASURING_MESSAGE_ID));
      return tooLarge && `${tooLarge}, with the message id in _st.mid`;
    };
    const tooLarge = measured(notification.payload);
    if (tooLarge) ctx.addIssue({ code: 'custom', path: ['payload'], message: tooLarge });
    checkLocalized(notification.payload, notification.localized, ctx, measured);
  });

export const messageRequestSchema = z.strictObject(
  {
    message: z.strictObject(
      {
        to: toSchema,
        title: str()
          .max(MESSAGE_LIMITS.title, `must be at most ${MESSAGE_LIMITS.title} characters`)
          .refine((title) => title.trim() !== '', 'must not be empty'),
        text: str().max(MESSAGE_LIMITS.text, `must be at most ${MESSAGE_LIMITS.text} characters`).optional(),
        url: str().max(MESSAGE_LIMITS.url, `must be at most ${MESSAGE_LIMITS.url} characters`).refine(isMessageUrl, URL_ERROR).optional(),
        type: str()
          .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, _ or - (e.g. text_message, link_message)')
          .optional(),
        custom: customSchema.optional(),
        notification: messageNotificationSchema.optional(),
        send_at: z.string({ error: 'must be an ISO 8601 date-time string' }).optional(),
        unpublish_at: isoInstant().optional(),
      },
      { error: (issue) => (issue.code === 'invalid_type' ? 'must be an object with to and title' : undefined) },
    ),
  },
  { error: (issue) => (issue.code === 'invalid_type' ? 'body must be {"message": {"to", "title", ...}}' : undefined) },
);

/** A request as the schema has parsed it. */
export type MessageRequest = z.output<typeof messageRequestSchema>;
export type MessageFields = MessageRequest['message'];

/** The type stored and shown: the one given, else link or text by what the message carries. */
export function messageTypeOf(m: Pick<MessageFields, 'type' | 'text' | 'url'>): string {
  if (m.type !== undefined) return m.type;
  return m.url !== undefined && m.text === undefined ? DEFAULT_MESSAGE_TYPES.link : DEFAULT_MESSAGE_TYPES.text;
}

/** When a message is in streams and how long it is kept. */
export interface MessageTiming {
  sendAt: Date | null;
  /** when it enters streams: send_at, or now */
  publishAt: Date;
  unpublishAt: Date | null;
  /** when the retention purge deletes it: the retention counted from unpublish_at, or from publishAt without one */
  expiresAt: Date;
}

const DAY_MS = 86_400_000;
/** How far after its publication a message may stay in streams: a bound on what one request keeps stored. */
export const MESSAGE_UNPUBLISH_MAX_DAYS = 3650;

/**
 * The message's times as of `now`, or a 400 naming the field: send_at as for notifications (an instant with an
 * offset, in the future, at most a year ahead); unpublish_at in the future, after send_at, and at most
 * MESSAGE_UNPUBLISH_MAX_DAYS after it is published. A message is kept `retentionDays` from when it leaves the
 * streams (unpublish_at), or from its publication when it has no unpublish_at: so it is never deleted while shown.
 */
export function messageTiming(m: Pick<MessageFields, 'send_at' | 'unpublish_at'>, now: Date, retentionDays: number): MessageTiming {
  const problem = sendAtProblem({ send_at: m.send_at }, now, { object: 'message', localTimeOption: false });
  if (problem) throw new ValidationError(problem);
  const sendAt = m.send_at === undefined ? null : new Date(m.send_at);
  const publishAt = sendAt ?? now;
  const unpublishAt = m.unpublish_at === undefined ? null : parseIsoDate(m.unpublish_at);
  if (unpublishAt) {
    if (unpublishAt.getTime() <= now.getTime()) throw new ValidationError('message.unpublish_at: must be in the future');
    if (unpublishAt.getTime() <= publishAt.getTime()) throw new ValidationError('message.unpublish_at: must be after send_at');
    if (unpublishAt.getTime() > publishAt.getTime() + MESSAGE_UNPUBLISH_MAX_DAYS * DAY_MS)
      throw new ValidationError(`message.unpublish_at: must be at most ${MESSAGE_UNPUBLISH_MAX_DAYS} days after the message is published`);
  }
  const expiresAt = new Date((unpublishAt ?? publishAt).getTime() + retentionDays * DAY_MS);
  return { sendAt, publishAt, unpublishAt, expiresAt };
}

/** The push's payload with the message id where the SDKs look for it (`_st.mid`); the caller's other `_st` keys stay. */
export function withMessageId(payload: Payload, messageId: string): Payload {
  const st = isPlainObject(payload._st) ? payload._st : {};
  return { ...payload, _st: { ...st, mid: messageId } };
}
