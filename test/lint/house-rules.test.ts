import { readdirSync } from 'node:fs';
import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

/**
 * The house rules of eslint.config.js: constructors take one named object past four things, no line over 140, no
 * file over 500 lines (src/, the console, bench/, test/) and no function of src/, the console or bench/ over 80.
 */
describe('lint: the house rules', () => {
  const eslint = new ESLint({ cwd: path.resolve(import.meta.dirname, '../..') });
  const problems = async (file: string, code: string, rule: string) =>
    (await eslint.lintText(code, { filePath: path.resolve(file) }))[0]!.messages.filter((m) => m.ruleId === rule);
  const ctor = (n: number) =>
    `export class C {\n  constructor(${Array.from({ length: n }, (_, i) => `readonly p${i}: number`).join(', ')}) {}\n}\n`;

  it('refuses a constructor of five positional parameters, in src and in tests', async () => {
    expect(await problems('src/services/x.ts', ctor(4), 'constructors/named-deps')).toHaveLength(0);
    const [p] = await problems('src/services/x.ts', ctor(5), 'constructors/named-deps');
    expect(p?.message).toBe('constructor takes 5 parameters: take one named dependencies object instead (at most 4; see ARCHITECTURE.md)');
    expect(await problems('test/services/x.test.ts', ctor(6), 'constructors/named-deps')).toHaveLength(1);
  });

  it('lets a constructor take one dependencies object', async () => {
    const code =
      'export class C {\n  constructor(private readonly deps: { a: number; b: number; c: number; d: number; e: number }) {}\n}\n';
    expect(await problems('src/services/x.ts', code, 'constructors/named-deps')).toHaveLength(0);
  });

  it('refuses a source line over 140 characters, a SQL template too', async () => {
    const line = (n: number) => `export const q = \`${'x'.repeat(n - 20)}\`;\n`;
    expect(line(140).length).toBe(141);
    expect(await problems('src/db/x.ts', line(140), 'max-len')).toHaveLength(0);
    expect(await problems('src/db/x.ts', line(141), 'max-len')).toHaveLength(1);
  });

  it('refuses a file over 500 lines everywhere, and a function over 80 in src/, the console and bench/, not in tests', async () => {
    const file = (n: number) => Array.from({ length: n }, (_, i) => `export const c${i} = ${i};`).join('\n') + '\n';
    for (const at of ['src/db/x.ts', 'console/src/x.ts', 'bench/lib/x.ts', 'test/db/x.test.ts']) {
      expect(await problems(at, file(500), 'max-lines')).toHaveLength(0);
      expect(await problems(at, file(501), 'max-lines')).toHaveLength(1);
    }
    const fn = (n: number) => `export function f(): number {\n${'  void 0;\n'.repeat(n - 3)}  return 1;\n}\n`;
    expect(fn(80).split('\n').length - 1).toBe(80);
    for (const at of ['src/services/x.ts', 'console/src/x.ts', 'bench/lib/x.ts']) {
      expect(await problems(at, fn(80), 'max-lines-per-function')).toHaveLength(0);
      expect(await problems(at, fn(81), 'max-lines-per-function')).toHaveLength(1);
    }
    expect(await problems('test/services/x.test.ts', fn(81), 'max-lines-per-function')).toHaveLength(0);
  });

  it('holds every file of src/, the console and bench/ to those sizes, with no exception for one', async () => {
    const root = path.resolve(import.meta.dirname, '../..');
    const files = ['src', 'console/src', 'bench'].flatMap((dir) =>
      readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.ts'))
        .map((f) => path.join(dir, f)),
    );
    expect(files.length).toBeGreaterThan(100);
    expect(files.filter((f) => f.startsWith('console')).length).toBeGreaterThan(10);
    expect(files.filter((f) => f.startsWith('bench')).length).toBeGreaterThan(50);
    const excepted: string[] = [];
    for (const file of files) {
      const { rules } = await eslint.calculateConfigForFile(path.join(root, file));
      const [, lines] = rules['max-lines'] as [unknown, { max: number }];
      const [, fn] = rules['max-lines-per-function'] as [unknown, { max: number }];
      if (lines.max !== 500 || fn.max !== 80) excepted.push(file);
    }
    expect(excepted).toEqual([]);
  });
});
