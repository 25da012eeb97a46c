import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/** One ```sh block of a Markdown file, and what the HTML comment on the line before it asks of the docs test. */
export interface ShellBlock {
  file: string;
  /** 1-based line of the opening fence */
  line: number;
  code: string;
  /** `<!-- docs-test: skip (reason) -->`: not run, logged with its reason */
  skip?: string;
  /** `<!-- docs-test: expect 4xx (reason) -->`: the block shows a refusal, so its 4xx answers are what it expects */
  expect4xx?: string;
  /** `<!-- docs-test: embedded (reason) -->`: the block is about the embedded default, run beside one (no DATABASE_URL) */
  embedded?: string;
}

const DIRECTIVE = /^\s*<!--\s*docs-test:\s*(skip|expect 4xx|embedded)\s*\((.+)\)\s*-->\s*$/;

/** The README and every page under docs/, in the order the test runs them: README first, then by path. */
export function documentationFiles(root: string): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir)
      .sort()
      .flatMap((name) => {
        const full = path.join(dir, name);
        return statSync(full).isDirectory() ? walk(full) : name.endsWith('.md') ? [full] : [];
      });
  return [path.join(root, 'README.md'), ...walk(path.join(root, 'docs'))];
}

/** Every ```sh (or ```bash) block of a file, in order; an indented fence (inside a list) is unindented. */
export function shellBlocks(file: string): ShellBlock[] {
  const lines = readFileSync(file, 'utf8').split('\n');
  const blocks: ShellBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(sh|bash)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!.length;
    const start = i;
    const code: string[] = [];
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]!); i++) code.push(lines[i]!.slice(indent));
    const directive = DIRECTIVE.exec(lines[start - 1] ?? '');
    blocks.push({
      file,
      line: start + 1,
      code: code.join('\n'),
      ...(directive?.[1] === 'skip' ? { skip: directive[2] } : {}),
      ...(directive?.[1] === 'expect 4xx' ? { expect4xx: directive[2] } : {}),
      ...(directive?.[1] === 'embedded' ? { embedded: directive[2] } : {}),
    });
  }
  return blocks;
}
