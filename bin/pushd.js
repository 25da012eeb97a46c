#!/usr/bin/env node
// The CLI runs the compiled code (`npm run build`, which `npm start` and `npm run cli` do first), as the server does.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/src/cli/index.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('pushd is not built: run `npm run build` first\n');
  process.exit(1);
}
await import(entry.href);
