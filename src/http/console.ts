import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';

/**
 * The ops console: the static files `npm run build` writes to dist/console (scripts/build-console.mjs), served
 * from memory under /console, gzipped once at start-up. The console is a client of the public API only.
 */
export const CONSOLE_DIR = path.join(packageRoot(), 'dist', 'console');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

// The console loads nothing from elsewhere and runs no inline script.
const CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

interface Asset {
  type: string;
  raw: Buffer;
  gzip: Buffer;
}

export function consoleRoutes(dir = CONSOLE_DIR): FastifyPluginAsync {
  return async (app) => {
    const assets = loadAssets(dir);
    if (assets.size === 0) app.log.warn({ dir }, 'the console is not built (npm run build); /console answers 404');

    const serve = (name: string, request: FastifyRequest, reply: FastifyReply) => {
      const asset = assets.get(name);
      if (!asset) return reply.status(404).send({ error: assets.size === 0 ? 'the console is not built: run npm run build' : 'not found' });
      // index.html names the bundles by content hash, so only it must be revalidated.
      reply.header('cache-control', name === 'index.html' ? 'no-cache' : 'public, max-age=31536000, immutable');
      reply.header('content-security-policy', CSP);
      reply.header('x-content-type-options', 'nosniff');
      reply.header('vary', 'accept-encoding');
      reply.type(asset.type);
      if (/\bgzip\b/.test(request.headers['accept-encoding'] ?? '')) return reply.header('content-encoding', 'gzip').send(asset.gzip);
      return reply.send(asset.raw);
    };
    app.get('/console', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/console/'));
    app.get('/console/', { schema: { hide: true } }, async (request, reply) => serve('index.html', request, reply));
    app.get<{ Params: { file: string } }>('/console/:file', { schema: { hide: true } }, async (request, reply) =>
      serve(request.params.file, request, reply),
    );
  };
}

function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  if (!existsSync(dir)) return assets;
  for (const name of readdirSync(dir)) {
    const type = TYPES[path.extname(name)];
    if (!type) continue;
    const raw = readFileSync(path.join(dir, name));
    assets.set(name, { type, raw, gzip: gzipSync(raw, { level: 9 }) });
  }
  return assets;
}

/** The nearest directory above this module with a package.json: the repository, or the image's /app. */
function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) return process.cwd();
    dir = parent;
  }
  return dir;
}
