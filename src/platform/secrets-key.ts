import { readFileSync } from 'node:fs';
import { chmod, link, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { decodeSecretsKey, newSecretsKeyText, SecretsKeyring } from '../domain/secrets.js';
import { ConfigError, type Config } from './config.js';

/** Where a process's keys come from: the settings, or the embedded default's files under DATA_DIR. */
export interface SecretsKeySource {
  keyring: SecretsKeyring;
  /** the setting (or file) the current key came from, for the messages that ask for it */
  currentFrom: string;
  /** the embedded default's key files (none when a setting gives the key): what a rotation replaces */
  defaultFiles: { current: string; previous: string } | null;
}

/** The embedded default's key files: the current key, and the one it replaced at the last rotation. */
export function defaultKeyFiles(config: Config): { current: string; previous: string } {
  return { current: path.join(config.dataDir, 'secrets.key'), previous: path.join(config.dataDir, 'secrets.previous.key') };
}

/**
 * The keys of this process: SECRETS_KEY or SECRETS_KEY_FILE (with SECRETS_KEY_PREVIOUS); neither, on the embedded
 * PostgreSQL, the key file under DATA_DIR, made on the first start (mode 0600). A server on DATABASE_URL must be
 * given its key: every process of a deployment needs the same one, which none can make for the others.
 */
export async function loadSecretsKeys(config: Config): Promise<SecretsKeySource> {
  const previous = config.SECRETS_KEY_PREVIOUS ? [decodeSecretsKey(config.SECRETS_KEY_PREVIOUS)!] : [];
  if (config.SECRETS_KEY)
    return { keyring: new SecretsKeyring(decodeSecretsKey(config.SECRETS_KEY)!, previous), currentFrom: 'SECRETS_KEY', defaultFiles: null };
  if (config.SECRETS_KEY_FILE) {
    const key = await readKeyFile(config.SECRETS_KEY_FILE, 'SECRETS_KEY_FILE');
    if (!key) throw new ConfigError(`invalid configuration: SECRETS_KEY_FILE: cannot read a key from ${config.SECRETS_KEY_FILE}`);
    const file = config.SECRETS_KEY_FILE;
    const reload = () => ({ current: keyInFile(file), others: [] });
    return { keyring: new SecretsKeyring(key, previous, reload), currentFrom: 'SECRETS_KEY_FILE', defaultFiles: null };
  }
  if (config.DATABASE_URL)
    throw new ConfigError(
      'invalid configuration: SECRETS_KEY: a server on DATABASE_URL needs the key that seals its credentials, the same in every ' +
        'process: SECRETS_KEY (openssl rand -base64 32) or SECRETS_KEY_FILE (docs/secrets.md)',
    );
  const files = defaultKeyFiles(config);
  let current = await readKeyFile(files.current, 'the key file');
  if (!current) {
    await writeKeyFile(files.current, newSecretsKeyText(), { exclusive: true }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err; // another process made it first: read theirs
    });
    current = await readKeyFile(files.current, 'the key file');
    if (!current) throw new ConfigError(`invalid configuration: SECRETS_KEY_FILE: ${files.current} holds no key`);
  }
  const before = await readKeyFile(files.previous, 'the previous key file');
  return {
    keyring: new SecretsKeyring(current, [...previous, ...(before ? [before] : [])], () => ({
      current: keyInFile(files.current),
      others: [keyInFile(files.previous)].filter((key) => key !== undefined),
    })),
    currentFrom: `the key file ${files.current}`,
    defaultFiles: files,
  };
}

/** The key a file holds now; undefined when it is missing or unreadable at this moment (what is held stays). */
function keyInFile(file: string): Buffer | undefined {
  try {
    return decodeSecretsKey(readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

/** The key a file holds; undefined when there is no such file. A file that holds something else is an error. */
export async function readKeyFile(file: string, what: string): Promise<Buffer | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new ConfigError(`${what}: cannot read ${file} (${(err as Error).message})`);
  }
  const key = decodeSecretsKey(text);
  if (!key) throw new ConfigError(`${what}: ${file} must hold 32 bytes in base64 (openssl rand -base64 32)`);
  return key;
}

/**
 * Writes a key file readable by its owner only, whole before it has its name (a process starting meanwhile never
 * reads half a key): `exclusive` fails with EEXIST where one exists, else it replaces it.
 */
export async function writeKeyFile(file: string, text: string, opts: { exclusive: boolean }): Promise<void> {
  const temporary = `${file}.${process.pid}.tmp`;
  // a fresh clone's first `npm start` makes its key before the embedded PostgreSQL makes DATA_DIR (whose mode is
  // PostgreSQL's to need: it may run as another user; the key file is the owner's alone)
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(temporary, text, { mode: 0o600 });
  try {
    await chmod(temporary, 0o600);
    if (opts.exclusive) await link(temporary, file);
    else await rename(temporary, file);
  } finally {
    await rm(temporary, { force: true });
  }
}

/**
 * The embedded default's rotation: the current key file's key becomes the previous one, `key` the current one, both
 * written before anything is resealed, so a start at any moment holds the key of every stored value.
 */
export async function installRotatedKey(files: { current: string; previous: string }, key: Buffer): Promise<void> {
  const current = await readFile(files.current, 'utf8');
  await writeKeyFile(files.previous, current, { exclusive: false });
  await writeKeyFile(files.current, `${key.toString('base64')}\n`, { exclusive: false });
}
