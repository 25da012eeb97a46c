// Builds the ops console into dist/console: one minified ES module bundle and one stylesheet, each named by its
// content hash (so the API may cache them for good), and index.html pointing at them.
import { createHash } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const source = path.join(root, 'console');
const out = path.join(root, 'dist', 'console');

const result = await build({
  entryPoints: [path.join(source, 'src', 'main.ts')],
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2022',
  write: false,
  legalComments: 'none',
  logLevel: 'warning',
});
const js = result.outputFiles[0].contents;
const css = await readFile(path.join(source, 'console.css'));
const hashed = (name, content) => name.replace('.', `-${createHash('sha256').update(content).digest('hex').slice(0, 10)}.`);
const files = { 'app.js': [hashed('app.js', js), js], 'console.css': [hashed('console.css', css), css] };

await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });
let html = await readFile(path.join(source, 'index.html'), 'utf8');
for (const [placeholder, [name, content]] of Object.entries(files)) {
  html = html.replace(`{{${placeholder}}}`, name);
  await writeFile(path.join(out, name), content);
}
await writeFile(path.join(out, 'index.html'), html);
