import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/** npm's own reading of ranges (semver, installed with the tools), for what npm ci checks. */
const semver = createRequire(import.meta.url)('semver') as {
  minVersion(range: string): { version: string } | null;
  satisfies(version: string, range: string): boolean;
};

/**
 * The Node the README and package.json promise runs what `npm ci --omit=dev` installs: every locked package the
 * server needs admits the oldest Node of `engines` (npm's EBADENGINE warning otherwise); the development tools
 * admit the Node this runs on.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => JSON.parse(readFileSync(path.join(ROOT, file), 'utf8'));
const lock = read('package-lock.json') as { packages: Record<string, { dev?: boolean; engines?: unknown; version?: string }> };
const oldest = semver.minVersion(read('package.json').engines.node as string)!.version;

const refusing = (node: string, dev: boolean) =>
  Object.entries(lock.packages)
    .filter(([name, p]) => name !== '' && Boolean(p.dev) === dev)
    .filter(([, p]) => {
      const range = (p.engines as { node?: unknown } | undefined)?.node;
      return typeof range === 'string' && !semver.satisfies(node, range);
    })
    .map(([name, p]) => `${name}@${p.version} needs node ${(p.engines as { node: string }).node}`);

describe('engines', () => {
  it(`every package the server runs admits Node ${oldest}, the oldest package.json and the README promise`, () => {
    expect(refusing(oldest, false)).toEqual([]);
  });

  it('every development package admits the Node running the tests', () => {
    expect(refusing(process.versions.node, true)).toEqual([]);
  });
});
