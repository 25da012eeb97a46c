import { createWriteStream } from 'node:fs';
import { chown, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { keyIdOf } from '../domain/secrets.js';
import { backUpCluster } from '../db/cluster-backup.js';
import { clusterDirOf, PASSWORD_FILE, type EmbeddedDatabase } from '../db/embedded.js';
import { clusterOwner, freePort } from '../db/postmaster.js';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import { openDatabaseRuntime, operatorServices } from './runtime.js';
import type { SecretsKeySource } from '../platform/secrets-key.js';
import { TarFormatError, TarReader, TarWriter } from '../platform/tar.js';

/**
 * A backup of the embedded default: one gzipped tar holding a manifest, the cluster's online base backup (its
 * WAL from start to stop and its backup_label), the password of its superuser and, unless left out, the key files
 * that open the sealed secrets, each under the name it has in DATA_DIR, so restoring is unpacking into an empty
 * directory.
 */

const MANIFEST = 'pushd-backup.json';
const KEY_FILES = ['secrets.key', 'secrets.previous.key'] as const;

interface Manifest {
  format: 'pushd-backup';
  version: 1;
  created_at: string;
  postgres_version: string;
  /** the ids of the keys the process making the backup held (the current one first), and whether they are in it */
  secrets_key_ids: string[];
  secrets_key_included: boolean;
}

export interface BackupOptions {
  embedded: EmbeddedDatabase;
  secrets: SecretsKeySource;
  withKey: boolean;
  /** a file (written under a temporary name, then renamed), or an open stream such as stdout */
  out: { file: string } | { stream: Writable };
}

/** Writes the backup; answers what it holds. Needs the cluster running (the CLI's runtime starts it). */
export async function writeBackup(opts: BackupOptions) {
  const { embedded, secrets } = opts;
  const included = opts.withKey && secrets.defaultFiles !== null;
  const created = new Date().toISOString();
  const temporary = 'file' in opts.out ? `${opts.out.file}.partial` : null;
  if (temporary) await rm(temporary, { force: true }); // an earlier run's, cut short: made anew with mode 0600
  const target = temporary ? createWriteStream(temporary, { mode: 0o600, flags: 'wx' }) : (opts.out as { stream: Writable }).stream;
  const gzip = createGzip();
  let bytes = 0;
  const counter = new PassThrough().on('data', (chunk: Buffer) => (bytes += chunk.length));
  const written = pipeline(gzip, counter, target, { end: temporary !== null });
  try {
    const tar = new TarWriter(gzip);
    const postgresVersion = (await readFile(path.join(embedded.clusterDir, 'PG_VERSION'), 'utf8')).trim();
    const manifest: Manifest = {
      format: 'pushd-backup',
      version: 1,
      created_at: created,
      postgres_version: postgresVersion,
      secrets_key_ids: secrets.keyring.keyIds,
      secrets_key_included: included,
    };
    const json = Buffer.from(JSON.stringify(manifest, null, 2) + '\n');
    await tar.file(MANIFEST, json.length, json);
    await copyFileInto(tar, embedded.dataDir, PASSWORD_FILE);
    if (included) for (const name of KEY_FILES) await copyFileInto(tar, embedded.dataDir, name);
    await tar.directory('postgres');
    const cluster = await backUpCluster(embedded.url, embedded.clusterDir, {
      directory: (name) => tar.directory(`postgres/${name}`),
      file: (name, size, body) => tar.file(`postgres/${name}`, size, body),
    });
    await tar.end();
    gzip.end();
    await written;
    if (temporary) await rename(temporary, (opts.out as { file: string }).file);
    return {
      out: 'file' in opts.out ? opts.out.file : '-',
      bytes,
      created_at: created,
      postgres_version: cluster.postgresVersion,
      wal_segments: cluster.walSegments,
      secrets_key_ids: manifest.secrets_key_ids,
      secrets_key_included: included,
    };
  } catch (err) {
    gzip.destroy();
    await written.catch(() => undefined);
    if (temporary) await rm(temporary, { force: true });
    throw err;
  }
}

/** A file of DATA_DIR, when it is there (the previous key exists only after a rotation). */
async function copyFileInto(tar: TarWriter, dataDir: string, name: string): Promise<void> {
  const content = await readFile(path.join(dataDir, name)).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (content) await tar.file(name, content.length, content);
}

/** The restore was refused before anything was written: the directory, the key given, or the file is wrong. */
export class RestoreRefused extends Error {}

export interface RestoreOptions {
  from: Readable;
  dataDir: string;
  /** the key kept apart from a backup made without it, written as DATA_DIR/secrets.key */
  secretsKey?: Buffer;
  /** the settings the restored DATA_DIR is opened with once, to check it (its own PostgreSQL on a free port) */
  config: Config;
  log: Logger;
}

/**
 * Unpacks a backup into a new DATA_DIR (an empty or missing directory), then opens it once as a server start would
 * (its PostgreSQL replays the backup's WAL, migrations, every sealed secret opened) and stops it, so what it answers
 * is a DATA_DIR that starts. A failure to unpack leaves the directory empty again; a failure to open leaves it for
 * a look, and says why.
 */
export async function restoreBackup(opts: RestoreOptions) {
  const restored = await unpackInto(opts);
  const keyGiven = restored.secrets_key_restored || opts.config.SECRETS_KEY !== undefined || opts.config.SECRETS_KEY_FILE !== undefined;
  // without its key a start would make a new key file, which opens nothing the backup sealed
  if (!keyGiven) return { ...restored, checked: false };
  return { ...restored, checked: true, apps: await countAppsOf(opts) };
}

/** The restored DATA_DIR's apps, read through the same start-up the server runs (which fails on what would not start). */
async function countAppsOf({ config, dataDir, log }: RestoreOptions): Promise<number> {
  const settings = { ...config, DATABASE_URL: undefined, DATABASE_READ_URL: undefined, DATA_DIR: dataDir, dataDir };
  const runtime = await openDatabaseRuntime({ ...settings, EMBEDDED_PG_PORT: await freePort() }, log);
  try {
    return (await operatorServices(runtime).apps.listApps()).length;
  } finally {
    await runtime.close();
  }
}

async function unpackInto(opts: RestoreOptions) {
  const { dataDir } = opts;
  const existing = await readdir(dataDir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [];
    throw err;
  });
  if (existing.length > 0)
    throw new RestoreRefused(
      `${dataDir} is not empty (${existing.length} entries): a restore makes a new DATA_DIR, it never writes over one`,
    );
  await mkdir(dataDir, { recursive: true });
  try {
    return await unpack(opts);
  } catch (err) {
    for (const name of await readdir(dataDir)) await rm(path.join(dataDir, name), { recursive: true, force: true });
    throw err instanceof TarFormatError || (err as NodeJS.ErrnoException).code === 'Z_DATA_ERROR' || isCutShort(err)
      ? new RestoreRefused(`not a whole pushd backup: ${(err as Error).message}`)
      : err;
  }
}

const isCutShort = (err: unknown) => (err as NodeJS.ErrnoException).code === 'Z_BUF_ERROR';

async function unpack({ from, dataDir, secretsKey }: RestoreOptions) {
  const gunzip = createGunzip();
  const reading = pipeline(from, gunzip);
  reading.catch(() => undefined); // its error is the reader's too
  const tar = new TarReader(gunzip);
  const manifest = await readManifest(tar);
  if (secretsKey) checkGivenKey(manifest, secretsKey);
  const owner = clusterOwner();
  const names = new Set<string>();
  for (let entry = await tar.next(); entry; entry = await tar.next()) {
    const top = entry.name.split('/')[0]!;
    if (!(top === 'postgres' || top === PASSWORD_FILE || (KEY_FILES as readonly string[]).includes(top)))
      throw new TarFormatError(`${entry.name} is not part of a pushd backup`);
    const target = path.join(dataDir, entry.name);
    if (entry.type === 'directory') await mkdir(target, { mode: 0o700 });
    else await pipeline(tar.body(), createWriteStream(target, { mode: 0o600, flags: 'wx' }));
    if (owner && top === 'postgres') await chown(target, owner.uid, owner.gid);
    names.add(entry.name);
  }
  await reading;
  for (const needed of [PASSWORD_FILE, 'postgres/PG_VERSION', 'postgres/backup_label', 'postgres/global/pg_control'])
    if (!names.has(needed)) throw new TarFormatError(`${needed} is missing`);
  if (secretsKey) await writeFile(path.join(dataDir, KEY_FILES[0]), `${secretsKey.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  const keyRestored = manifest.secrets_key_included || secretsKey !== undefined;
  return {
    data_dir: dataDir,
    cluster_dir: clusterDirOf(dataDir),
    created_at: manifest.created_at,
    postgres_version: manifest.postgres_version,
    secrets_key_ids: manifest.secrets_key_ids,
    secrets_key_restored: keyRestored,
  };
}

async function readManifest(tar: TarReader): Promise<Manifest> {
  const first = await tar.next();
  if (first?.name !== MANIFEST || first.type !== 'file' || first.size > 64 * 1024)
    throw new TarFormatError(`it does not begin with ${MANIFEST}`);
  const chunks: Buffer[] = [];
  for await (const chunk of tar.body()) chunks.push(chunk);
  const manifest = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Partial<Manifest>;
  if (manifest.format !== 'pushd-backup' || manifest.version !== 1 || !Array.isArray(manifest.secrets_key_ids))
    throw new TarFormatError(`${MANIFEST} is of another format (${String(manifest.format)} ${String(manifest.version)})`);
  return manifest as Manifest;
}

function checkGivenKey(manifest: Manifest, key: Buffer): void {
  if (manifest.secrets_key_included)
    throw new RestoreRefused('--secrets-key-file: the backup holds its key files already (it was made without --without-secrets-key)');
  const id = keyIdOf(key);
  if (manifest.secrets_key_ids[0] !== id)
    throw new RestoreRefused(
      `--secrets-key-file: that key (id ${id}) is not the one the backup's secrets are sealed under (id ${manifest.secrets_key_ids[0]})`,
    );
}
