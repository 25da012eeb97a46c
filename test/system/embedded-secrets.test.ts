import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeSecretsKey, keyIdOf, newSecretsKeyText } from '../../src/domain/secrets.js';
import { freePort, Proc } from './proc.js';

/**
 * The embedded default's key (docs/secrets.md): the first command on a fresh DATA_DIR makes DATA_DIR/secrets.key,
 * mode 0600; a rotation makes the new key current and keeps the old one as previous; a DATA_DIR whose key is lost
 * refuses to start.
 */
describe('the secrets key of the embedded default', () => {
  let dataDir: string;
  let env: Record<string, string>;
  const keyFile = () => path.join(dataDir, 'secrets.key');
  const previousFile = () => path.join(dataDir, 'secrets.previous.key');
  const mode = async (file: string) => (await stat(file)).mode & 0o777;
  const cli = async (...args: string[]) => {
    const p = Proc.cli(args, env);
    const { code } = await p.exited;
    return { code, stdout: p.stdout, stderr: p.stderr };
  };
  const json = (r: { code: number | null; stdout: string; stderr: string }) => {
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  };

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'pushd-embedded-secrets-'));
    await chmod(dataDir, 0o755); // as root, PostgreSQL runs as the postgres user and must reach its directory
    env = { DATA_DIR: dataDir, DATABASE_URL: '', EMBEDDED_PG_PORT: String(await freePort()) };
  });
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('is made on the first start with mode 0600, opens what was sealed after a rotation, and is needed to start', async () => {
    const created = json(await cli('app', 'create', '--bundle-id', 'com.example.embedded')) as {
      app: { id: string };
      identity_secret: string;
    };
    expect(await mode(keyFile())).toBe(0o600);
    const firstKey = decodeSecretsKey(await readFile(keyFile(), 'utf8'))!;
    expect(firstKey).toHaveLength(32);

    const newKeyFile = path.join(dataDir, 'new.key');
    const newKeyText = newSecretsKeyText();
    await writeFile(newKeyFile, newKeyText, { mode: 0o600 });
    const rotated = json(await cli('secrets', 'rotate', '--new-key-file', newKeyFile));
    expect(rotated).toMatchObject({
      key_id: keyIdOf(decodeSecretsKey(newKeyText)!),
      previous_key_ids: [keyIdOf(firstKey)],
      resealed: 1,
      key_file: keyFile(),
    });
    expect(await readFile(keyFile(), 'utf8')).toBe(newKeyText);
    expect(decodeSecretsKey(await readFile(previousFile(), 'utf8'))).toEqual(firstKey);
    expect([await mode(keyFile()), await mode(previousFile())]).toEqual([0o600, 0o600]);

    // the identity secret, resealed under the new key, opens to what app create printed: with the new key alone
    await rm(previousFile());
    const on = json(await cli('app', 'set-identity-verification', '--app', created.app.id, '--on'));
    expect(on.identity_secret).toBe(created.identity_secret);

    // a DATA_DIR whose key was replaced refuses to start, naming the setting, and keeps its secrets as they were
    await writeFile(keyFile(), newSecretsKeyText());
    const refused = await cli('app', 'list');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/sealed under key [0-9a-f]{16} \(1 value\).*SECRETS_KEY/);
  }, 240_000);
});
