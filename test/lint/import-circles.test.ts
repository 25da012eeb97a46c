import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * No module of src/ reaches itself through its relative imports (type-only ones included): a circle makes load
 * order matter and hides which module owns what (shared types go in a module of their own).
 */
const SRC = path.resolve(import.meta.dirname, '../../src');
const IMPORT = /^(?:import|export)\s[^;]*?\sfrom\s+'(\.[^']+)'/gms;

function importsOf(file: string): string[] {
  return [...readFileSync(file, 'utf8').matchAll(IMPORT)].map((m) => path.resolve(path.dirname(file), m[1]!.replace(/\.js$/, '.ts')));
}

function circles(files: string[]): string[][] {
  const graph = new Map(files.map((f) => [f, importsOf(f)]));
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const found: string[][] = [];
  const visit = (file: string) => {
    state.set(file, 'open');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') found.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of files) if (!state.has(file)) visit(file);
  return found.map((c) => c.map((f) => path.relative(SRC, f)));
}

describe('lint: no import circles in src/', () => {
  it('finds none', () => {
    const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((f) => path.join(SRC, f));
    expect(files.length).toBeGreaterThan(50);
    expect(circles(files).map((c) => c.join(' -> '))).toEqual([]);
  });

  it('sees a circle of type-only imports, as src/cli had (index.ts <-> credentials.ts)', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'pushd-circles-'));
    try {
      writeFileSync(path.join(dir, 'index.ts'), "import { a } from './a.js';\nexport type Command = () => void;\n");
      writeFileSync(path.join(dir, 'a.ts'), "import type { Command } from './index.js';\nexport const a: Command = () => {};\n");
      writeFileSync(path.join(dir, 'b.ts'), "import { a } from './a.js';\n");
      const found = circles(['index.ts', 'a.ts', 'b.ts'].map((f) => path.join(dir, f)));
      expect(found.map((c) => c.map((f) => path.basename(f)))).toEqual([['index.ts', 'a.ts', 'index.ts']]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
