import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { generateApnsKey, generateServiceAccount } from '../mocks/index.js';
import { useHarness } from '../helpers/harness.js';
import { runCli, type CliResult } from './run-cli.js';

/** `app set-apns` / `app set-fcm`: checked when set, stored for the delivery workers, never echoed. */
const h = useHarness();
let dir: string;
let appId: string;
const cli = (...args: string[]): Promise<CliResult> => runCli(args, { DATABASE_URL: h.databaseUrl });

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'pushd-creds-'));
  appId = (await h.createApp('com.example.creds')).app.id;
});

/** The credentials as stored, opened with the server's keys (they are stored sealed: test/cli/secrets.test.ts). */
const stored = async () => {
  const row = await h.db.db
    .selectFrom('apps')
    .select(['apns_credentials', 'fcm_credentials'])
    .where('id', '=', appId)
    .executeTakeFirstOrThrow();
  return {
    apns_credentials: row.apns_credentials && h.secrets.openJson(row.apns_credentials, 'apns_credentials'),
    fcm_credentials: row.fcm_credentials && h.secrets.openJson(row.fcm_credentials, 'fcm_credentials'),
  };
};

describe('app set-apns', () => {
  it('stores a valid .p8 key and answers without the key material', async () => {
    const key = generateApnsKey();
    const file = path.join(dir, 'AuthKey.p8');
    await writeFile(file, key.credentials.keyPem);
    const r = await cli(
      'app',
      'set-apns',
      '--app',
      appId,
      '--key-file',
      file,
      '--key-id',
      key.credentials.keyId,
      '--team-id',
      key.credentials.teamId,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      app: appId,
      apns: { key_id: key.credentials.keyId, team_id: key.credentials.teamId, topic: null },
    });
    expect(r.stdout + r.stderr).not.toContain('PRIVATE KEY');
    expect((await stored()).apns_credentials).toMatchObject({
      keyPem: key.credentials.keyPem,
      keyId: key.credentials.keyId,
      teamId: key.credentials.teamId,
    });
  });

  it.each([
    ['a key file that is not a key', 'not a key', 'ABCDEFGHIJ', 'KLMNOPQRST'],
    ['a key id of the wrong shape', null, 'short', 'KLMNOPQRST'],
    ['a team id of the wrong shape', null, 'ABCDEFGHIJ', 'lower-case'],
  ])('refuses %s, exit 2, nothing stored', async (_what, pem, keyId, teamId) => {
    const before = (await stored()).apns_credentials;
    const file = path.join(dir, `bad-${keyId}-${teamId}.p8`);
    const content = pem ?? generateApnsKey().credentials.keyPem;
    await writeFile(file, content);
    const r = await cli('app', 'set-apns', '--app', appId, '--key-file', file, '--key-id', keyId, '--team-id', teamId);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout)).toEqual({ error: r.stderr.slice('error: '.length).trimEnd().split('\n')[0] });
    expect(r.stderr).toMatch(/^error: /);
    // no key material in the message (the base64 body of the PEM, or the file's content)
    const material = content.split('\n').find((l) => l && !l.startsWith('-----')) ?? content;
    expect(r.stderr + r.stdout).not.toContain(material.slice(0, 32));
    expect((await stored()).apns_credentials).toEqual(before);
  });

  it('refuses an RSA key (APNs keys are EC P-256)', async () => {
    const file = path.join(dir, 'rsa.p8');
    await writeFile(file, generateServiceAccount().json.private_key);
    const r = await cli('app', 'set-apns', '--app', appId, '--key-file', file, '--key-id', 'ABCDEFGHIJ', '--team-id', 'KLMNOPQRST');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/P-256|EC|elliptic/i);
  });
});

describe('app set-fcm', () => {
  it('stores a valid service account and answers with its project and client email only', async () => {
    const sa = generateServiceAccount();
    const file = path.join(dir, 'sa.json');
    await writeFile(file, JSON.stringify(sa.json));
    const r = await cli('app', 'set-fcm', '--app', appId, '--service-account', file);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ app: appId, fcm: { project_id: sa.json.project_id, client_email: sa.json.client_email } });
    expect(r.stdout).not.toContain('PRIVATE KEY');
    expect((await stored()).fcm_credentials).toMatchObject({ project_id: sa.json.project_id, private_key: sa.json.private_key });
  });

  it.each([
    ['a file that is not JSON', 'nope', /not valid JSON/],
    ['JSON that is not a service account', JSON.stringify({ type: 'authorized_user' }), /service.account/i],
  ])('refuses %s, exit 2, nothing stored', async (_what, content, message) => {
    const before = (await stored()).fcm_credentials;
    const file = path.join(dir, `bad-${Math.random()}.json`);
    await writeFile(file, content);
    const r = await cli('app', 'set-fcm', '--app', appId, '--service-account', file);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    expect((await stored()).fcm_credentials).toEqual(before);
  });

  it('refuses an unknown app and a missing file', async () => {
    const file = path.join(dir, 'sa2.json');
    await writeFile(file, JSON.stringify(generateServiceAccount().json));
    expect((await cli('app', 'set-fcm', '--app', '00000000-0000-0000-0000-000000000000', '--service-account', file)).stderr).toMatch(
      /app not found/,
    );
    expect((await cli('app', 'set-fcm', '--app', appId, '--service-account', path.join(dir, 'missing.json'))).stderr).toMatch(
      /cannot read/,
    );
  });
});
