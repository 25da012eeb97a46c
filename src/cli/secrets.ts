import { operatorServices } from '../app/runtime.js';
import { keyIdOf } from '../domain/secrets.js';
import { installRotatedKey, readKeyFile } from '../platform/secrets-key.js';
import { given, UsageError, type Command } from './command.js';

/**
 * secrets rotate --new-key-file F: reseals every stored credential and secret under the key in F, while the current
 * key (and SECRETS_KEY_PREVIOUS) still opens what is not resealed yet. On the embedded default the new key becomes
 * DATA_DIR/secrets.key and the current one DATA_DIR/secrets.previous.key before anything is resealed.
 */
export const secretsCommands: Record<string, Command> = {
  'secrets rotate': {
    summary: 'Reseals every stored credential and secret under a new key (docs/secrets.md).',
    options: {
      'new-key-file': { value: 'FILE', help: 'the new key: 32 random bytes in base64 (openssl rand -base64 32 > FILE)', required: true },
    },
    run: async (a, rt) => {
      const file = given(a, 'new-key-file');
      const key = await readKeyFile(file, '--new-key-file');
      if (!key) throw new UsageError(`--new-key-file: there is no file ${file}`);
      const files = rt.secrets.defaultFiles;
      if (files && keyIdOf(key) !== rt.secrets.keyring.currentId) await installRotatedKey(files, key);
      const rotated = await operatorServices(rt).secrets.rotate(key);
      return { ...rotated, key_file: files?.current ?? null };
    },
  },
};
