import { z } from 'zod';

/**
 * A message's life as streams see it, and what a device reports about its stream. Pure: "now" is a parameter.
 */

/** Waiting for send_at; in streams; out of them (past unpublish_at or its retention); canceled before it was published. */
export const MESSAGE_STATES = ['scheduled', 'published', 'unpublished', 'canceled'] as const;
export type MessageState = (typeof MESSAGE_STATES)[number];

export function messageState(
  m: { canceled_at: Date | null; publish_at: Date; unpublish_at: Date | null; expires_at: Date },
  now: Date,
): MessageState {
  if (m.canceled_at) return 'canceled';
  if (m.publish_at.getTime() > now.getTime()) return 'scheduled';
  const out = Math.min(m.unpublish_at?.getTime() ?? Infinity, m.expires_at.getTime());
  return out <= now.getTime() ? 'unpublished' : 'published';
}

/** Where the app showed a message: in its stream, full screen, or as an in-app banner. */
export const IMPRESSION_KINDS = ['stream', 'full_screen', 'in_app'] as const;
export type ImpressionKind = (typeof IMPRESSION_KINDS)[number];

/** Message ids or impressions one request may carry. */
export const STREAM_BATCH_MAX = 100;

const messageId = z.string({ error: 'must be a message id string' });

export const markReadSchema = z.strictObject(
  {
    message_ids: z
      .array(messageId, { error: 'must be an array of message ids' })
      .min(1, 'must hold at least one message id')
      .max(STREAM_BATCH_MAX, `must hold at most ${STREAM_BATCH_MAX} message ids`),
  },
  { error: (issue) => (issue.code === 'invalid_type' ? 'body must be {"message_ids": [...]}' : undefined) },
);

export const impressionsSchema = z.strictObject(
  {
    impressions: z
      .array(
        z.strictObject(
          {
            message_id: messageId,
            kind: z.enum(IMPRESSION_KINDS, { error: `must be one of ${IMPRESSION_KINDS.join(', ')}` }),
          },
          { error: (issue) => (issue.code === 'invalid_type' ? 'must be {"message_id", "kind"}' : undefined) },
        ),
        { error: 'must be an array of {"message_id", "kind"}' },
      )
      .min(1, 'must hold at least one impression')
      .max(STREAM_BATCH_MAX, `must hold at most ${STREAM_BATCH_MAX} impressions`),
  },
  { error: (issue) => (issue.code === 'invalid_type' ? 'body must be {"impressions": [...]}' : undefined) },
);

export type Impression = z.output<typeof impressionsSchema>['impressions'][number];

/** Impressions per message and kind, as one report adds them. */
export function countImpressions(impressions: Impression[]): Map<string, Record<ImpressionKind, number>> {
  const counts = new Map<string, Record<ImpressionKind, number>>();
  for (const { message_id: id, kind } of impressions) {
    const c = counts.get(id) ?? { stream: 0, full_screen: 0, in_app: 0 };
    c[kind]++;
    counts.set(id, c);
  }
  return counts;
}
