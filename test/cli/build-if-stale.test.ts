import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

/**
 * scripts/build-if-stale.mjs, run in a copy of the layout it reads whose `build` script counts its runs: `npm run
 * cli` builds only when something dist/ is built from changed.
 */
describe('npm run cli: builds only when a source changed', () => {
  let dir: string;
  const builds = () => readFileSync(path.join(dir, 'builds'), 'utf8').length;
  const run = () => execFileSync('node', [path.join(dir, 'scripts/build-if-stale.mjs')], { stdio: 'pipe' });
  /** time passes since the last build, as before a person's edit (the script compares modification times) */
  const aWhileLater = () => {
    const stamp = path.join(dir, 'dist/.build-stamp');
    const then = new Date(Date.now() - 10_000);
    utimesSync(stamp, then, then);
  };

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'pushd-build-'));
    mkdirSync(path.join(dir, 'scripts'));
    mkdirSync(path.join(dir, 'src'));
    copyFileSync(path.resolve('scripts/build-if-stale.mjs'), path.join(dir, 'scripts/build-if-stale.mjs'));
    const build = `node -e "require('fs').mkdirSync('dist',{recursive:true});require('fs').appendFileSync('builds','x')"`;
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'x', private: true, scripts: { build } }));
    writeFileSync(path.join(dir, 'builds'), '');
    writeFileSync(path.join(dir, 'src/main.ts'), 'export {};\n');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('builds the first time, then not while nothing changed', () => {
    run();
    expect(builds()).toBe(1);
    run();
    run();
    expect(builds()).toBe(1);
  });

  it('builds again when a source is edited, added or removed', () => {
    run();
    aWhileLater();
    writeFileSync(path.join(dir, 'src/main.ts'), 'export const edited = 1;\n');
    run();
    expect(builds()).toBe(2);
    aWhileLater();
    writeFileSync(path.join(dir, 'src/added.ts'), 'export {};\n');
    run();
    expect(builds()).toBe(3);
    aWhileLater();
    rmSync(path.join(dir, 'src/added.ts'));
    run();
    expect(builds()).toBe(4);
    run();
    expect(builds()).toBe(4);
  });

  it('builds again when dist/ was removed', () => {
    run();
    rmSync(path.join(dir, 'dist'), { recursive: true });
    run();
    expect(builds()).toBe(2);
  });
});
