import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TarWriter } from '../../src/platform/tar.js';
import { runCli } from './run-cli.js';

/** What `pushd backup` and `pushd restore` refuse before they touch a database or write a file. */
describe('pushd backup / restore refusals', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'pushd-backup-cli-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** A gzipped tar whose entries are (name, content). */
  const backupOf = async (entries: [string, string][]) => {
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on('data', (c: Buffer) => chunks.push(c));
    const tar = new TarWriter(out);
    for (const [name, content] of entries) await tar.file(name, Buffer.byteLength(content), Buffer.from(content));
    await tar.end();
    return gzipSync(Buffer.concat(chunks));
  };
  const manifest = JSON.stringify({ format: 'pushd-backup', version: 1, created_at: 'x', postgres_version: '18', secrets_key_ids: [] });

  it('backup is for the embedded default: with DATABASE_URL it points at pg_dump, exit 2', async () => {
    const out = path.join(dir, 'never.backup');
    const r = await runCli(['backup', '--out', out], { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere' });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/embedded default.*pg_dump/s);
    expect(existsSync(out)).toBe(false);
  });

  it('restore refuses a non-empty directory, a missing file, and what is not a whole backup, leaving DIR empty', async () => {
    const busy = path.join(dir, 'busy');
    await mkdir(busy);
    await writeFile(path.join(busy, 'keep'), 'mine');
    const file = path.join(dir, 'some.backup');
    await writeFile(file, await backupOf([['pushd-backup.json', manifest]]));
    const nonEmpty = await runCli(['restore', '--from', file, '--data-dir', busy], {});
    expect(nonEmpty.code).toBe(2);
    expect(nonEmpty.stderr).toContain(`${busy} is not empty (1 entries)`);
    expect(await readdir(busy)).toEqual(['keep']);

    const missing = await runCli(['restore', '--from', path.join(dir, 'nothing'), '--data-dir', path.join(dir, 'n')], {});
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('there is no file');

    const cases: [string, Buffer, RegExp][] = [
      ['not gzip', Buffer.from('hello, this is not a backup'), /not a whole pushd backup: incorrect header check/],
      ['no manifest', await backupOf([['postgres/PG_VERSION', '18']]), /does not begin with pushd-backup\.json/],
      [
        'a name that climbs',
        await backupOf([
          ['pushd-backup.json', manifest],
          ['postgres/../../escaped', 'x'],
        ]),
        /plain relative path/,
      ],
      [
        'an entry of no backup',
        await backupOf([
          ['pushd-backup.json', manifest],
          ['etc/passwd', 'x'],
        ]),
        /not part of a pushd backup/,
      ],
      [
        'no cluster',
        await backupOf([
          ['pushd-backup.json', manifest],
          ['postgres.password', 'pw'],
        ]),
        /postgres\/PG_VERSION is missing/,
      ],
      [
        'cut short',
        (
          await backupOf([
            ['pushd-backup.json', manifest],
            ['postgres.password', 'pw'],
          ])
        ).subarray(0, 60),
        /not a whole/,
      ],
    ];
    // side by side: each is a process of its own
    await Promise.all(
      cases.map(async ([what, bytes, message]) => {
        const from = path.join(dir, `${what}.backup`);
        const target = path.join(dir, `restored-${what}`);
        await writeFile(from, bytes);
        const r = await runCli(['restore', '--from', from, '--data-dir', target], {});
        expect(r.code, `${what}: ${r.stderr}`).toBe(2);
        expect(r.stderr, what).toMatch(message);
        expect(await readdir(target), what).toEqual([]);
      }),
    );
    expect(existsSync(path.join(dir, 'escaped'))).toBe(false);
  }, 180_000);
});
