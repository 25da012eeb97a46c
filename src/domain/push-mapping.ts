/**
 * Stored API payload -> gateway wire format. Pure functions, no I/O; the gateways add the token,
 * the topic and the transport.
 *
 * APNs (`toApnsRequest`)                                     FCM HTTP v1 (`toFcmMessage`)
 * ---------------------------------------------------------  -----------------------------------------------------------
 * alert only          -> aps.alert = "<alert>"               alert     -> android.notification.body, data.alert
 * alert+title/subtitle-> aps.alert = {title, subtitle, body} title     -> android.notification.title, data.title
 * badge               -> aps.badge                           subtitle  -> data.subtitle
 * sound               -> aps.sound                           badge     -> data.badge (for the SDK)
 * content_available   -> aps["content-available"] = 1        sound     -> data.sound (for the SDK)
 * mutable_content     -> aps["mutable-content"] = 1          category  -> android.notification.click_action AND data.category
 * category            -> aps.category                        _channel_id -> android.notification.channel_id
 * interruption_level  -> aps["interruption-level"]           collapse_key -> android.collapse_key AND android.notification.tag
 * relevance_score     -> aps["relevance-score"]              custom keys -> data.<key>
 * collapse_key        -> header apns-collapse-id             _nid (notification id) -> data._nid
 * custom keys         -> top-level keys, values unchanged    content_available, mutable_content, interruption_level,
 * _channel_id         -> (Android only, dropped)               relevance_score -> (iOS only, dropped)
 * _nid                -> top-level "_nid" = notification id   android.priority = "HIGH" when something is shown, else "NORMAL"
 *
 * APNs headers: `apns-push-type: background` + `apns-priority: 5` when content_available is true and
 * nothing is shown (no alert/title/subtitle, and — as Apple requires for background pushes — no badge
 * or sound); otherwise `apns-push-type: alert` + `apns-priority: 10`.
 *
 * Delivery options (src/domain/delivery-options.ts), beside the payload:
 * priority high   -> apns-priority 10 (a background push stays at 5: Apple refuses 10 for it), android.priority HIGH
 * priority normal -> apns-priority 5, android.priority NORMAL
 * no priority     -> the defaults above (10 / HIGH when something is shown, else 5 / NORMAL)
 * expiry          -> apns-expiration = the instant in unix seconds (rounded down, so never later than asked);
 *                    android.ttl = the whole seconds left when it is sent, "<n>s", never negative
 * no expiry       -> neither (APNs and FCM keep an undeliverable push by their own policy, FCM 28 days)
 *
 * FCM data values must be strings: strings pass as they are, every other value is JSON-encoded
 * (badge 3 -> "3", {"a":1} -> "{\"a\":1}"). `android.notification` is present only when there is a
 * title or alert; without it the message is a data message the SDK handles itself.
 * `aps` and `_nid` are reserved (src/domain/payload.ts refuses them as custom keys); should an old
 * stored payload carry them anyway, ours win.
 *
 * Web Push (`toWebPushMessage`): the JSON document the service worker decrypts, and the request's headers.
 * alert -> body; title -> title; collapse_key -> tag AND header Topic (SHA-256, 32 base64url characters);
 * the `web` object (browser-only) -> icon, image, badge, url, actions, require_interaction, silent, renotify,
 * dir, lang; custom keys and _nid -> data; expiry -> TTL = the whole seconds left (else 28 days, FCM's ceiling);
 * priority high/normal -> Urgency high/normal (unset: high when something is shown, else normal).
 * subtitle, badge (the count), sound, category and the iOS switches are phone-only and not sent; `web` is not
 * sent to phones.
 *
 * Huawei Push Kit (`toHmsMessage`), the `message` of HMS's v1 messages:send without its `token` list:
 * alert -> android.notification.body; title -> android.notification.title; `_u` (an http(s) URL) ->
 * android.notification.click_action {type 2, url}, else {type 3} (open the app); collapse_key ->
 * android.notification.tag (HMS's own android.collapse_key is a number 0-100, not a string); category ->
 * android.category when it is one of HMS's message classes (IM, VOIP, …: HMS refuses others), and in data;
 * the payload's other keys (as FCM's data has them, values unchanged) and _nid -> data, ONE JSON string as HMS wants;
 * priority high/normal -> android.urgency HIGH/NORMAL (unset: HIGH when something is shown, else NORMAL);
 * expiry -> android.ttl = the whole seconds left, "<n>s", at most HMS's 15 days. No alert or title: a data message.
 *
 * APNs refuses a body over 4096 bytes (413 PayloadTooLarge): `ApnsRequest.bytes` lets the gateway
 * refuse it locally as a permanent failure instead of sending it.
 */

import { createHash } from 'node:crypto';
import { MAX_TTL_SECONDS, secondsLeft, type PushPriority } from './delivery-options.js';
import { WEB_PUSH_MAX_RECORD_BYTES, webPushRecordBytes } from './web-push.js';

export const APNS_MAX_PAYLOAD_BYTES = 4096;
/** FCM's limit on a message's content; measured here as the JSON of the mapped message without its token. */
export const FCM_MAX_MESSAGE_BYTES = 4096;

/** Payload keys with a meaning of their own; everything else is a custom key. */
const KNOWN_KEYS = new Set([
  'alert',
  'title',
  'subtitle',
  'badge',
  'sound',
  'content_available',
  'mutable_content',
  'category',
  'interruption_level',
  'relevance_score',
  'collapse_key',
  '_channel_id',
  'web',
]);

/** iOS-only switches and transport keys that never travel in FCM data. */
const NOT_IN_FCM_DATA = new Set([
  'content_available',
  'mutable_content',
  'interruption_level',
  'relevance_score',
  'collapse_key',
  '_channel_id',
  'web',
]);

export interface ApnsHeaders {
  'apns-push-type': 'alert' | 'background' | 'liveactivity';
  'apns-priority': 5 | 10;
  'apns-collapse-id'?: string;
  /** unix seconds */
  'apns-expiration'?: number;
}

/** A notification's delivery options as the mapping takes them; absent or null = unset. */
export interface PushOptions {
  expiresAt?: Date | null;
  priority?: PushPriority | null;
}

export interface ApnsRequest {
  headers: ApnsHeaders;
  /** The JSON body: `{aps: {...}, <custom keys>, _nid}`. */
  body: Record<string, unknown>;
  /** UTF-8 byte length of JSON.stringify(body); > APNS_MAX_PAYLOAD_BYTES means APNs would answer 413. */
  bytes: number;
}

export interface FcmAndroidNotification {
  title?: string;
  body?: string;
  channel_id?: string;
  tag?: string;
  click_action?: string;
}

export interface FcmAndroidConfig {
  /** FCM v1's AndroidMessagePriority enum names */
  priority: 'HIGH' | 'NORMAL';
  /** a google.protobuf.Duration: whole seconds, "<n>s" */
  ttl?: string;
  collapse_key?: string;
  notification?: FcmAndroidNotification;
}

/** An FCM HTTP v1 `message` without its `token` (the same for every device of a push). */
export interface FcmMessageTemplate {
  data: Record<string, string>;
  android: FcmAndroidConfig;
}

/** The body of `POST /v1/projects/<project>/messages:send`. */
export interface FcmSendBody {
  message: FcmMessageTemplate & { token: string };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/**
 * Whether the push shows or sounds something on the device: an alert, title or subtitle, a badge or a sound (what
 * APNs puts in `aps.alert`, `aps.badge`, `aps.sound`). One that does not (a `content_available` wake-up, custom data
 * only) is a background push. A device whose notifications are Disabled is sent only background pushes.
 */
export function isVisiblePush(payload: Record<string, unknown>): boolean {
  return (
    str(payload.alert) !== undefined ||
    str(payload.title) !== undefined ||
    str(payload.subtitle) !== undefined ||
    typeof payload.badge === 'number' ||
    str(payload.sound) !== undefined
  );
}

export function toApnsRequest(payload: Record<string, unknown>, notificationId: string, options: PushOptions = {}): ApnsRequest {
  const alert = str(payload.alert);
  const title = str(payload.title);
  const subtitle = str(payload.subtitle);
  const aps: Record<string, unknown> = {};

  if (title !== undefined || subtitle !== undefined) {
    aps.alert = {
      ...(title !== undefined && { title }),
      ...(subtitle !== undefined && { subtitle }),
      ...(alert !== undefined && { body: alert }),
    };
  } else if (alert !== undefined) {
    aps.alert = alert;
  }
  if (typeof payload.badge === 'number') aps.badge = payload.badge;
  if (typeof payload.sound === 'string') aps.sound = payload.sound;
  if (payload.content_available === true) aps['content-available'] = 1;
  if (payload.mutable_content === true) aps['mutable-content'] = 1;
  if (typeof payload.category === 'string') aps.category = payload.category;
  if (typeof payload.interruption_level === 'string') aps['interruption-level'] = payload.interruption_level;
  if (typeof payload.relevance_score === 'number') aps['relevance-score'] = payload.relevance_score;

  const body: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(payload)) {
    if (!KNOWN_KEYS.has(key) && value !== undefined) body[key] = value;
  }
  body.aps = aps;
  body._nid = notificationId;

  const background = payload.content_available === true && !isVisiblePush(payload);
  const headers: ApnsHeaders = background
    ? { 'apns-push-type': 'background', 'apns-priority': 5 }
    : { 'apns-push-type': 'alert', 'apns-priority': options.priority === 'normal' ? 5 : 10 };
  const collapseKey = str(payload.collapse_key);
  if (collapseKey !== undefined) headers['apns-collapse-id'] = collapseKey;
  if (options.expiresAt) headers['apns-expiration'] = Math.floor(options.expiresAt.getTime() / 1000);

  return { headers, body, bytes: jsonBytes(body) };
}

/**
 * A Live Activity push (its stored payload is already Apple's `{aps}`, src/domain/live-activity.ts): push type
 * `liveactivity`, priority 10 unless `normal` asks for 5 (which iOS budgets), the expiry as for any push.
 */
export function toLiveActivityRequest(payload: Record<string, unknown>, options: PushOptions = {}): ApnsRequest {
  const headers: ApnsHeaders = { 'apns-push-type': 'liveactivity', 'apns-priority': options.priority === 'normal' ? 5 : 10 };
  if (options.expiresAt) headers['apns-expiration'] = Math.floor(options.expiresAt.getTime() / 1000);
  return { headers, body: payload, bytes: jsonBytes(payload) };
}

/** `now` is when the message is sent: FCM's ttl is relative, the time left before the expiry. */
export function toFcmMessage(
  payload: Record<string, unknown>,
  notificationId: string,
  options?: PushOptions & { now: Date },
): FcmMessageTemplate {
  const data: Record<string, string> = {};
  for (const [key, value] of Object.entries(payload)) {
    if (!NOT_IN_FCM_DATA.has(key) && value !== undefined) data[key] = fcmDataValue(value);
  }
  data._nid = notificationId;

  const alert = str(payload.alert);
  const title = str(payload.title);
  const channelId = str(payload._channel_id);
  const category = str(payload.category);
  const collapseKey = str(payload.collapse_key);

  const shown = alert !== undefined || title !== undefined;
  const priority = options?.priority ?? (shown ? 'high' : 'normal');
  const android: FcmAndroidConfig = { priority: priority === 'high' ? 'HIGH' : 'NORMAL' };
  if (options?.expiresAt) android.ttl = `${secondsLeft(options.expiresAt, options.now)}s`;
  if (collapseKey !== undefined) android.collapse_key = collapseKey;
  if (shown) {
    const notification: FcmAndroidNotification = {};
    if (title !== undefined) notification.title = title;
    if (alert !== undefined) notification.body = alert;
    if (channelId !== undefined) notification.channel_id = channelId;
    if (collapseKey !== undefined) notification.tag = collapseKey;
    if (category !== undefined) notification.click_action = category;
    android.notification = notification;
  }
  return { data, android };
}

/** The request body for one token. */
export function fcmSendBody(template: FcmMessageTemplate, token: string): FcmSendBody {
  return { message: { token, ...template } };
}

/**
 * The JSON of `fcmSendBody(template, token)` for many tokens: the template is serialised once and
 * each token is spliced in, instead of serialising the whole message once per device.
 */
export function fcmSendBodyEncoder(template: FcmMessageTemplate): (token: string) => string {
  const json = JSON.stringify(template);
  return (token) => fcmSendBodyJson(json, token);
}

/** The JSON of `fcmSendBody` from the template's JSON (which always has keys: after its brace comes `"`). */
export const fcmSendBodyJson = (templateJson: string, token: string) =>
  `{"message":{"token":${JSON.stringify(token)},${templateJson.slice(1)}}`;

/** FCM data values must be strings: strings as they are, anything else JSON-encoded. */
export function fcmDataValue(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

export function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}

/** What a service worker receives (decrypted), documented in docs/api/web-push.md. */
export interface WebPushDocument {
  title?: string;
  body?: string;
  tag?: string;
  icon?: string;
  image?: string;
  badge?: string;
  url?: string;
  actions?: { action: string; title: string; icon?: string; url?: string }[];
  require_interaction?: boolean;
  silent?: boolean;
  renotify?: boolean;
  dir?: 'auto' | 'ltr' | 'rtl';
  lang?: string;
  /** custom keys of the payload, and `_nid` */
  data: Record<string, unknown>;
}

export interface WebPushHeaders {
  TTL: string;
  Urgency: 'high' | 'normal';
  Topic?: string;
}

export interface WebPushMessage {
  headers: WebPushHeaders;
  document: WebPushDocument;
  /** the document as sent (JSON, UTF-8) */
  body: Buffer;
}

/** Browser-only fields of the payload's `web` object, as the document names them. */
const WEB_FIELDS = ['icon', 'image', 'badge', 'url', 'actions', 'require_interaction', 'silent', 'renotify', 'dir', 'lang'] as const;

/** Keys that never travel in a Web Push document's data: those with a meaning of their own. */
const NOT_IN_WEB_DATA = new Set([...KNOWN_KEYS]);

/** `now` is when the message is sent: TTL is relative, the time left before the expiry. */
export function toWebPushMessage(
  payload: Record<string, unknown>,
  notificationId: string,
  options?: PushOptions & { now: Date },
): WebPushMessage {
  const alert = str(payload.alert);
  const title = str(payload.title);
  const collapseKey = str(payload.collapse_key);
  const document: WebPushDocument = { data: {} };
  if (title !== undefined) document.title = title;
  if (alert !== undefined) document.body = alert;
  if (collapseKey !== undefined) document.tag = collapseKey;
  const web = payload.web;
  if (typeof web === 'object' && web !== null) {
    for (const field of WEB_FIELDS) {
      const value = (web as Record<string, unknown>)[field];
      if (value !== undefined) (document as unknown as Record<string, unknown>)[field] = value;
    }
  }
  for (const [key, value] of Object.entries(payload)) {
    if (!NOT_IN_WEB_DATA.has(key) && value !== undefined) document.data[key] = value;
  }
  document.data._nid = notificationId;

  const shown = alert !== undefined || title !== undefined;
  const priority = options?.priority ?? (shown ? 'high' : 'normal');
  const ttl = options?.expiresAt ? secondsLeft(options.expiresAt, options.now) : MAX_TTL_SECONDS;
  const headers: WebPushHeaders = { TTL: String(ttl), Urgency: priority };
  if (collapseKey !== undefined) headers.Topic = webPushTopic(collapseKey);
  return { headers, document, body: Buffer.from(JSON.stringify(document), 'utf8') };
}

/** RFC 8030 §5.4: a Topic is at most 32 characters of the URL-safe base64 alphabet; a hash keeps any collapse_key within. */
export function webPushTopic(collapseKey: string): string {
  return createHash('sha256').update(collapseKey).digest('base64url').slice(0, 32);
}

/** HMS's limit on a message (80300008 past it), measured as the JSON of the mapped message without its tokens. */
export const HMS_MAX_MESSAGE_BYTES = 4096;
/** HMS keeps an undeliverable message at most 15 days. */
const HMS_MAX_TTL_SECONDS = 15 * 24 * 3600;
/** HMS's message classes (android.category); a payload category outside them stays in data only. */
const HMS_CATEGORIES = new Set([
  'IM',
  'VOIP',
  'SUBSCRIPTION',
  'TRAVEL',
  'HEALTH',
  'WORK',
  'ACCOUNT',
  'EXPRESS',
  'FINANCE',
  'DEVICE_REMINDER',
  'SYSTEM_REMINDER',
  'MAIL',
  'PLAY_VOICE',
  'MARKETING',
]);

export interface HmsAndroidNotification {
  title?: string;
  body?: string;
  tag?: string;
  /** type 2 opens `url`, type 3 opens the app */
  click_action: { type: 2; url: string } | { type: 3 };
}

export interface HmsAndroidConfig {
  urgency: 'HIGH' | 'NORMAL';
  ttl?: string;
  category?: string;
  notification?: HmsAndroidNotification;
}

/** An HMS v1 `message` without its `token` list (the same for every device of a push). */
export interface HmsMessageTemplate {
  data: string;
  android: HmsAndroidConfig;
}

/** `now` is when the message is sent: android.ttl is relative, the time left before the expiry. */
export function toHmsMessage(
  payload: Record<string, unknown>,
  notificationId: string,
  options?: PushOptions & { now: Date },
): HmsMessageTemplate {
  const data: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(payload)) {
    if (!NOT_IN_FCM_DATA.has(key) && value !== undefined) data[key] = value;
  }
  data._nid = notificationId;
  const alert = str(payload.alert);
  const title = str(payload.title);
  const category = str(payload.category);
  const collapseKey = str(payload.collapse_key);
  const link = str(payload._u);

  const shown = alert !== undefined || title !== undefined;
  const priority = options?.priority ?? (shown ? 'high' : 'normal');
  const android: HmsAndroidConfig = { urgency: priority === 'high' ? 'HIGH' : 'NORMAL' };
  if (options?.expiresAt) android.ttl = `${Math.min(secondsLeft(options.expiresAt, options.now), HMS_MAX_TTL_SECONDS)}s`;
  if (category !== undefined && HMS_CATEGORIES.has(category)) android.category = category;
  if (shown) {
    const opens = link !== undefined && /^https?:\/\/\S+$/.test(link);
    const notification: HmsAndroidNotification = { click_action: opens ? { type: 2, url: link } : { type: 3 } };
    if (title !== undefined) notification.title = title;
    if (alert !== undefined) notification.body = alert;
    if (collapseKey !== undefined) notification.tag = collapseKey;
    android.notification = notification;
  }
  return { data: JSON.stringify(data), android };
}

/** Stands for the notification id (a UUID, so of the same length) when a payload is measured before it has one. */
const MEASURING_ID = '00000000-0000-0000-0000-000000000000';

/**
 * A payload whose JSON is at most this many bytes maps to no request a gateway refuses as too large. Each of its
 * members takes at most three times its own bytes in a mapped request: HMS carries `alert`, `title`, `category`
 * and `_u` in its data, a JSON string inside the JSON (where escaping at most doubles them: only `"` and the
 * backslash get a backslash), and once more in `android`; FCM carries a non-string custom value as its JSON in a
 * string. The rest of a request (its own keys, `_nid`, the Web Push record's header and tag) is a few hundred bytes:
 * 3 × 1,024 + 1,024 = 4,096, the smallest limit.
 */
export const SURELY_FITS_BYTES =
  (Math.min(APNS_MAX_PAYLOAD_BYTES, FCM_MAX_MESSAGE_BYTES, WEB_PUSH_MAX_RECORD_BYTES, HMS_MAX_MESSAGE_BYTES) - 1024) / 3;

/**
 * What a gateway would refuse as too large once the payload is mapped, with the size and the limit;
 * null when APNs, FCM and the browsers' push services accept it.
 */
export function gatewaySizeProblem(payload: Record<string, unknown>): string | null {
  // most payloads are far too small to be refused: their size alone says so, without the four mappings
  if (jsonBytes(payload) <= SURELY_FITS_BYTES) return null;
  const apns = toApnsRequest(payload, MEASURING_ID).bytes;
  const fcm = jsonBytes(toFcmMessage(payload, MEASURING_ID));
  const web = webPushRecordBytes(toWebPushMessage(payload, MEASURING_ID).body.length);
  const hms = jsonBytes(toHmsMessage(payload, MEASURING_ID));
  const over = [
    apns > APNS_MAX_PAYLOAD_BYTES && `an APNs payload of ${apns} bytes (APNs accepts at most ${APNS_MAX_PAYLOAD_BYTES})`,
    fcm > FCM_MAX_MESSAGE_BYTES && `an FCM message of ${fcm} bytes (FCM accepts at most ${FCM_MAX_MESSAGE_BYTES})`,
    web > WEB_PUSH_MAX_RECORD_BYTES &&
      `a Web Push record of ${web} bytes once encrypted (push services accept at most ${WEB_PUSH_MAX_RECORD_BYTES})`,
    hms > HMS_MAX_MESSAGE_BYTES && `an HMS message of ${hms} bytes (Huawei Push Kit accepts at most ${HMS_MAX_MESSAGE_BYTES})`,
  ].filter(Boolean);
  return over.length ? `is too large: it maps to ${over.join(' and ')}` : null;
}

/** Whether a payload, once mapped for one platform's gateway, is within what that gateway accepts. */
export function fitsGateway(platform: string, payload: Record<string, unknown>, liveActivity = false): boolean {
  if (jsonBytes(payload) <= SURELY_FITS_BYTES) return true;
  switch (platform) {
    case 'ios':
      return (liveActivity ? toLiveActivityRequest(payload) : toApnsRequest(payload, MEASURING_ID)).bytes <= APNS_MAX_PAYLOAD_BYTES;
    case 'android':
      return jsonBytes(toFcmMessage(payload, MEASURING_ID)) <= FCM_MAX_MESSAGE_BYTES;
    case 'web':
      return webPushRecordBytes(toWebPushMessage(payload, MEASURING_ID).body.length) <= WEB_PUSH_MAX_RECORD_BYTES;
    default:
      return jsonBytes(toHmsMessage(payload, MEASURING_ID)) <= HMS_MAX_MESSAGE_BYTES;
  }
}
