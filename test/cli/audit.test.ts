import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { useHarness } from '../helpers/harness.js';
import { withTestSecretsKey } from '../engines/secrets-key.js';
import { oneDocument, runCli, type CliResult } from './run-cli.js';

/**
 * `pushd audit --app ID [--since ISO]`: the app's audit log as one JSON document, newest first; the commands that
 * change an app are recorded by `cli`, with no secret in what is stored or printed.
 */
const h = useHarness();
const cli = (...args: string[]): Promise<CliResult> => runCli(args, { DATABASE_URL: h.databaseUrl });

const json = oneDocument;

interface Printed {
  app_id: string;
  entries: { at: string; action: string; actor: unknown; client_address: unknown; request_id: unknown; details: Record<string, unknown> }[];
}

describe('pushd audit', () => {
  it('prints what the commands changed, by cli, newest first, without a secret; --since keeps the later ones', async () => {
    const created = json(await cli('app', 'create', '--bundle-id', 'com.example.audit-cli')) as {
      app: { id: string };
      keys: Record<string, string>;
      identity_secret: string;
    };
    const app = created.app.id;
    const { key } = json(await cli('key', 'create', '--app', app, '--role', 'sdk')) as { key: string };
    json(await runCli(['key', 'set-limit', '--key-file', '-', '--per-second', '5', '--burst', '20'], { DATABASE_URL: h.databaseUrl }, key));
    json(await cli('key', 'revoke', '--key', key));
    json(await cli('app', 'set-limits', '--app', app, '--max-per-minute', '1200', '--quiet-hours', '22:00-07:00'));
    const rotated = json(await cli('app', 'set-identity-verification', '--app', app, '--rotate')) as { identity_secret: string };
    const hmsSecret = 'a-client-secret-of-huawei-0123456789';
    json(await cli('app', 'set-hms', '--app', app, '--hms-app-id', '10000042', '--client-secret', hmsSecret));

    const result = await cli('audit', '--app', app);
    const printed = json(result) as unknown as Printed;
    expect(printed.app_id).toBe(app);
    const keyId = printed.entries.find((e) => e.action === 'key.created')!.details.key_id;
    expect(printed.entries.map((e) => [e.action, e.details])).toEqual([
      ['credentials.set', { platform: 'hms' }],
      ['identity_verification.rotated', {}],
      ['settings.changed', { changed: ['max_per_minute', 'quiet_hours'] }],
      ['key.revoked', { key_id: keyId, role: 'sdk' }],
      ['key.limit_set', { key_id: keyId, role: 'sdk', limit: { per_second: 5, burst: 20 } }],
      ['key.created', { key_id: keyId, role: 'sdk' }],
      ['app.created', { bundle_id: 'com.example.audit-cli', name: 'com.example.audit-cli', key_ids: expect.any(Object) }],
    ]);
    // the command line's rows name who ran it, and where, in place of a client address
    const operator = `${os.userInfo().username}@${os.hostname()}`;
    for (const e of printed.entries)
      expect(e).toMatchObject({ actor: { key_id: null, role: 'cli' }, client_address: operator, request_id: null });
    for (const secret of [key, ...Object.values(created.keys), created.identity_secret, rotated.identity_secret, hmsSecret])
      expect(result.stdout).not.toContain(secret);

    const since = printed.entries[3]!.at;
    const later = json(await cli('audit', '--app', app, '--since', since)) as unknown as Printed;
    expect(later.entries.map((e) => e.action)).toEqual(printed.entries.filter((e) => e.at >= since).map((e) => e.action));
    expect(later.entries.length).toBeLessThan(printed.entries.length);
  });

  it('prints a table on a terminal, JSON there with --json, and its version with --version', async () => {
    const created = json(await cli('app', 'create', '--bundle-id', 'com.example.audit-table')) as { app: { id: string } };
    // under script(1) stdout is a terminal, as when a person runs the command
    const onTerminal = (...args: string[]) =>
      new Promise<string>((resolve, reject) => {
        const command = ['node', 'bin/pushd.js', ...args].map((a) => `'${a}'`).join(' ');
        execFile(
          'script',
          ['-qec', command, '/dev/null'],
          { env: withTestSecretsKey({ PATH: process.env.PATH, DATABASE_URL: h.databaseUrl }) },
          (err, out) => (err ? reject(err) : resolve(out.replace(/\r/g, ''))),
        );
      });
    const table = (await onTerminal('audit', '--app', created.app.id)).trimEnd().split('\n');
    expect(table[0]).toMatch(/^AT +ACTION +BY +FROM +REQUEST +DETAILS$/);
    expect(table[1]).toMatch(
      /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ +app\.created +cli +\S+@\S+ +- +\{.*"bundle_id":"com\.example\.audit-table"/,
    );
    const asJson = JSON.parse(await onTerminal('audit', '--app', created.app.id, '--json')) as Printed;
    expect(asJson.entries.map((e) => e.action)).toEqual(['app.created']);
    const version = await cli('--version');
    expect([version.code, version.stdout]).toEqual([0, `pushd ${JSON.parse(readFileSync('package.json', 'utf8')).version}\n`]);
  });

  it('refuses a --since that is not a date and an app id that is not a UUID, naming the option', async () => {
    const bad = await cli('audit', '--app', '00000000-0000-0000-0000-000000000000', '--since', 'last week');
    expect(bad.code).toBe(2);
    expect(bad.stdout).toContain('--since');
    const noApp = await cli('audit', '--app', 'nope');
    expect(noApp.code).toBe(2);
    expect(noApp.stdout).toContain('--app');
  });
});
