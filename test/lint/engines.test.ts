import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/** npm's own reading of ranges (semver, installed with the tools), for what npm ci checks. */
const semver = createRequire(import.meta.url)('semver') as {
  minVersion(range: string): { version: string } | null;
  satisfies(version: string, range: string): boolean;
};

/**
 * The Node the README promises is the oldest package.json's engines admits, and it runs everything `npm ci`
 * installs, the development tools included (npm's EBADENGINE warning otherwise, which .ci/run fails on).
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => JSON.parse(readFileSync(path.join(ROOT, file), 'utf8'));
const lock = read('package-lock.json') as { packages: Record<string, { version?: string }> };
const engines = read('package.json').engines.node as string;
const oldest = semver.minVersion(engines)!.version;

/** The packages on disk (a lock also lists other platforms' optional builds, which npm skips) and their engines. */
const installed = Object.keys(lock.packages)
  .filter((name) => name !== '' && existsSync(path.join(ROOT, name, 'package.json')))
  .map((name) => {
    const pkg = read(path.join(name, 'package.json')) as { version: string; engines?: { node?: unknown } };
    return { name, version: pkg.version, node: pkg.engines?.node };
  });

describe('engines', () => {
  it("the README's Node is the oldest package.json's engines admits", () => {
    const stated = /^Requirements: Node\.js (\d+\.\d+) or newer\./m.exec(readFileSync(path.join(ROOT, 'README.md'), 'utf8'));
    expect(stated, 'README: "Requirements: Node.js X.Y or newer."').not.toBeNull();
    expect(`${stated![1]}.0`).toBe(oldest);
    expect(read('package-lock.json').packages[''].engines.node).toBe(engines);
  });

  it(`every installed package, the development tools included, admits Node ${oldest}`, () => {
    expect(installed.length).toBeGreaterThan(100);
    const refusing = installed
      .filter((p) => typeof p.node === 'string' && !semver.satisfies(oldest, p.node))
      .map((p) => `${p.name}@${p.version} needs node ${String(p.node)}`);
    expect(refusing).toEqual([]);
  });

  it('the Node running the tests is one package.json admits', () => {
    expect(semver.satisfies(process.versions.node, engines)).toBe(true);
  });
});
