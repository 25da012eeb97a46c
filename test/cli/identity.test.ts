import { createHmac, randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { basic, useHarness } from '../helpers/harness.js';
import { waitFor } from '../helpers/gateways.js';
import { runCli, type CliResult } from './run-cli.js';

/**
 * `app create` turns identity verification on and prints the secret once; `app set-identity-verification` turns it
 * off, on again (the same secret) or rotates it, and the running server applies each at once.
 */
const h = useHarness();
const cli = (...args: string[]): Promise<CliResult> => runCli(args, { DATABASE_URL: h.databaseUrl });

function json(r: CliResult): Record<string, unknown> {
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  expect(r.stdout.trimEnd().split('\n')).toHaveLength(1);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

let created: { app: { id: string }; keys: { sdk: string }; identity_secret: string };
const register = (device: Record<string, unknown>) =>
  h.server.inject({
    method: 'POST',
    url: '/v6/devices',
    headers: { authorization: basic(created.keys.sdk) },
    payload: { device: { platform: 'ios', token: randomUUID().replace(/-/g, ''), ...device } },
  });
const proven = (userId: string, secret: string) => ({
  user_id: userId,
  user_id_auth_hash: createHmac('sha256', secret).update(userId).digest('hex'),
});
/** Whether verification is on, and the secret as stored, opened with the server's keys. */
const stored = async () => {
  const row = await h.db.db
    .selectFrom('apps')
    .select(['identity_verification', 'identity_secret'])
    .where('id', '=', created.app.id)
    .executeTakeFirstOrThrow();
  return { ...row, identity_secret: row.identity_secret && h.secrets.open(row.identity_secret, 'identity_secret') };
};

beforeAll(async () => {
  created = json(await cli('app', 'create', '--bundle-id', 'com.example.identity-cli')) as typeof created;
});

describe('app create', () => {
  it('prints the identity secret with the keys and turns verification on', async () => {
    expect(created.identity_secret).toMatch(/^[0-9a-f]{64}$/);
    expect(await stored()).toEqual({ identity_verification: true, identity_secret: created.identity_secret });
    const refused = await register({ user_id: 'u-1' });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toMatch(/^device\.user_id_auth_hash: /);
    expect((await register(proven('u-1', created.identity_secret))).statusCode).toBe(201);
  });
});

describe('app set-identity-verification', () => {
  it('--off turns it off without printing the secret, which stays stored', async () => {
    const r = json(await cli('app', 'set-identity-verification', '--app', created.app.id, '--off'));
    expect(r).toEqual({ app_id: created.app.id, identity_verification: false });
    expect(await stored()).toEqual({ identity_verification: false, identity_secret: created.identity_secret });
    await waitFor('the server to hear it', async () => (await register({ user_id: 'u-2' })).statusCode === 201);
  });

  it('--on turns it on again with the same secret, and prints it', async () => {
    const r = json(await cli('app', 'set-identity-verification', '--app', created.app.id, '--on'));
    expect(r).toEqual({ app_id: created.app.id, identity_verification: true, identity_secret: created.identity_secret });
    await waitFor('the server to hear it', async () => (await register({ user_id: 'u-3' })).statusCode === 403);
    expect((await register(proven('u-3', created.identity_secret))).statusCode).toBe(201);
  });

  it('--rotate prints a new secret: hashes made with the old one no longer bind', async () => {
    const r = json(await cli('app', 'set-identity-verification', '--app', created.app.id, '--rotate')) as { identity_secret: string };
    expect(r).toEqual({ app_id: created.app.id, identity_verification: true, identity_secret: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(r.identity_secret).not.toBe(created.identity_secret);
    expect(await stored()).toEqual({ identity_verification: true, identity_secret: r.identity_secret });
    await waitFor('the server to hear it', async () => (await register(proven('u-4', created.identity_secret))).statusCode === 403);
    expect((await register(proven('u-4', r.identity_secret))).statusCode).toBe(201);
  });

  /** An app as migration 019 leaves one made before it: no secret, verification off. */
  const appBefore019 = async (bundleId: string) => {
    const made = json(await cli('app', 'create', '--bundle-id', bundleId)) as typeof created;
    await h.db.db.updateTable('apps').set({ identity_verification: false, identity_secret: null }).where('id', '=', made.app.id).execute();
    return made.app.id;
  };
  const hex64 = expect.stringMatching(/^[0-9a-f]{64}$/);

  it("the README's migration path: --rotate gives an old app a secret with verification still off, --on keeps it", async () => {
    const id = await appBefore019('com.example.identity-legacy');
    const made = json(await cli('app', 'set-identity-verification', '--app', id, '--rotate')) as { identity_secret: string };
    expect(made).toEqual({ app_id: id, identity_verification: false, identity_secret: hex64 });
    const on = json(await cli('app', 'set-identity-verification', '--app', id, '--on'));
    expect(on).toEqual({ app_id: id, identity_verification: true, identity_secret: made.identity_secret });
  });

  it('--on on an app that has no secret makes one', async () => {
    const id = await appBefore019('com.example.identity-bare');
    const r = json(await cli('app', 'set-identity-verification', '--app', id, '--on'));
    expect(r).toEqual({ app_id: id, identity_verification: true, identity_secret: hex64 });
    const { identity_secret: sealed } = await h.db.db
      .selectFrom('apps')
      .select('identity_secret')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    expect(h.secrets.open(sealed!, 'identity_secret')).toBe(r.identity_secret);
  });

  it.each([
    [['--app', 'APP'], /give exactly one of --on, --off, --rotate/],
    [['--app', 'APP', '--on', '--off'], /give exactly one of --on, --off, --rotate/],
    [['--on'], /--app is required/],
    [['--app', 'APP', '--on=yes'], /--on/],
  ])('%j: a usage error, exit 2, nothing printed or changed', async (args, message) => {
    const before = await stored();
    const r = await cli('app', 'set-identity-verification', ...args.map((a) => (a === 'APP' ? created.app.id : a)));
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout).error).toMatch(message);
    expect(r.stderr).toMatch(message);
    expect(await stored()).toEqual(before);
  });

  it('an unknown app: exit 1, app not found', async () => {
    const r = await cli('app', 'set-identity-verification', '--app', randomUUID(), '--rotate');
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toEqual({ error: 'app not found' });
    expect(r.stderr).toMatch(/app not found/);
  });

  it('an app id that is not a UUID: exit 2, naming --app', async () => {
    const r = await cli('app', 'set-identity-verification', '--app', 'not-an-id', '--rotate');
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout).error).toMatch(/--app must be a UUID/);
  });
});
