#!/usr/bin/env node
// The CLI runs the compiled code, as the server does (`npm run cli` and `npm start` build it first when stale).
import { existsSync } from 'node:fs';

const entry = new URL('../dist/src/cli/index.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('pushd is not built: run `npm run build` first\n');
  process.exit(1);
}
await import(entry.href);
