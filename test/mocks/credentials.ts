/** Throw-away credentials for tests and benchmarks, generated at runtime (nothing secret is committed). */
import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';

export interface TestApnsKey {
  /** What the API accepts as APNs credentials. */
  credentials: { keyPem: string; keyId: string; teamId: string };
  /** Register this with the APNs mock. */
  publicKey: KeyObject;
}

const APPLE_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

export function appleId(): string {
  return Array.from(randomBytes(10), (b) => APPLE_ALPHABET[b % APPLE_ALPHABET.length]).join('');
}

/** An EC P-256 key in PKCS#8 PEM: what Apple hands out as a .p8 file. */
export function generateApnsKey(opts: { keyId?: string; teamId?: string } = {}): TestApnsKey {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return {
    credentials: {
      keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      keyId: opts.keyId ?? appleId(),
      teamId: opts.teamId ?? appleId(),
    },
    publicKey,
  };
}

export interface TestServiceAccount {
  /** The service account JSON as the Firebase console downloads it. */
  json: {
    type: 'service_account';
    project_id: string;
    private_key_id: string;
    private_key: string;
    client_email: string;
    client_id: string;
    auth_uri: string;
    token_uri: string;
  };
  /** Register this with the FCM mock's OAuth endpoint. */
  publicKey: KeyObject;
}

export function generateServiceAccount(opts: { projectId?: string } = {}): TestServiceAccount {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const projectId = opts.projectId ?? `pushd-test-${randomBytes(3).toString('hex')}`;
  return {
    json: {
      type: 'service_account',
      project_id: projectId,
      private_key_id: randomBytes(20).toString('hex'),
      private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      client_email: `pushd@${projectId}.iam.gserviceaccount.com`,
      client_id: String(100000000000000000000n + BigInt(randomBytes(4).readUInt32BE())),
      auth_uri: 'https://accounts.google.com/o/oauth2/auth',
      token_uri: 'https://oauth2.googleapis.com/token',
    },
    publicKey,
  };
}
