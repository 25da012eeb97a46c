import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeSecretsKey, keyIdOf, newSecretsKeyText } from '../../src/domain/secrets.js';
import { ConfigError, loadConfig, redactedConfig } from '../../src/platform/config.js';
import { installRotatedKey, loadSecretsKeys } from '../../src/platform/secrets-key.js';

const tempDir = () => mkdtemp(path.join(os.tmpdir(), 'pushd-secrets-key-'));
const mode = async (file: string) => (await stat(file)).mode & 0o777;

describe('the secrets key of a process', () => {
  it('on the embedded default: made under DATA_DIR on the first start, mode 0600, the same one read after', async () => {
    const dir = await tempDir();
    const first = await loadSecretsKeys(loadConfig({ DATA_DIR: dir }));
    const file = path.join(dir, 'secrets.key');
    expect(await mode(file)).toBe(0o600);
    expect(decodeSecretsKey(await readFile(file, 'utf8'))).toHaveLength(32);
    expect(first.defaultFiles?.current).toBe(file);
    expect((await loadSecretsKeys(loadConfig({ DATA_DIR: dir }))).keyring.currentId).toBe(first.keyring.currentId);
  });

  it("on the embedded default: DATA_DIR made when it does not exist yet (a fresh clone's first start)", async () => {
    const dir = path.join(await tempDir(), 'data');
    await loadSecretsKeys(loadConfig({ DATA_DIR: dir }));
    expect(await mode(path.join(dir, 'secrets.key'))).toBe(0o600);
  });

  it('processes starting together on a fresh DATA_DIR make one key between them', async () => {
    const dir = await tempDir();
    const ids = await Promise.all(
      Array.from({ length: 8 }, async () => (await loadSecretsKeys(loadConfig({ DATA_DIR: dir }))).keyring.currentId),
    );
    expect(new Set(ids).size).toBe(1);
  });

  it('a rotation on the embedded default makes the new key current and keeps the old one as previous, both 0600', async () => {
    const dir = await tempDir();
    const before = await loadSecretsKeys(loadConfig({ DATA_DIR: dir }));
    const next = decodeSecretsKey(newSecretsKeyText())!;
    await installRotatedKey(before.defaultFiles!, next);
    expect(await mode(path.join(dir, 'secrets.key'))).toBe(0o600);
    expect(await mode(path.join(dir, 'secrets.previous.key'))).toBe(0o600);
    const after = await loadSecretsKeys(loadConfig({ DATA_DIR: dir }));
    expect(after.keyring.keyIds).toEqual([keyIdOf(next), before.keyring.currentId]);
    // the process that started before reads the new key when it meets it
    expect(before.keyring.open(after.keyring.seal('v', 'identity_secret'), 'identity_secret')).toBe('v');
  });

  it('SECRETS_KEY_FILE and SECRETS_KEY with SECRETS_KEY_PREVIOUS', async () => {
    const dir = await tempDir();
    const text = newSecretsKeyText();
    await writeFile(path.join(dir, 'k'), text);
    const fromFile = await loadSecretsKeys(
      loadConfig({ DATABASE_URL: 'postgres://x@127.0.0.1/db', SECRETS_KEY_FILE: path.join(dir, 'k') }),
    );
    expect(fromFile.keyring.currentId).toBe(keyIdOf(decodeSecretsKey(text)!));
    expect(fromFile.defaultFiles).toBeNull();
    const previous = newSecretsKeyText().trim();
    const fromEnv = await loadSecretsKeys(
      loadConfig({ DATABASE_URL: 'postgres://x@127.0.0.1/db', SECRETS_KEY: text.trim(), SECRETS_KEY_PREVIOUS: previous }),
    );
    expect(fromEnv.keyring.keyIds).toEqual([keyIdOf(decodeSecretsKey(text)!), keyIdOf(decodeSecretsKey(previous)!)]);
  });

  it('refuses, naming the setting: no key on DATABASE_URL, both forms, a file without a key, a key of the wrong size', async () => {
    const dir = await tempDir();
    await writeFile(path.join(dir, 'bad'), 'not a key\n');
    const db = { DATABASE_URL: 'postgres://x@127.0.0.1/db' };
    await expect(loadSecretsKeys(loadConfig(db))).rejects.toThrow(/SECRETS_KEY: a server on DATABASE_URL needs the key/);
    const key = newSecretsKeyText().trim();
    expect(() => loadConfig({ ...db, SECRETS_KEY: key, SECRETS_KEY_FILE: path.join(dir, 'bad') })).toThrow(
      /SECRETS_KEY_FILE: give the key/,
    );
    await expect(loadSecretsKeys(loadConfig({ ...db, SECRETS_KEY_FILE: path.join(dir, 'bad') }))).rejects.toThrow(ConfigError);
    await expect(loadSecretsKeys(loadConfig({ ...db, SECRETS_KEY_FILE: path.join(dir, 'none') }))).rejects.toThrow(/SECRETS_KEY_FILE/);
    expect(() => loadConfig({ SECRETS_KEY_PREVIOUS: 'c2hvcnQ=' })).toThrow(/SECRETS_KEY_PREVIOUS: must be 32 bytes in base64/);
  });

  it('never logs a key', () => {
    const [key, previous] = [newSecretsKeyText().trim(), newSecretsKeyText().trim()];
    const logged = JSON.stringify(redactedConfig(loadConfig({ SECRETS_KEY: key, SECRETS_KEY_PREVIOUS: previous })));
    expect(logged).not.toContain(key);
    expect(logged).not.toContain(previous);
  });
});
