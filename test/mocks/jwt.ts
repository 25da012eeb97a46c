/** Minimal JWS (compact) decoding and verification for the mocks: ES256 (APNs) and RS256 (Google). */
import { verify, type KeyObject } from 'node:crypto';

export interface DecodedJwt {
  header: Record<string, unknown>;
  claims: Record<string, unknown>;
  signingInput: string;
  signature: Buffer;
}

export function decodeJwt(token: string): DecodedJwt | undefined {
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  const [h, c, s] = parts as [string, string, string];
  try {
    const header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8')) as unknown;
    const claims = JSON.parse(Buffer.from(c, 'base64url').toString('utf8')) as unknown;
    if (typeof header !== 'object' || header === null || typeof claims !== 'object' || claims === null) return undefined;
    return {
      header: header as Record<string, unknown>,
      claims: claims as Record<string, unknown>,
      signingInput: `${h}.${c}`,
      signature: Buffer.from(s, 'base64url'),
    };
  } catch {
    return undefined;
  }
}

/** ES256 signatures are the raw 64-byte r||s (IEEE P1363), not DER. */
export function verifyEs256(jwt: DecodedJwt, key: KeyObject): boolean {
  return jwt.header.alg === 'ES256' && verify('sha256', Buffer.from(jwt.signingInput), { key, dsaEncoding: 'ieee-p1363' }, jwt.signature);
}

export function verifyRs256(jwt: DecodedJwt, key: KeyObject): boolean {
  return jwt.header.alg === 'RS256' && verify('RSA-SHA256', Buffer.from(jwt.signingInput), key, jwt.signature);
}
