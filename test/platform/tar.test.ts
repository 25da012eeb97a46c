import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { TarFormatError, TarReader, TarWriter, type TarEntry } from '../../src/platform/tar.js';

/** An archive written by TarWriter, as bytes. */
async function archive(write: (tar: TarWriter) => Promise<void>): Promise<Buffer> {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on('data', (c: Buffer) => chunks.push(c));
  await write(new TarWriter(out));
  return Buffer.concat(chunks);
}

/** Every entry and its content, or the error reading stopped at. */
async function readAll(bytes: Buffer): Promise<{ entry: TarEntry; content: string }[]> {
  const reader = new TarReader(
    (async function* () {
      for (let i = 0; i < bytes.length; i += 700) yield bytes.subarray(i, i + 700); // chunks that cut headers
    })(),
  );
  const out: { entry: TarEntry; content: string }[] = [];
  for (let entry = await reader.next(); entry; entry = await reader.next()) {
    const parts: Buffer[] = [];
    for await (const chunk of reader.body()) parts.push(chunk);
    out.push({ entry, content: Buffer.concat(parts).toString() });
  }
  return out;
}

describe('the tar of backups', () => {
  it('reads back what it wrote, sizes kept as declared, long names split into the prefix', async () => {
    const long = `postgres/${'d'.repeat(120)}/${'f'.repeat(90)}`;
    const bytes = await archive(async (tar) => {
      await tar.file('a.json', 2, Buffer.from('{}'));
      await tar.directory('postgres');
      await tar.file('postgres/shrank', 6, Buffer.from('abc')); // a file that shrank while read: zeros
      await tar.file('postgres/grew', 2, Buffer.from('abcdef')); // one that grew: its size when opened
      await tar.file(long, 1, Buffer.from('x'));
      await tar.end();
    });
    const read = await readAll(bytes);
    expect(read.map((r) => [r.entry.name, r.entry.type, r.entry.size, r.content])).toEqual([
      ['a.json', 'file', 2, '{}'],
      ['postgres', 'directory', 0, ''],
      ['postgres/shrank', 'file', 6, 'abc\0\0\0'],
      ['postgres/grew', 'file', 2, 'ab'],
      [long, 'file', 1, 'x'],
    ]);
    expect(read[0]!.entry.mode).toBe(0o600);
  });

  it('refuses names that climb or are absolute, links, a bad checksum, and an archive cut short', async () => {
    const one = (name: string) =>
      archive(async (tar) => {
        await tar.file(name, 1, Buffer.from('x'));
        await tar.end();
      });
    for (const name of ['../etc/passwd', '/etc/passwd', 'postgres/../../x', 'a//b'])
      await expect(readAll(await one(name)), name).rejects.toThrow(/plain relative path/);

    const link = await one('postgres/link');
    link.write('2', 156, 'latin1'); // a symbolic link's type flag, its checksum made to match
    link.fill(' ', 148, 156);
    const sum = link.subarray(0, 512).reduce((s, b) => s + b, 0);
    link.write(sum.toString(8).padStart(6, '0') + '\0', 148, 7, 'latin1');
    await expect(readAll(link)).rejects.toThrow(/type "2"/);

    const tampered = await one('postgres/file');
    tampered.write('Z', 0, 'latin1');
    await expect(readAll(tampered)).rejects.toThrow(TarFormatError);

    const whole = await one('postgres/file');
    await expect(readAll(whole.subarray(0, 512 + 100))).rejects.toThrow(/cut short/);
    await expect(readAll(whole.subarray(0, 1024))).rejects.toThrow(/cut short/); // no end blocks
  });
});
