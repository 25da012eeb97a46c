import { createReadStream, existsSync } from 'node:fs';
import path from 'node:path';
import { restoreBackup, writeBackup } from '../app/backup.js';
import { readKeyFile } from '../platform/secrets-key.js';
import { given, UsageError, type AnyCommand, type Command, type LocalCommand } from './command.js';

/**
 * backup / restore of the embedded default (docs/deploying.md#backups): one file made beside the running server
 * with the embedded PostgreSQL itself, and a new DATA_DIR made from it. A server on DATABASE_URL is backed up with
 * that PostgreSQL's own tools.
 */
export const backupCommands: Record<string, AnyCommand> = {
  backup: {
    summary: 'Writes a backup of the embedded default (its PostgreSQL and its secrets key) while the server runs.',
    options: {
      out: { value: 'FILE', help: 'where the backup goes (made with mode 0600); - for standard output', required: true },
      'without-secrets-key': { help: 'leaves DATA_DIR/secrets.key out: you keep the key apart (docs/secrets.md)' },
    },
    writesStdout: (a) => a.out === '-',
    refuses: (config) =>
      config.DATABASE_URL
        ? 'backup is for the embedded default (no DATABASE_URL): back up a PostgreSQL of your own with its own pg_dump ' +
          'or pg_basebackup (docs/deploying.md)'
        : undefined,
    run: async (a, rt) => {
      const out = given(a, 'out');
      if (out === '-' && process.stdout.isTTY) throw new UsageError('--out -: standard output is a terminal; redirect it to a file');
      return writeBackup({
        embedded: rt.embedded!,
        secrets: rt.secrets,
        withKey: a['without-secrets-key'] === undefined,
        out: out === '-' ? { stream: process.stdout } : { file: path.resolve(out) },
      });
    },
  } satisfies Command,
  restore: {
    summary: 'Makes a new DATA_DIR from a backup; start the server on it (DATA_DIR=DIR).',
    options: {
      from: {
        value: 'FILE',
        help: 'the backup; - for standard input',
        required: true,
        check: (v) => (v === '-' || existsSync(v) ? undefined : `: there is no file ${v}`),
      },
      'data-dir': { value: 'DIR', help: 'the new DATA_DIR: a directory that is empty or does not exist yet', required: true },
      'secrets-key-file': { value: 'FILE', help: 'the key kept apart from a backup made --without-secrets-key' },
    },
    local: true,
    run: async (a) => {
      const from = given(a, 'from');
      const keyFile = a['secrets-key-file'];
      const secretsKey = keyFile ? await readKeyFile(keyFile, '--secrets-key-file') : undefined;
      if (keyFile && !secretsKey) throw new UsageError(`--secrets-key-file: there is no file ${keyFile}`);
      const source = from === '-' ? process.stdin : createReadStream(from);
      return restoreBackup({ from: source, dataDir: path.resolve(given(a, 'data-dir')), ...(secretsKey ? { secretsKey } : {}) });
    },
  } satisfies LocalCommand,
};
