/**
 * Huawei Push Kit (HMS) rules that need no I/O: what a Huawei push token looks like, and the app's HMS credentials
 * (its AppGallery Connect app id, which is also the OAuth client id, and the client secret).
 */
import { CredentialsError } from './credentials.js';

export interface HmsCredentials {
  /** the AppGallery Connect app id: the OAuth client_id and the `/v1/<app id>/messages:send` path segment */
  app_id: string;
  client_secret: string;
}

/** HMS tokens are opaque; the ones Huawei issues are 32 to a few hundred characters of this alphabet. */
const HMS_TOKEN = /^[A-Za-z0-9._:=+/-]{32,512}$/;
/** AppGallery app ids are numbers; refused otherwise, as they go into the request path. */
const HMS_APP_ID = /^[0-9]{1,32}$/;

/** Why a string is not a Huawei push token, or null. */
export function hmsTokenProblem(token: string): string | null {
  return HMS_TOKEN.test(token) ? null : 'must be a Huawei push token: 32 to 512 letters, digits or . _ : = + / -';
}

/** Checks `{app_id, client_secret}` when set, so a typo is refused then, not at each push. */
export function parseHmsCredentials(input: unknown): HmsCredentials {
  const given = (typeof input === 'object' && input !== null ? input : {}) as Record<string, unknown>;
  const appId = given.app_id;
  const secret = given.client_secret;
  if (typeof appId !== 'string' || !HMS_APP_ID.test(appId)) throw new CredentialsError('hms-app-id: must be the numeric AppGallery app id');
  if (typeof secret !== 'string' || !/^[\x21-\x7e]{8,512}$/.test(secret))
    throw new CredentialsError('client-secret: must be the app secret shown in AppGallery Connect (8 to 512 visible characters)');
  return { app_id: appId, client_secret: secret };
}
