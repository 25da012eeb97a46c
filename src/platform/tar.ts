import type { Writable } from 'node:stream';

/**
 * The tar format (POSIX ustar) of pushd's backups, regular files and directories only, so `tar tzf` lists a backup
 * and `pushd restore` needs no other program. The reader refuses anything else (links, devices, names that climb).
 */

const BLOCK = 512;
const MAX_SIZE = 8 * 1024 ** 3 - 1; // 11 octal digits

export interface TarEntry {
  /** a relative path, `/`-separated, never with `..` or a leading `/` */
  name: string;
  type: 'file' | 'directory';
  mode: number;
  size: number;
}

/** Writes entries one after the other into `out` (a gzip stream, a file), waiting for it to drain. */
export class TarWriter {
  constructor(private readonly out: Writable) {}

  async directory(name: string, mode = 0o700): Promise<void> {
    await this.write(header({ name: name.replace(/\/?$/, '/'), type: 'directory', mode, size: 0 }));
  }

  /**
   * A file of exactly `size` bytes: what `body` gives past that is dropped, what it lacks is zeros (a file of a
   * running cluster that shrinks while it is read: PostgreSQL's WAL replay restores its pages).
   */
  async file(name: string, size: number, body: AsyncIterable<Buffer> | Buffer, mode = 0o600): Promise<void> {
    await this.write(header({ name, type: 'file', mode, size }));
    let left = size;
    for await (const chunk of Buffer.isBuffer(body) ? [body] : body) {
      if (left === 0) break;
      const part = chunk.length > left ? chunk.subarray(0, left) : chunk;
      await this.write(part);
      left -= part.length;
    }
    if (left > 0) await this.write(Buffer.alloc(left));
    await this.write(Buffer.alloc(padding(size)));
  }

  /** The two zero blocks that end an archive; a reader that does not meet them knows the archive was cut short. */
  async end(): Promise<void> {
    await this.write(Buffer.alloc(2 * BLOCK));
  }

  private write(chunk: Buffer): Promise<void> {
    if (chunk.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      if (this.out.write(chunk)) return resolve();
      const onError = (err: Error) => reject(err);
      this.out.once('error', onError);
      this.out.once('drain', () => {
        this.out.off('error', onError);
        resolve();
      });
    });
  }
}

/** The not-a-tar and cut-short cases of reading an archive. */
export class TarFormatError extends Error {}

/** Reads entries from a stream of bytes (a gunzip stream): next() gives a header, body() its content. */
export class TarReader {
  private readonly source: AsyncIterator<Buffer>;
  private buffered: Buffer[] = [];
  private bufferedBytes = 0;
  /** bytes of the current entry (and its padding) not read yet */
  private unread = 0;
  private bodyLeft = 0;

  constructor(source: AsyncIterable<Buffer>) {
    this.source = source[Symbol.asyncIterator]();
  }

  /** The next entry, or null at the end blocks. */
  async next(): Promise<TarEntry | null> {
    while (this.unread > 0) this.unread -= (await this.take(Math.min(this.unread, 64 * 1024))).length;
    const block = await this.take(BLOCK);
    if (block.every((b) => b === 0)) return null;
    const entry = parseHeader(block);
    this.bodyLeft = entry.size;
    this.unread = entry.size + padding(entry.size);
    return entry;
  }

  /** The current entry's content, in chunks. */
  async *body(): AsyncGenerator<Buffer> {
    while (this.bodyLeft > 0) {
      const chunk = await this.take(Math.min(this.bodyLeft, 64 * 1024), true);
      this.bodyLeft -= chunk.length;
      this.unread -= chunk.length;
      yield chunk;
    }
  }

  /** `n` bytes, or with `partial` what is there (at least one); the archive ending first is an error. */
  private async take(n: number, partial = false): Promise<Buffer> {
    while (this.bufferedBytes < (partial ? 1 : n)) {
      const { value, done } = await this.source.next();
      if (done) throw new TarFormatError('the archive ends early: it was cut short');
      this.buffered.push(value);
      this.bufferedBytes += value.length;
    }
    const all = this.buffered.length === 1 ? this.buffered[0]! : Buffer.concat(this.buffered);
    const out = all.subarray(0, Math.min(n, all.length));
    const rest = all.subarray(out.length);
    this.buffered = rest.length ? [rest] : [];
    this.bufferedBytes = rest.length;
    return out;
  }
}

const padding = (size: number) => (BLOCK - (size % BLOCK)) % BLOCK;

function header(entry: TarEntry): Buffer {
  if (entry.size > MAX_SIZE) throw new Error(`${entry.name}: ${entry.size} bytes is more than a tar entry holds`);
  const block = Buffer.alloc(BLOCK);
  const [prefix, name] = splitName(entry.name);
  block.write(name, 0, 100, 'utf8');
  octal(block, 100, 8, entry.mode);
  octal(block, 108, 8, 0);
  octal(block, 116, 8, 0);
  octal(block, 124, 12, entry.size);
  octal(block, 136, 12, Math.floor(Date.now() / 1000));
  block.write(entry.type === 'directory' ? '5' : '0', 156, 1, 'latin1');
  block.write('ustar\u000000', 257, 8, 'latin1');
  block.write(prefix, 345, 155, 'utf8');
  block.fill(' ', 148, 156);
  octal(block, 148, 7, checksum(block));
  return block;
}

/** ustar keeps a name of up to 100 bytes, and a prefix of up to 155 before a `/`. */
function splitName(name: string): [string, string] {
  if (Buffer.byteLength(name) <= 100) return ['', name];
  for (let i = name.indexOf('/'); i !== -1; i = name.indexOf('/', i + 1)) {
    if (Buffer.byteLength(name.slice(0, i)) <= 155 && Buffer.byteLength(name.slice(i + 1)) <= 100)
      return [name.slice(0, i), name.slice(i + 1)];
  }
  throw new Error(`${name}: the name is too long for a tar entry`);
}

function octal(block: Buffer, offset: number, width: number, value: number): void {
  block.write(value.toString(8).padStart(width - 1, '0') + '\0', offset, width, 'latin1');
}

const checksum = (block: Buffer) => block.reduce((sum, b) => sum + b, 0);

function parseHeader(block: Buffer): TarEntry {
  const text = (offset: number, width: number) => block.toString('utf8', offset, offset + width).replace(/\0.*$/s, '');
  const number = (offset: number, width: number) => parseInt(text(offset, width).trim() || '0', 8);
  const stored = number(148, 8);
  const blank = Buffer.from(block);
  blank.fill(' ', 148, 156);
  if (block.toString('latin1', 257, 262) !== 'ustar' || stored !== checksum(blank))
    throw new TarFormatError('not a tar archive of a pushd backup (a header does not check)');
  const prefix = text(345, 155);
  const name = (prefix ? `${prefix}/` : '') + text(0, 100);
  const flag = block.toString('latin1', 156, 157);
  const type = flag === '5' ? 'directory' : flag === '0' || flag === '\0' ? 'file' : null;
  if (!type) throw new TarFormatError(`${name}: entries of type "${flag}" are not part of a pushd backup`);
  const clean = name.replace(/\/+$/, '');
  if (clean === '' || clean.startsWith('/') || clean.split('/').some((part) => part === '..' || part === '' || part === '.'))
    throw new TarFormatError(`${name}: a name in a backup is a plain relative path`);
  const size = number(124, 12);
  if (!Number.isSafeInteger(size) || size < 0 || (type === 'directory' && size !== 0)) throw new TarFormatError(`${name}: a wrong size`);
  return { name: clean, type, mode: number(100, 8) & 0o7777, size };
}
