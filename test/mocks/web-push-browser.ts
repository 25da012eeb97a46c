import { createECDH, randomBytes, type ECDH } from 'node:crypto';

/** What a browser holds for one push subscription: its ECDH key pair and auth secret, and what toJSON() gives. */
export interface BrowserSubscription {
  ecdh: ECDH;
  auth: Buffer;
  json: { endpoint: string; expirationTime: null; keys: { p256dh: string; auth: string } };
}

/** A subscription as a browser makes one (RFC 8291 §2): a fresh P-256 key pair and 16 random bytes of auth secret. */
export function browserSubscription(endpoint: string): BrowserSubscription {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  const auth = randomBytes(16);
  return {
    ecdh,
    auth,
    json: { endpoint, expirationTime: null, keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: auth.toString('base64url') } },
  };
}
