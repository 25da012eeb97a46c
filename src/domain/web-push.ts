/**
 * Web Push rules that need no I/O: a browser's subscription as a device registers it, which endpoints pushd will
 * ever send to (the endpoint comes from whoever holds the sdk key, so it is fenced to the push services), the
 * app's VAPID key pair, and the sizes of the aes128gcm record (RFC 8291).
 */
import { createECDH, ECDH, generateKeyPairSync } from 'node:crypto';
import { isIP } from 'node:net';
import { CredentialsError } from './credentials.js';
import { ValidationError } from './errors.js';
import { isPlainObject } from './filters.js';

/** What a web device stores: the endpoint is its token; the keys every push is encrypted to. */
export interface WebPushSubscription {
  endpoint: string;
  p256dh: string;
  auth: string;
}

/** The push services of the browsers pushd sends to without being told: FCM (Chrome), Mozilla, Apple, Microsoft. */
const PUSH_SERVICE_HOSTS: readonly { host: string; subdomains: boolean }[] = [
  { host: 'fcm.googleapis.com', subdomains: false },
  { host: 'push.services.mozilla.com', subdomains: true },
  { host: 'push.apple.com', subdomains: true },
  { host: 'notify.windows.com', subdomains: true },
];

const ENDPOINT_MAX_LENGTH = 4096;
const BASE64URL = /^[A-Za-z0-9_-]+={0,2}$/;

/** Why an endpoint is refused, or null when pushd may send to it. `allowedOrigins` are WEB_PUSH_ALLOWED_ORIGINS. */
export function endpointProblem(endpoint: string, allowedOrigins: readonly string[]): string | null {
  const problem = httpsUrlProblem(endpoint);
  if (problem) return problem;
  const url = new URL(endpoint);
  if (allowedOrigins.includes(url.origin)) return null;
  const host = url.hostname;
  if (isIP(host.replace(/^\[|\]$/g, '')) !== 0) return 'must name a push service, not an IP address';
  if (url.port !== '') return 'must use the push service port (443)';
  const known = PUSH_SERVICE_HOSTS.some((s) => host === s.host || (s.subdomains && host.endsWith(`.${s.host}`)));
  return known
    ? null
    : `host ${host} is not a known push service ` +
        '(fcm.googleapis.com, *.push.services.mozilla.com, *.push.apple.com, *.notify.windows.com, or WEB_PUSH_ALLOWED_ORIGINS)';
}

/**
 * Why a URL pushd is to send to (a push service's endpoint, a webhook) is refused before its host is looked at:
 * only https, without a user name, password or fragment; null when it passes.
 */
export function httpsUrlProblem(endpoint: string): string | null {
  if (endpoint.length > ENDPOINT_MAX_LENGTH) return `must be at most ${ENDPOINT_MAX_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return 'must be an https URL';
  }
  if (url.protocol !== 'https:') return 'must be an https URL';
  if (url.username !== '' || url.password !== '') return 'must not hold a user name or password';
  if (url.hash !== '' || endpoint.includes('#')) return 'must not hold a fragment';
  return null;
}

/**
 * The endpoint as the WHATWG URL parser serialises it (surrounding white space and tabs gone, the scheme and host in
 * lower case, full-width and other letters mapped by IDNA, the default port dropped), so that one subscription is one
 * token however it was written; null when it does not parse.
 */
export function normalEndpoint(endpoint: string): string | null {
  try {
    return new URL(endpoint).href;
  } catch {
    return null;
  }
}

/** Bytes of a base64url string, or null when it is not one. */
function base64urlBytes(value: unknown): Buffer | null {
  if (typeof value !== 'string' || !BASE64URL.test(value)) return null;
  return Buffer.from(value.replace(/=+$/, ''), 'base64url');
}

/** Whether `point` is an uncompressed point on P-256 (a browser's p256dh, a VAPID public key). */
function isP256Point(point: Buffer): boolean {
  if (point.length !== 65 || point[0] !== 4) return false;
  try {
    ECDH.convertKey(point, 'prime256v1');
    return true;
  } catch {
    return false;
  }
}

/**
 * `PushSubscription.toJSON()` as the browser gives it: `{endpoint, expirationTime, keys: {p256dh, auth}}`. Throws a
 * ValidationError naming the field (`device.subscription.keys.auth: …`).
 */
export function parseSubscription(raw: unknown, allowedOrigins: readonly string[]): WebPushSubscription {
  const at = 'device.subscription';
  if (!isPlainObject(raw))
    throw new ValidationError(`${at}: must be the browser's PushSubscription.toJSON(): {endpoint, keys: {p256dh, auth}}`);
  const extra = Object.keys(raw).find((k) => k !== 'endpoint' && k !== 'expirationTime' && k !== 'keys');
  if (extra !== undefined) throw new ValidationError(`${at}.${extra}: is not a field of a push subscription`);
  const endpoint = typeof raw.endpoint === 'string' ? normalEndpoint(raw.endpoint) : null;
  if (endpoint === null) throw new ValidationError(`${at}.endpoint: must be an https URL`);
  const problem = endpointProblem(endpoint, allowedOrigins);
  if (problem) throw new ValidationError(`${at}.endpoint: ${problem}`);
  const expiration = raw.expirationTime;
  if (expiration !== undefined && expiration !== null && !(typeof expiration === 'number' && Number.isFinite(expiration)))
    throw new ValidationError(`${at}.expirationTime: must be null or a number of milliseconds`);
  if (!isPlainObject(raw.keys)) throw new ValidationError(`${at}.keys: must be {p256dh, auth}`);
  const p256dh = base64urlBytes(raw.keys.p256dh);
  if (!p256dh || !isP256Point(p256dh))
    throw new ValidationError(`${at}.keys.p256dh: must be a P-256 public key, 65 bytes uncompressed, in base64url`);
  const auth = base64urlBytes(raw.keys.auth);
  if (!auth || auth.length !== 16) throw new ValidationError(`${at}.keys.auth: must be 16 bytes in base64url`);
  return { endpoint, p256dh: p256dh.toString('base64url'), auth: auth.toString('base64url') };
}

/** WEB_PUSH_ALLOWED_ORIGINS: a comma list of https origins (scheme, host, port if not 443; nothing else). */
export function parseAllowedOrigins(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((s) => {
      const url = new URL(s);
      if (url.protocol !== 'https:' || url.origin !== s.replace(/\/$/, '')) throw new Error(`${s} is not an https origin`);
      return url.origin;
    });
}

// ---- VAPID (RFC 8292) ----

/** An app's VAPID key pair, both halves in base64url: the public key raw (65 bytes), the private key its scalar (32). */
export interface VapidCredentials {
  subject: string;
  public_key: string;
  private_key: string;
}

/** Checks a stored or given VAPID pair: the subject a contact (mailto: or https:), the halves of one P-256 key. */
export function parseVapidCredentials(raw: unknown): VapidCredentials {
  if (!isPlainObject(raw)) throw new CredentialsError('web push credentials must be {subject, public_key, private_key}');
  const { subject } = raw;
  if (typeof subject !== 'string' || !/^(mailto:[^\s@]+@[^\s@]+|https:\/\/\S+)$/.test(subject))
    throw new CredentialsError('subject must be a mailto: address or an https: URL (RFC 8292)');
  const publicKey = base64urlBytes(raw.public_key);
  if (!publicKey || !isP256Point(publicKey))
    throw new CredentialsError('public_key must be a P-256 public key, 65 bytes uncompressed, in base64url');
  const privateKey = base64urlBytes(raw.private_key);
  if (!privateKey || privateKey.length !== 32) throw new CredentialsError('private_key must be a P-256 private key, 32 bytes in base64url');
  const ecdh = createECDH('prime256v1');
  try {
    ecdh.setPrivateKey(privateKey);
  } catch {
    throw new CredentialsError('private_key is not a valid P-256 private key');
  }
  if (!ecdh.getPublicKey().equals(publicKey)) throw new CredentialsError('public_key is not the public half of private_key');
  return { subject, public_key: publicKey.toString('base64url'), private_key: privateKey.toString('base64url') };
}

/** A new VAPID key pair for `subject`. */
export function generateVapidCredentials(subject: string): VapidCredentials {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const jwk = privateKey.export({ format: 'jwk' });
  const point = Buffer.concat([Buffer.from([4]), Buffer.from(jwk.x!, 'base64url'), Buffer.from(jwk.y!, 'base64url')]);
  return parseVapidCredentials({ subject, public_key: point.toString('base64url'), private_key: jwk.d });
}

// ---- the aes128gcm record (RFC 8188, RFC 8291) ----

/** Push services need accept no larger body (RFC 8291 §4): the one record with its header. */
export const WEB_PUSH_MAX_RECORD_BYTES = 4096;
/** salt (16) + record size (4) + key id length (1) + the sender's public key (65). */
export const WEB_PUSH_HEADER_BYTES = 86;
/** The padding delimiter (1) and the AES-GCM tag (16) the record adds to the document. */
export const WEB_PUSH_RECORD_OVERHEAD = 17;

/** The body's size once `documentBytes` of JSON are encrypted into one record, without padding. */
export function webPushRecordBytes(documentBytes: number): number {
  return WEB_PUSH_HEADER_BYTES + documentBytes + WEB_PUSH_RECORD_OVERHEAD;
}
