import { beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../src/domain/keys.js';
import { waitFor } from '../engines/engines.js';
import { basic, useHarness } from '../helpers/harness.js';
import { runCli, type CliResult } from './run-cli.js';

/** The CLI as an operator runs it: a separate process on DATABASE_URL, one JSON document on stdout. */

const h = useHarness();
let cli: (...args: string[]) => Promise<CliResult>;

beforeAll(async () => {
  cli = (...args) => runCli(args, { DATABASE_URL: h.databaseUrl });
});

/** Exactly one line of stdout, a JSON document; nothing on stderr. */
function json(r: CliResult): Record<string, unknown> {
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  expect(r.stdout.endsWith('\n')).toBe(true);
  expect(r.stdout.trimEnd().split('\n')).toHaveLength(1);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

const notify = (key: string, username = '') =>
  h.server.inject({
    method: 'POST',
    url: '/v6/notifications',
    headers: { authorization: basic(key, username), 'content-type': 'application/json' },
    payload: { notification: { to: '*', payload: { alert: 'from cli test' } } },
  });

describe('pushd app create', () => {
  let created: {
    app: { id: string; bundle_id: string; name: string };
    keys: { read: string; write: string; sdk: string };
    identity_secret: string;
  };

  beforeAll(async () => {
    created = json(await cli('app', 'create', '--bundle-id', 'com.example.app', '--name', 'Example App')) as typeof created;
  });

  it('prints exactly {app: {id, bundle_id, name}, keys: {read, write, sdk}, identity_secret}', () => {
    expect(Object.keys(created).sort()).toEqual(['app', 'identity_secret', 'keys']);
    expect(Object.keys(created.app).sort()).toEqual(['bundle_id', 'id', 'name']);
    expect(created.app).toMatchObject({ bundle_id: 'com.example.app', name: 'Example App' });
    expect(created.app.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(Object.keys(created.keys).sort()).toEqual(['read', 'sdk', 'write']);
  });

  it('issues three distinct keys of at least 128 bits', () => {
    const keys = Object.values(created.keys);
    expect(new Set(keys).size).toBe(3);
    for (const k of keys) {
      expect(k).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(Buffer.from(k, 'base64url').length * 8).toBeGreaterThanOrEqual(128);
    }
  });

  it('stores only hashes of the keys, each with its role', async () => {
    const rows = await h.db.db
      .selectFrom('api_keys')
      .select(['role', 'key_hash', 'key_hint'])
      .where('app_id', '=', created.app.id)
      .execute();
    expect(rows.map((r) => r.role).sort()).toEqual(['read', 'sdk', 'write']);
    for (const r of rows) {
      const key = created.keys[r.role];
      expect(Buffer.compare(r.key_hash, hashApiKey(key))).toBe(0);
      expect(r.key_hint.length).toBeLessThan(key.length);
    }
  });

  it('the keys work against the API with the bundle id or an empty username', async () => {
    expect((await notify(created.keys.write, 'com.example.app')).statusCode).toBe(201);
    expect((await notify(created.keys.write)).statusCode).toBe(201);
    expect((await notify(created.keys.read)).statusCode).toBe(403);
  });

  it('defaults the name to the bundle id', async () => {
    const r = json(await cli('app', 'create', '--bundle-id', 'com.example.noname')) as typeof created;
    expect(r.app.name).toBe('com.example.noname');
  });

  it('app list shows the apps, no keys', async () => {
    const r = json(await cli('app', 'list')) as { apps: { id: string; bundle_id: string; name: string; created_at: string }[] };
    const mine = r.apps.find((a) => a.id === created.app.id);
    expect(mine).toMatchObject({ bundle_id: 'com.example.app', name: 'Example App' });
    expect(r.apps.map((a) => a.bundle_id)).toContain('com.example.noname');
    for (const key of Object.values(created.keys)) expect(JSON.stringify(r)).not.toContain(key);
    expect(JSON.stringify(r)).not.toContain(created.identity_secret);
  });

  it('key create adds a working key of the role; key revoke makes it answer 401', async () => {
    const made = json(await cli('key', 'create', '--app', created.app.id, '--role', 'write')) as {
      app_id: string;
      role: string;
      key: string;
    };
    expect(made).toMatchObject({ app_id: created.app.id, role: 'write' });
    expect(Object.values(created.keys)).not.toContain(made.key);
    expect((await notify(made.key)).statusCode).toBe(201);

    expect(json(await cli('key', 'revoke', '--key', made.key))).toEqual({ revoked: true });
    // the server had the key in its cache: refused once it hears the revocation, a moment after the commit
    await waitFor('the revoked key to answer 401', async () => (await notify(made.key)).statusCode === 401, 5_000, 20);
    const res = await notify(made.key);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'unauthorized' });
    // the app's other keys still work
    expect((await notify(created.keys.write)).statusCode).toBe(201);

    // revoking again: nothing active to revoke
    failed(await cli('key', 'revoke', '--key', made.key), 1, /active key not found/);
  });

  it('key create --role read gives a key that reads but cannot write', async () => {
    const made = json(await cli('key', 'create', '--app', created.app.id, '--role', 'read')) as { key: string };
    expect((await notify(made.key)).statusCode).toBe(403);
    const aud = await h.server.inject({
      method: 'GET',
      url: '/v6/notifications/00000000-0000-4000-8000-000000000000',
      headers: { authorization: basic(made.key) },
    });
    expect(aud.statusCode).toBe(404); // authenticated and allowed to read; the notification just does not exist
  });
});

/** A failed command: exit code, one JSON document `{"error": …}` on stdout, and the same message on stderr. */
function failed(r: CliResult, code: number, message: RegExp): void {
  expect(r.code, r.stderr).toBe(code);
  expect(r.stdout.trimEnd().split('\n')).toHaveLength(1);
  const { error } = JSON.parse(r.stdout) as { error: string };
  expect(Object.keys(JSON.parse(r.stdout) as object)).toEqual(['error']);
  expect(error).toMatch(message);
  expect(r.stderr).toContain(`error: ${error}`);
}

describe('pushd with bad arguments: exit 2, {"error": …} on stdout, the message on stderr', () => {
  it.concurrent.each([
    [['frobnicate'], /unknown command "frobnicate"/],
    [[], /no command given/],
    [['app'], /^"app" needs a command: app create, app list, /],
    [['app', 'create'], /--bundle-id is required/],
    [['app', 'create', '--bundle-id', 'has space'], /bundle-id must be letters, digits, dots and dashes/],
    [['app', 'create', '--bundle-id', 'com.example.app', '--colour', 'red'], /unknown option --colour/],
    [['app', 'create', '--bundle-id'], /--bundle-id needs a value/],
    [['app', 'create', '--bundle-id', 'a', '--bundle-id', 'b'], /--bundle-id is given twice/],
    [['app', 'list', 'extra'], /unexpected argument "extra"/],
    [['key', 'create', '--role', 'read'], /--app is required/],
    [['key', 'create', '--app', 'not-a-uuid', '--role', 'read'], /--app must be a UUID/],
    [['key', 'create', '--app', '00000000-0000-4000-8000-000000000000', '--role', 'admin'], /--role must be one of read, write, sdk/],
    [['key', 'revoke'], /give one of --id, --key-file, --key/],
    [
      ['key', 'set-limit', '--id', '00000000-0000-4000-8000-000000000000', '--per-second', 'fast', '--burst', '1'],
      /--per-second must be a number/,
    ],
    [['key', 'clear-limit', '--key', 'k'], /unknown option --key/],
    [['app', 'set-limits', '--app', '00000000-0000-4000-8000-000000000000'], /give --max-per-minute/],
    [
      ['app', 'set-limits', '--app', '00000000-0000-4000-8000-000000000000', '--quiet-hours', '22-8'],
      /--quiet-hours must be HH:MM-HH:MM, HH:MM-HH:MM\/drop or none/,
    ],
  ])('pushd %j', async (args, message) => {
    failed(await cli(...args), 2, message);
  });

  it('a usage error is found before any database is opened', async () => {
    const r = await runCli(['key', 'create', '--app', 'not-a-uuid', '--role', 'read'], {
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere',
    });
    failed(r, 2, /--app must be a UUID/);
  });
});

describe('pushd: a well-formed command that fails exits 1 with {"error": …}', () => {
  it.concurrent.each([
    [['key', 'create', '--app', '00000000-0000-4000-8000-000000000000', '--role', 'read'], /app not found/],
    [['key', 'revoke', '--key', 'never-issued'], /active key not found/],
  ])('pushd %j', async (args, message) => {
    failed(await cli(...args), 1, message);
  });

  it('revoking a key twice: the second revoke exits 1', async () => {
    const created = json(await cli('app', 'create', '--bundle-id', 'com.example.revoke-twice')) as { keys: { read: string } };
    expect((await cli('key', 'revoke', '--key', created.keys.read)).code).toBe(0);
    failed(await cli('key', 'revoke', '--key', created.keys.read), 1, /active key not found/);
  });

  it('refuses a second app with the same bundle id', async () => {
    json(await cli('app', 'create', '--bundle-id', 'com.example.twice'));
    failed(await cli('app', 'create', '--bundle-id', 'com.example.twice'), 1, /exists/);
    const rows = await h.db.db.selectFrom('apps').select('id').where('bundle_id', '=', 'com.example.twice').execute();
    expect(rows).toHaveLength(1);
  });

  it('a bad configuration value exits 2 naming it', async () => {
    failed(await runCli(['app', 'list'], { DATABASE_URL: h.databaseUrl, LOG_LEVEL: 'chatty' }), 2, /LOG_LEVEL/);
  });

  it('an unreachable database exits 1 with the cause', async () => {
    failed(await runCli(['app', 'list'], { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere' }), 1, /ECONNREFUSED/);
  });
});

describe('pushd --help', () => {
  const commands = ['migrate', 'app create', 'app list', 'app set-apns', 'app set-fcm', 'app set-limits'];
  const more = ['key create', 'key revoke', 'key set-limit', 'key clear-limit'];

  it.concurrent.each([['--help'], ['-h']])('pushd %s lists every command, exit 0, with no database', async (flag) => {
    const r = await runCli([flag], { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere' });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/^Usage: pushd <command> \[options\]/);
    for (const c of [...commands, ...more]) expect(r.stdout).toMatch(new RegExp(`^  ${c} +\\S`, 'm'));
    expect(r.stdout).toMatch(/Exit codes: 0 done; 2 .*; 1 /);
  });

  it.concurrent.each([
    ['app', ['app create', 'app list', 'app set-apns', 'app set-limits', 'app set-identity-verification'], 'key create'],
    ['key', more, 'app create'],
  ])('pushd %s --help is the help of that group: its usage line and its commands only, exit 0', async (group, listed, other) => {
    const r = await runCli([group, '--help'], {});
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^Usage: pushd ${group} <command> \\[options\\]\n`));
    expect(r.stdout).not.toContain('Usage: pushd <command>');
    for (const c of listed) expect(r.stdout).toMatch(new RegExp(`^  ${c} +\\S`, 'm'));
    expect(r.stdout).not.toContain(other);
    expect(r.stdout).toContain(`\`pushd ${group} <command> --help\` lists the options of one.`);
  });

  it.concurrent.each([
    [['app', 'create'], ['--bundle-id ID', '--name NAME'], 'pushd app create --bundle-id ID [--name NAME]'],
    [['app', 'list'], [], 'pushd app list'],
    [['key', 'create'], ['--app ID', '--role ROLE'], 'pushd key create --app ID --role ROLE'],
    [
      ['app', 'set-apns'],
      ['--app ID', '--key-file FILE', '--key-id K', '--team-id T', '--topic X'],
      'pushd app set-apns --app ID --key-file FILE --key-id K --team-id T [--topic X]',
    ],
    [
      ['app', 'set-limits'],
      ['--max-per-minute N|none', '--default-time-zone ZONE|none', '--quiet-hours HH:MM-HH:MM[/drop]|none'],
      'pushd app set-limits --app ID [--max-per-minute',
    ],
    [
      ['key', 'set-limit'],
      ['--id ID', '--key-file FILE', '--per-second N', '--burst M'],
      'pushd key set-limit [--id ID] [--key-file FILE] --per-second N --burst M',
    ],
  ])('pushd %j --help: its usage line and every option, exit 0', async (words, options, synopsis) => {
    // given after other options too, and with a required one missing: help wins
    const r = await runCli([...words, '--help'], {});
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`Usage: ${synopsis}`);
    for (const o of [...options, '-h, --help']) expect(r.stdout).toMatch(new RegExp(`^  ${o.replace(/[|[\]]/g, '\\$&')} +\\S`, 'm'));
  });
});

describe('pushd migrate', () => {
  it('migrates a fresh database and is idempotent', async () => {
    const admin = new URL(h.databaseUrl);
    const name = `${admin.pathname.slice(1)}_m`;
    await h.db.pool.query(`CREATE DATABASE ${name}`);
    const url = new URL(h.databaseUrl);
    url.pathname = `/${name}`;
    try {
      const first = await runCli(['migrate'], { DATABASE_URL: url.toString() });
      expect(json(first)).toEqual({ migrated: true });
      const pg = (await import('pg')).default;
      const client = new pg.Client({ connectionString: url.toString() });
      await client.connect();
      const versions = (await client.query<{ version: string }>('SELECT version FROM schema_migrations ORDER BY version')).rows.map(
        (r) => r.version,
      );
      await client.end();
      expect(versions).toContain('001_init.sql');
      expect(json(await runCli(['migrate'], { DATABASE_URL: url.toString() }))).toEqual({ migrated: true });
    } finally {
      await h.db.pool.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    }
  });
});
