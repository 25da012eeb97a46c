import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateVapidCredentials } from '../../src/domain/web-push.js';
import { keyIdOf, newSecretsKeyText, SECRET_COLUMNS, sealedKeyId, decodeSecretsKey } from '../../src/domain/secrets.js';
import { TEST_SECRETS_KEY } from '../engines/secrets-key.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, startGateways, waitFor, type Gateways } from '../helpers/gateways.js';
import { freePort, Proc, ROOT } from '../system/proc.js';
import { runCli } from './run-cli.js';

const run = promisify(execFile);

/** Every sequence of base64 text lines of a PEM, one by one: what a dump must not show of a private key. */
const pemBodyLines = (pem: string) => pem.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('-----'));

const json = (r: { code: number | null; stdout: string; stderr: string }) => {
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Record<string, unknown>;
};

/**
 * Secrets at rest (docs/secrets.md): what the CLI stores is sealed, a dump of the database shows none of it, the
 * server still delivers with it, a rotation reseals it all under a new key while servers run, and a server without
 * the key that sealed it refuses to start naming the setting.
 */
describe('secrets at rest', () => {
  let h: Harness;
  let gw: Gateways;
  let dir: string;
  let app: { id: string };
  let keys: { read: string; write: string; sdk: string };
  let identitySecret: string;
  const vapid = generateVapidCredentials('mailto:ops@example.com');
  const hmsSecret = `hms-${'s3cr3t'.repeat(6)}`;
  const cli = (...args: string[]) => runCli(args, { DATABASE_URL: h.databaseUrl });
  const dump = async () => (await run('pg_dump', ['-d', h.databaseUrl], { maxBuffer: 64 * 1024 * 1024 })).stdout;
  const storedSecrets = async () => {
    const rows = await h.db.db.selectFrom('apps').select(SECRET_COLUMNS).execute();
    return rows.flatMap((row) => SECRET_COLUMNS.map((c) => row[c]).filter((v) => v !== null));
  };

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, env: gw.env });
    dir = await mkdtemp(path.join(os.tmpdir(), 'pushd-secrets-'));
    const created = json(await cli('app', 'create', '--bundle-id', 'com.example.sealed')) as {
      app: { id: string };
      keys: typeof keys;
      identity_secret: string;
    };
    ({ app, keys } = created);
    identitySecret = created.identity_secret;
    await writeFile(path.join(dir, 'AuthKey.p8'), gw.apnsKey.credentials.keyPem);
    await writeFile(path.join(dir, 'service-account.json'), JSON.stringify(gw.serviceAccount.json));
    const { keyId, teamId } = gw.apnsKey.credentials;
    json(await cli('app', 'set-apns', '--app', app.id, '--key-file', path.join(dir, 'AuthKey.p8'), '--key-id', keyId, '--team-id', teamId));
    json(await cli('app', 'set-fcm', '--app', app.id, '--service-account', path.join(dir, 'service-account.json')));
    json(await cli('app', 'set-hms', '--app', app.id, '--hms-app-id', '10000001', '--client-secret', hmsSecret));
    const webPush = ['--subject', vapid.subject, '--public-key', vapid.public_key, '--private-key', vapid.private_key];
    json(await cli('app', 'set-web-push', '--app', app.id, ...webPush));
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  /** A push to a new iOS and a new Android device through `base` (the harness's server unless given), received by the mocks. */
  const deliver = async (alert: string, via?: string) => {
    const ios = await registerDevice(h, keys.sdk, { platform: 'ios' });
    const android = await registerDevice(h, keys.sdk, { platform: 'android' });
    const notification = { to: [{ name: 'device_id', criteria: [ios.id, android.id] }], payload: { alert } };
    if (via) {
      const res = await fetch(`${via}/v6/notifications`, {
        method: 'POST',
        headers: { authorization: basic(keys.write), 'content-type': 'application/json' },
        body: JSON.stringify({ notification }),
      });
      expect(res.status, await res.clone().text()).toBe(201);
    } else {
      const res = await h.server.inject({
        method: 'POST',
        url: '/v6/notifications',
        headers: { authorization: basic(keys.write) },
        payload: { notification },
      });
      expect(res.statusCode, res.body).toBe(201);
    }
    await waitFor(`"${alert}" at APNs`, async () => gw.apns.pushes.some((p) => p.token === ios.token), 15_000);
    await waitFor(`"${alert}" at FCM`, async () => gw.fcm.pushes.some((p) => p.token === android.token), 15_000);
  };

  it('a pg_dump after app create, set-apns, set-fcm, set-hms and set-web-push shows none of the secrets', async () => {
    const text = await dump();
    const secrets = {
      'the APNs .p8 key': pemBodyLines(gw.apnsKey.credentials.keyPem),
      "the FCM service account's private key": pemBodyLines(gw.serviceAccount.json.private_key),
      'the HMS client secret': [hmsSecret],
      'the VAPID private key': [vapid.private_key],
      'the identity secret': [identitySecret],
    };
    for (const [what, parts] of Object.entries(secrets)) {
      expect(parts.length, what).toBeGreaterThan(0);
      for (const part of parts) expect(text.includes(part), `${what} is in the dump`).toBe(false);
    }
    // the dump does hold the apps' rows, sealed: five values under the test key
    const sealed = await storedSecrets();
    expect(sealed).toHaveLength(5);
    for (const value of sealed) {
      expect(sealedKeyId(value)).toBe(keyIdOf(decodeSecretsKey(TEST_SECRETS_KEY)!));
      expect(text).toContain(value);
    }
  });

  it('delivers with the sealed credentials', async () => {
    await deliver('sealed at rest');
  });

  it('a rotation while the server runs reseals everything; a server with the new key and the old as previous opens it all', async () => {
    const newKeyFile = path.join(dir, 'new.key');
    const newKeyText = newSecretsKeyText();
    await writeFile(newKeyFile, newKeyText, { mode: 0o600 });
    const newKeyId = keyIdOf(decodeSecretsKey(newKeyText)!);
    const oldKeyId = keyIdOf(decodeSecretsKey(TEST_SECRETS_KEY)!);

    const rotated = json(await cli('secrets', 'rotate', '--new-key-file', newKeyFile));
    expect(rotated).toMatchObject({ key_id: newKeyId, previous_key_ids: [oldKeyId], resealed: 5, apps: 1, key_file: null });
    const after = await storedSecrets();
    expect(after).toHaveLength(5);
    expect(after.map(sealedKeyId)).toEqual(Array(5).fill(newKeyId));
    expect((await dump()).includes(`pushd:v1:${oldKeyId}`)).toBe(false);
    // from now on a process needs the new key (the old one as previous opens what a server not yet restarted seals);
    // rotating to the same key again finds nothing left to reseal
    const withNewKey = { DATABASE_URL: h.databaseUrl, SECRETS_KEY: newKeyText.trim(), SECRETS_KEY_PREVIOUS: TEST_SECRETS_KEY };
    expect(json(await runCli(['secrets', 'rotate', '--new-key-file', newKeyFile], withNewKey))).toMatchObject({ resealed: 0 });

    // the server that was running goes on sending with what it holds
    await deliver('after the rotation, from the running server');

    // a second server, started with the new key and the old one as previous, opens every value and delivers
    const port = await freePort();
    const second = Proc.server({
      ...gw.env,
      DATABASE_URL: h.databaseUrl,
      SECRETS_KEY: newKeyText.trim(),
      SECRETS_KEY_PREVIOUS: TEST_SECRETS_KEY,
      QUEUE_PREFIX: `${h.queuePrefix}second`,
      PORT: String(port),
      HOST: '127.0.0.1',
      NODE_EXTRA_CA_CERTS: path.join(ROOT, 'test/fixtures/tls/ca.pem'),
    });
    try {
      await second.waitForLog('listening', 60_000);
      await deliver('through the server started with the new key', `http://127.0.0.1:${port}`);
    } finally {
      await second.stop();
    }

    // a server given only the old key refuses to start, naming the setting; so does one given no key at all
    const stale = Proc.server({
      DATABASE_URL: h.databaseUrl,
      SECRETS_KEY: TEST_SECRETS_KEY,
      QUEUE_PREFIX: `${h.queuePrefix}stale`,
      PORT: '0',
    });
    const staleExit = await stale.exited;
    expect(staleExit.code).not.toBe(0);
    expect(stale.stderr).toMatch(new RegExp(`sealed under key ${newKeyId} \\(5 values\\).*SECRETS_KEY`));

    const keyless = Proc.server({ DATABASE_URL: h.databaseUrl, SECRETS_KEY: '', QUEUE_PREFIX: `${h.queuePrefix}keyless`, PORT: '0' });
    expect((await keyless.exited).code).not.toBe(0);
    expect(keyless.stderr).toMatch(/SECRETS_KEY: a server on DATABASE_URL needs the key/);

    // the CLI too: a command run with the old key only is refused before it touches anything (exit 2: a setting)
    const r = await runCli(['app', 'list'], { DATABASE_URL: h.databaseUrl, SECRETS_KEY: TEST_SECRETS_KEY });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/SECRETS_KEY/);
  }, 180_000);

  it('refuses a key that is not 32 bytes in base64, naming the setting without echoing it', async () => {
    const r = await runCli(['app', 'list'], { DATABASE_URL: h.databaseUrl, SECRETS_KEY: 'dG9vLXNob3J0' });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/SECRETS_KEY: must be 32 bytes in base64/);
    expect(r.stderr).not.toContain('dG9vLXNob3J0');
  });
});
