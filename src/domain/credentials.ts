/**
 * Validation of push credentials at the moment they are set, so a bad key is refused with a clear
 * message instead of surfacing later as thousands of failed pushes. Errors never echo key material.
 *
 * APNs: token-based auth (a .p8 key from the Apple developer account): `{keyPem, keyId, teamId, topic?}`.
 * FCM: a Google service account JSON, as downloaded from the Firebase console.
 */
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { ValidationError } from './errors.js';

/** Thrown for unusable credentials; a ValidationError, so the CLI that stores them exits 2 with the message. */
export class CredentialsError extends ValidationError {}

export interface ApnsCredentials {
  /** The .p8 file content: a PKCS#8 PEM EC P-256 private key. */
  keyPem: string;
  /** 10-character key id shown next to the key in the Apple developer account. */
  keyId: string;
  /** 10-character Apple team id (the JWT issuer). */
  teamId: string;
  /** apns-topic override (the bundle id the key pushes to, when it differs from the app's); the app's bundle id when absent. */
  topic?: string;
}

export interface FcmServiceAccount {
  type: 'service_account';
  project_id: string;
  client_email: string;
  private_key: string;
  private_key_id?: string;
}

const APPLE_ID = /^[A-Z0-9]{10}$/;
const TOPIC = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
/** Project ids go into the request path; refuse anything that could change it. */
const PROJECT_ID = /^[A-Za-z0-9][A-Za-z0-9.:_-]*$/;

/** Accepts `{keyPem, keyId, teamId, topic?}` (`key` is accepted as an alias of `keyPem`). */
export function parseApnsCredentials(input: unknown): ApnsCredentials {
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw new CredentialsError('APNs credentials must be an object with keyPem, keyId and teamId');
  const raw = input as Record<string, unknown>;
  const keyPem = raw.keyPem ?? raw.key;
  if (typeof keyPem !== 'string' || keyPem.trim() === '') throw new CredentialsError('APNs keyPem must be the content of the .p8 key file');
  if (typeof raw.keyId !== 'string' || !APPLE_ID.test(raw.keyId))
    throw new CredentialsError('APNs keyId must be 10 upper-case letters or digits');
  if (typeof raw.teamId !== 'string' || !APPLE_ID.test(raw.teamId))
    throw new CredentialsError('APNs teamId must be 10 upper-case letters or digits');
  if (raw.topic !== undefined && raw.topic !== null && (typeof raw.topic !== 'string' || !TOPIC.test(raw.topic))) {
    throw new CredentialsError('APNs topic must be a bundle identifier such as com.example.app');
  }

  const pem = keyPem.trim();
  if (!pem.startsWith('-----BEGIN PRIVATE KEY-----')) {
    throw new CredentialsError('APNs keyPem must be a PKCS#8 PEM private key ("-----BEGIN PRIVATE KEY-----"), the content of the .p8 file');
  }
  const key = loadPrivateKey(pem, 'APNs keyPem');
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new CredentialsError('APNs keyPem must be an EC P-256 private key (ES256), the kind Apple issues as .p8');
  }
  const result: ApnsCredentials = { keyPem: `${pem}\n`, keyId: raw.keyId, teamId: raw.teamId };
  if (typeof raw.topic === 'string') result.topic = raw.topic;
  return result;
}

/** Accepts the service account as an object or as its JSON text. */
export function parseFcmServiceAccount(input: unknown): FcmServiceAccount {
  let json = input;
  if (typeof json === 'string') {
    try {
      json = JSON.parse(json);
    } catch {
      throw new CredentialsError('FCM service account is not valid JSON');
    }
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new CredentialsError('FCM service account must be a JSON object');
  const raw = json as Record<string, unknown>;
  if (raw.type !== 'service_account')
    throw new CredentialsError('FCM credentials must be a service account JSON ("type": "service_account")');
  if (typeof raw.project_id !== 'string' || !PROJECT_ID.test(raw.project_id))
    throw new CredentialsError('FCM service account must have a project_id');
  if (typeof raw.client_email !== 'string' || !/^[^@\s]+@[^@\s]+$/.test(raw.client_email))
    throw new CredentialsError('FCM service account must have a client_email');
  if (typeof raw.private_key !== 'string' || raw.private_key.trim() === '')
    throw new CredentialsError('FCM service account must have a private_key');

  // A key pasted through a shell or an env var often arrives with literal "\n" instead of newlines.
  const pem = raw.private_key.includes('\n') ? raw.private_key : raw.private_key.replace(/\\n/g, '\n');
  if (!pem.trim().startsWith('-----BEGIN')) throw new CredentialsError('FCM private_key must be a PEM private key');
  const key = loadPrivateKey(pem, 'FCM private_key');
  if (key.asymmetricKeyType !== 'rsa') throw new CredentialsError('FCM private_key must be an RSA private key (RS256)');

  const result: FcmServiceAccount = {
    type: 'service_account',
    project_id: raw.project_id,
    client_email: raw.client_email,
    private_key: pem,
  };
  if (typeof raw.private_key_id === 'string' && raw.private_key_id !== '') result.private_key_id = raw.private_key_id;
  return result;
}

function loadPrivateKey(pem: string, what: string): KeyObject {
  try {
    return createPrivateKey({ key: pem, format: 'pem' });
  } catch (err) {
    // OpenSSL's message ("error:1E08010C:DECODER routines::unsupported") names no key material.
    throw new CredentialsError(`${what} is not a readable private key (${(err as Error).message})`);
  }
}
