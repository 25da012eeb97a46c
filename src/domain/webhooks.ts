/**
 * Outbound webhooks without I/O: the event types, an endpoint as the API takes it, which targets pushd sends to,
 * the Standard Webhooks signature, a recorded batch's outcomes expanded into events, and the retry schedule.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import { z } from 'zod';
import { httpsUrlProblem } from './web-push.js';

export const WEBHOOK_EVENT_TYPES = [
  'push.delivered',
  'push.failed',
  'device.unregistered',
  'notification.completed',
  'notification.canceled',
  'push.opened',
  'conversion',
  'journey.entered',
  'journey.exited',
  'journey.converted',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
/** What an endpoint subscribes to: event types, or `*` for every one. */
export type WebhookSubscription = WebhookEventType | '*';
/** The types a recorded batch's outcomes expand into: an endpoint subscribed to one of them gets the batch's row. */
export const BATCH_EVENT_TYPES: readonly WebhookEventType[] = ['push.delivered', 'push.failed', 'device.unregistered'];
/** The one event `POST /v6/webhooks/:id/test` sends, to no subscription. */
export const PING = 'ping';

const URL_MAX = 2048;
const subscription = z.enum(['*', ...WEBHOOK_EVENT_TYPES], { error: `must be "*" or one of ${WEBHOOK_EVENT_TYPES.join(', ')}` });
export const webhookUrl = z
  .string({ error: 'must be an https URL' })
  .max(URL_MAX, { error: `must be at most ${URL_MAX} characters` })
  .superRefine((v, ctx) => {
    const problem = httpsUrlProblem(v);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });
const events = z
  .array(subscription)
  .min(1, { error: 'must name at least one event type, or "*"' })
  .max(WEBHOOK_EVENT_TYPES.length + 1)
  .transform((list) => [...new Set(list)]);
const description = z.string().max(500, { error: 'must be at most 500 characters' });

export const webhookCreateSchema = z.strictObject({
  url: webhookUrl,
  events,
  description: description.optional(),
  enabled: z.boolean().optional(),
});
export type WebhookCreate = z.infer<typeof webhookCreateSchema>;
export const webhookChangeSchema = webhookCreateSchema.partial();
export type WebhookChange = z.infer<typeof webhookChangeSchema>;

/** Whether an endpoint subscribed to `events` takes events of `type`. */
export function subscribes(events: readonly string[], type: string): boolean {
  return events.includes('*') || events.includes(type);
}

/** A new signing secret in the Standard Webhooks form: `whsec_` and 24 random bytes in base64. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/**
 * The `webhook-signature` header of a request: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` under each secret
 * (the current one, and the one a rotation replaced while it still verifies), space-separated.
 */
export function signatureHeader(secrets: readonly string[], id: string, timestamp: number, body: string | Buffer): string {
  return secrets
    .map((secret) => {
      const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
      // the body hashed as it is, not copied into one string with its prefix
      return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64')}`;
    })
    .join(' ');
}

/** Addresses pushd never sends a webhook to: loopback, private, link-local (cloud metadata), shared, multicast, reserved. */
const FORBIDDEN = (() => {
  const list = new BlockList();
  const v4: [string, number][] = [
    ['0.0.0.0', 8],
    ['10.0.0.0', 8],
    ['100.64.0.0', 10],
    ['127.0.0.0', 8],
    ['169.254.0.0', 16],
    ['172.16.0.0', 12],
    ['192.0.0.0', 24],
    ['192.168.0.0', 16],
    ['198.18.0.0', 15],
    ['224.0.0.0', 3],
  ];
  for (const [net, bits] of v4) list.addSubnet(net, bits, 'ipv4');
  const v6: [string, number][] = [
    ['::', 128],
    ['::1', 128],
    ['fc00::', 7],
    ['fe80::', 10],
    ['ff00::', 8],
    ['64:ff9b::', 96],
    ['fd00:ec2::', 32],
  ];
  for (const [net, bits] of v6) list.addSubnet(net, bits, 'ipv6');
  return list;
})();

/** Whether `address` (as a resolver answers it) is one pushd must not connect a webhook to. */
export function forbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  // an IPv4 address written as IPv6 (::ffff:10.0.0.1) is checked as the IPv4 address it reaches
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return FORBIDDEN.check(mapped[1]!, 'ipv4');
  return FORBIDDEN.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * Why a webhook URL is refused before any connection, or null: `https:` only, no credentials or fragment, no address
 * pushd must not reach written as the host. The address a name resolves to is checked when connecting.
 * `allowedOrigins` (WEBHOOK_ALLOWED_ORIGINS) pass whatever they are.
 */
export function webhookTargetProblem(target: string, allowedOrigins: readonly string[]): string | null {
  const problem = httpsUrlProblem(target);
  if (problem) return problem;
  const url = new URL(target);
  if (allowedOrigins.includes(url.origin)) return null;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return 'must not name this host';
  if (isIP(host) !== 0 && forbiddenAddress(host)) return `must not be a loopback, private, link-local or reserved address`;
  return null;
}

/** One event as a receiver gets it, in a JSON array of up to WEBHOOK_BATCH_SIZE. */
export interface WebhookEvent {
  /** stable: the same event sent again (a retry, a replay) has the same id, for the receiver to deduplicate */
  id: string;
  type: WebhookEventType | typeof PING;
  app_id: string;
  /** when the fact happened (ISO 8601); events are not sent in order */
  timestamp: string;
  data: Record<string, unknown>;
}

/** A recorded batch's outcomes as its outbox row holds them (one row for all its devices). */
export interface BatchOutcomes {
  notification_id: string;
  platform: string;
  attempt: number;
  delivered: string[];
  /** [device id, reason] */
  failed: [string, string][];
  unregistered: [string, string][];
}

/** A stored event row, as the sender reads it. */
export interface StoredWebhookEvent {
  id: string;
  app_id: string;
  type: string;
  created_at: Date;
  data: Record<string, unknown>;
}

/**
 * The events a stored row holds for an endpoint subscribed to `events`, each as its JSON (what JSON.stringify makes of
 * a WebhookEvent): a batch row expands into one per device and outcome, each numbered in the row before filtering, so
 * its id stays the same whatever the subscription. A batch's events are written as strings around their device and
 * reason, without an object each: a broadcast's sender writes one per push.
 */
export function serializedEvents(row: StoredWebhookEvent, events: readonly string[]): string[] {
  const timestamp = row.created_at.toISOString();
  if (row.type !== 'batch') return [JSON.stringify({ id: row.id, type: row.type, app_id: row.app_id, timestamp, data: row.data })];
  const b = row.data as unknown as BatchOutcomes;
  // `{"id":"<row id>.` then the event's number, its type, and what every event of the row has
  const idStart = `{"id":${JSON.stringify(`${row.id}.`).slice(0, -1)}`;
  const rest = `,"app_id":${JSON.stringify(row.app_id)},"timestamp":"${timestamp}","data":{"notification_id":${JSON.stringify(
    b.notification_id,
  )},"platform":${JSON.stringify(b.platform)},"attempt":${JSON.stringify(b.attempt)},"device_id":`;
  const out: string[] = [];
  let n = 0;
  const add = (type: WebhookEventType, device: string, reason?: string) => {
    if (subscribes(events, type)) {
      const why = reason === undefined ? '' : `,"reason":${JSON.stringify(reason)}`;
      out.push(`${idStart}${n}","type":"${type}"${rest}${JSON.stringify(device)}${why}}}`);
    }
    n++;
  };
  for (const d of b.delivered) add('push.delivered', d);
  for (const [d, reason] of b.failed) add('push.failed', d, reason);
  for (const [d, reason] of b.unregistered) add('device.unregistered', d, reason);
  return out;
}

/** The first delay after a failure; each next one doubles, up to RETRY_MAX_MS. */
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 3_600_000;
/** The longest a receiver's Retry-After holds an endpoint back. */
const RETRY_AFTER_MAX_MS = 86_400_000;

/**
 * How long an endpoint rests after its `failures`th failure in a row, `failingMs` after the first: doubling from a
 * second up to an hour but never longer than it has been failing, so the events of an outage arrive within its length
 * of its end (a minute's outage within a minute); with jitter (half to all of it), so endpoints that failed together
 * do not come back together. A receiver's Retry-After is honoured when it asks for longer.
 */
export function retryDelayMs(failures: number, failingMs: number, retryAfterMs: number | null, random: () => number = Math.random): number {
  const base = Math.min(RETRY_FIRST_MS * 2 ** Math.max(0, failures - 1), RETRY_MAX_MS, Math.max(RETRY_FIRST_MS, failingMs));
  const jittered = Math.round(base * (0.5 + random() / 2));
  return retryAfterMs === null ? jittered : Math.max(jittered, Math.min(retryAfterMs, RETRY_AFTER_MAX_MS));
}

/** A Retry-After header (seconds, or an HTTP date) in ms from `now`; null when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now: Date): number | null {
  if (!value) return null;
  if (/^\d{1,9}$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - now.getTime());
}
