// Runs `npm run build` only when something dist/ is built from changed since the last build made here, so
// `npm run cli`, `npm start` and `npm run migrate` start at once on an up-to-date dist/.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SOURCES = [
  'src',
  'migrations',
  'console',
  'scripts/build-console.mjs',
  'tsconfig.json',
  'tsconfig.build.json',
  'package.json',
  'package-lock.json',
];
const STAMP = path.join(root, 'dist', '.build-stamp');

const mtimeOf = (file) => {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return -Infinity;
  }
};

/** The newest change under a path; a folder's own time counts, as it moves when a file in it is added or removed. */
function newestChange(file) {
  const own = mtimeOf(file);
  let entries;
  try {
    entries = readdirSync(file);
  } catch {
    return own; // a file, or nothing there
  }
  return entries.reduce((newest, name) => Math.max(newest, newestChange(path.join(file, name))), own);
}

const newest = Math.max(...SOURCES.map((s) => newestChange(path.join(root, s))));
if (mtimeOf(STAMP) <= newest) {
  // the stamp takes the time the build started: a file saved while it ran is newer, and builds the next time
  const started = new Date();
  const build = spawnSync('npm', ['run', '-s', 'build'], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) process.exit(build.status ?? 1);
  writeFileSync(STAMP, `dist/ was built from the sources as they were at ${started.toISOString()}\n`);
  utimesSync(STAMP, started, started);
}
