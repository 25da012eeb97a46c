import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Repositories are built once, by the wiring (`createRepositories` and the idempotency keys', in
 * src/services/deps.ts), and reach the code that uses them through its dependencies.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const WIRING = ['src/services/deps.ts'];

const sources = readdirSync(path.join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
  .filter((f) => f.endsWith('.ts'))
  .map((f) => path.posix.join('src', f.split(path.sep).join('/')));
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const CONSTRUCTED = /new\s+(\w+Repository)\s*\(/g;

describe('lint: repositories are built by the wiring', () => {
  it('no file of src/ but the wiring constructs a repository', () => {
    expect(sources.length).toBeGreaterThan(100);
    const outside = sources
      .filter((file) => !WIRING.includes(file))
      .flatMap((file) => [...read(file).matchAll(CONSTRUCTED)].map((m) => `${file}: new ${m[1]}(`));
    expect(outside).toEqual([]);
  });

  it('the wiring builds every repository of src/db/repositories', () => {
    const wiring = WIRING.map(read).join('\n');
    const built = new Set([...wiring.matchAll(CONSTRUCTED)].map((m) => m[1]));
    const declared = sources
      .filter((file) => file.startsWith('src/db/repositories/'))
      .flatMap((file) => [...read(file).matchAll(/export class (\w+Repository)\b/g)].map((m) => m[1]!));
    expect(declared.length).toBeGreaterThan(20);
    expect(declared.filter((name) => !built.has(name))).toEqual([]);
  });
});
