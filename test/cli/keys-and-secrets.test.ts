import { createECDH } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../src/domain/keys.js';
import { waitFor } from '../engines/engines.js';
import { basic, useHarness, type Harness } from '../helpers/harness.js';
import { oneDocument, runCli, type CliResult } from './run-cli.js';

/**
 * Secrets reach the CLI in a file or on standard input, not as arguments `ps` and the shell's history show; a key is
 * listed (no secret) and revoked by its id.
 */

const h = useHarness();
let cli: (args: string[], stdin?: string) => Promise<CliResult>;
let app: Awaited<ReturnType<Harness['createApp']>>;
let dir: string;

beforeAll(async () => {
  cli = (args, stdin) => runCli(args, { DATABASE_URL: h.databaseUrl }, stdin);
  app = await h.createApp();
  dir = await mkdtemp(path.join(os.tmpdir(), 'pushd-cli-secrets-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const storedOf = async (column: 'hms_credentials' | 'web_push_credentials') => {
  const row = await h.db.db.selectFrom('apps').select(column).where('id', '=', app.app.id).executeTakeFirstOrThrow();
  return row[column] && h.secrets.openJson(row[column], column);
};

describe('secrets from a file or standard input', () => {
  it('app set-hms --client-secret-file reads the secret from the file, its line end dropped', async () => {
    const file = path.join(dir, 'hms-secret');
    await writeFile(file, 'f1e2d3c4b5a6f7e8\n');
    const r = await cli(['app', 'set-hms', '--app', app.app.id, '--hms-app-id', '104857600', '--client-secret-file', file]);
    expect(oneDocument(r)).toEqual({ app: app.app.id, hms: { app_id: '104857600' } });
    expect(await storedOf('hms_credentials')).toEqual({ app_id: '104857600', client_secret: 'f1e2d3c4b5a6f7e8' });
  });

  it('app set-hms --client-secret-file - reads standard input', async () => {
    const r = await cli(
      ['app', 'set-hms', '--app', app.app.id, '--hms-app-id', '104857601', '--client-secret-file', '-'],
      'a9b8c7d6e5f4a3b2\n',
    );
    expect(oneDocument(r)).toEqual({ app: app.app.id, hms: { app_id: '104857601' } });
    expect(await storedOf('hms_credentials')).toEqual({ app_id: '104857601', client_secret: 'a9b8c7d6e5f4a3b2' });
  });

  it('refuses both forms at once, none, and a file that cannot be read (exit 2)', async () => {
    const file = path.join(dir, 'hms-secret');
    const base = ['app', 'set-hms', '--app', app.app.id, '--hms-app-id', '104857602'];
    const both = await cli([...base, '--client-secret', 'a1b2c3d4e5f6a7b8', '--client-secret-file', file]);
    expect([both.code, both.stderr]).toEqual([2, expect.stringMatching(/not both/)]);
    const none = await cli(base);
    expect([none.code, none.stderr]).toEqual([2, expect.stringMatching(/--client-secret-file is required/)]);
    const unreadable = await cli([...base, '--client-secret-file', path.join(dir, 'nothing-here')]);
    expect([unreadable.code, unreadable.stderr]).toEqual([2, expect.stringMatching(/--client-secret-file: cannot read/)]);
    expect((await storedOf('hms_credentials'))?.app_id).toBe('104857601');
  });

  it('app set-web-push --private-key-file takes the private half of a given pair', async () => {
    const pair = createECDH('prime256v1');
    pair.generateKeys();
    const key = pair.getPrivateKey();
    const privateKey = Buffer.concat([Buffer.alloc(32 - key.length), key]).toString('base64url');
    const pub = pair.getPublicKey().toString('base64url');
    const args = ['app', 'set-web-push', '--app', app.app.id, '--subject', 'mailto:ops@example.com', '--public-key', pub];
    const r = await cli([...args, '--private-key-file', '-'], `${privateKey}\n`);
    expect(oneDocument(r)).toMatchObject({ web_push: { public_key: pub } });
    expect(r.stdout).not.toContain(privateKey);
    expect(await storedOf('web_push_credentials')).toMatchObject({ public_key: pub, private_key: privateKey });
  });

  it('--help shows the file forms and says the argument forms are discouraged', async () => {
    const r = await cli(['app', 'set-hms', '--help']);
    expect(r.stdout).toMatch(/--client-secret-file FILE +\(required unless --client-secret\) .*- reads standard input/);
    expect(r.stdout).toMatch(/--client-secret S +.*discouraged/);
  });
});

describe('pushd key list and key revoke --id', () => {
  const readKey = (key: string) => h.server.inject({ method: 'GET', url: '/v6/key', headers: { authorization: basic(key) } });
  type Listed = {
    id: string;
    role: string;
    starts_with: string;
    created_at: string;
    last_used_at: string | null;
    revoked_at: string | null;
  };
  const list = async () => (oneDocument(await cli(['key', 'list', '--app', app.app.id])) as { keys: Listed[] }).keys;

  it('lists the ids, roles, first characters, creation and last use of the keys, and no key', async () => {
    const before = await list();
    expect(before.map((k) => k.role).sort()).toEqual(['read', 'sdk', 'write']);
    for (const k of before) {
      expect(Object.keys(k).sort()).toEqual(['created_at', 'id', 'last_used_at', 'revoked_at', 'role', 'starts_with']);
      expect(k.starts_with).toHaveLength(6);
      expect(k.last_used_at).toBeNull();
    }
    const listing = JSON.stringify(before);
    for (const key of Object.values(app.keys)) expect(listing).not.toContain(key);

    expect((await readKey(app.keys.read)).statusCode).toBe(200);
    await waitFor(
      'the read key noted as used',
      async () => (await list()).find((k) => k.role === 'read')!.last_used_at !== null,
      5_000,
      50,
    );
    const after = await list();
    expect(Date.parse(after.find((k) => k.role === 'read')!.last_used_at!)).toBeGreaterThan(Date.now() - 60_000);
    expect(after.find((k) => k.role === 'write')!.last_used_at).toBeNull();
  });

  it('key revoke --id revokes the key of that id: it answers 401, and key list shows when', async () => {
    const made = oneDocument(await cli(['key', 'create', '--app', app.app.id, '--role', 'read'])) as { key: string };
    expect((await readKey(made.key)).statusCode).toBe(200);
    const id = (await list()).find(
      (k) => made.key.startsWith(k.starts_with) && k.revoked_at === null && k.role === 'read' && k.last_used_at,
    )!.id;
    expect(oneDocument(await cli(['key', 'revoke', '--id', id]))).toEqual({ revoked: true });
    await waitFor('the revoked key to answer 401', async () => (await readKey(made.key)).statusCode === 401, 5_000, 20);
    expect((await list()).find((k) => k.id === id)!.revoked_at).not.toBeNull();
    expect((await readKey(app.keys.read)).statusCode).toBe(200);

    const again = await cli(['key', 'revoke', '--id', id]);
    expect([again.code, again.stderr]).toEqual([1, expect.stringMatching(/active key not found/)]);
    const both = await cli(['key', 'revoke', '--id', id, '--key', made.key]);
    expect([both.code, both.stderr]).toEqual([2, expect.stringMatching(/one of --id, --key-file, --key/)]);
    const notUuid = await cli(['key', 'revoke', '--id', 'nope']);
    expect(notUuid.code).toBe(2);
  });

  it('key revoke --key-file - takes the key on standard input', async () => {
    const made = oneDocument(await cli(['key', 'create', '--app', app.app.id, '--role', 'read'])) as { key: string };
    expect(oneDocument(await cli(['key', 'revoke', '--key-file', '-'], `${made.key}\n`))).toEqual({ revoked: true });
    await waitFor('the revoked key to answer 401', async () => (await readKey(made.key)).statusCode === 401, 5_000, 20);
  });

  it('an unknown app is a failure (exit 1)', async () => {
    const r = await cli(['key', 'list', '--app', '00000000-0000-4000-8000-000000000000']);
    expect([r.code, r.stderr]).toEqual([1, expect.stringMatching(/app not found/)]);
  });
});

describe('pushd key set-limit and key clear-limit name the key by id or in a file, never as an argument', () => {
  const limitOf = async (keyId: string) =>
    h.db.db.selectFrom('api_keys').select(['rate_limit_per_second', 'rate_limit_burst']).where('id', '=', keyId).executeTakeFirstOrThrow();
  const made = async () => {
    const key = (oneDocument(await cli(['key', 'create', '--app', app.app.id, '--role', 'read'])) as { key: string }).key;
    const keys = (oneDocument(await cli(['key', 'list', '--app', app.app.id])) as { keys: { id: string; starts_with: string }[] }).keys;
    const row = await h.db.db.selectFrom('api_keys').select('id').where('key_hash', '=', hashApiKey(key)).executeTakeFirstOrThrow();
    expect(keys.map((k) => k.id)).toContain(row.id);
    return { key, id: row.id };
  };

  it('set-limit --id and clear-limit --id change that key alone', async () => {
    const { id } = await made();
    const { id: other } = await made();
    const set = await cli(['key', 'set-limit', '--id', id, '--per-second', '2.5', '--burst', '7']);
    expect(oneDocument(set)).toEqual({ rate_limit: { per_second: 2.5, burst: 7 } });
    expect(await limitOf(id)).toEqual({ rate_limit_per_second: 2.5, rate_limit_burst: 7 });
    expect(await limitOf(other)).toEqual({ rate_limit_per_second: null, rate_limit_burst: null });
    expect(oneDocument(await cli(['key', 'clear-limit', '--id', id]))).toEqual({ rate_limit: null });
    expect(await limitOf(id)).toEqual({ rate_limit_per_second: null, rate_limit_burst: null });
  });

  it('--key-file - reads the key on standard input', async () => {
    const { key, id } = await made();
    expect(oneDocument(await cli(['key', 'set-limit', '--key-file', '-', '--per-second', '1', '--burst', '3'], `${key}\n`))).toEqual({
      rate_limit: { per_second: 1, burst: 3 },
    });
    expect(await limitOf(id)).toEqual({ rate_limit_per_second: 1, rate_limit_burst: 3 });
    expect(oneDocument(await cli(['key', 'clear-limit', '--key-file', '-'], `${key}\n`))).toEqual({ rate_limit: null });
  });

  it('refuses the key as an argument, both forms, neither, and an unknown id', async () => {
    const { key, id } = await made();
    for (const args of [
      ['key', 'set-limit', '--key', key, '--per-second', '1', '--burst', '3'],
      ['key', 'clear-limit', '--key', key],
      ['key', 'clear-limit', '--id', id, '--key-file', '-'],
      ['key', 'clear-limit'],
      ['key', 'clear-limit', '--id', 'nope'],
    ]) {
      const r = await cli(args, `${key}\n`);
      expect([args.join(' '), r.code, JSON.parse(r.stdout)]).toEqual([args.join(' '), 2, { error: expect.any(String) }]);
    }
    const unknown = await cli(['key', 'clear-limit', '--id', '00000000-0000-4000-8000-000000000000']);
    expect([unknown.code, unknown.stderr]).toEqual([1, expect.stringMatching(/active key not found/)]);
    expect(await limitOf(id)).toEqual({ rate_limit_per_second: null, rate_limit_burst: null });
  });
});
