import { gunzipSync } from 'node:zlib';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { consoleRoutes } from '../../src/http/console.js';
import { useHarness } from '../helpers/harness.js';

/** The console's static files as the API serves them (dist/console, built by the test setup's npm run build). */
describe('console static files', () => {
  const h = useHarness();
  const get = (url: string, gzip = true) =>
    h.server.inject({ method: 'GET', url, headers: gzip ? { 'accept-encoding': 'gzip, deflate, br' } : {} });

  it('serves index.html and the hashed assets it names, gzipped when asked, with a strict CSP and the right caching', async () => {
    expect((await get('/console')).statusCode).toBe(302);
    expect((await get('/console')).headers.location).toBe('/console/');
    const index = await get('/console/', false);
    expect(index.statusCode).toBe(200);
    expect(index.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(index.headers['cache-control']).toBe('no-cache');
    expect(index.headers['content-security-policy']).toContain("script-src 'self'");
    const assets = [...index.body.matchAll(/(?:src|href)="([\w.-]+\.(?:js|css))"/g)].map((m) => m[1]!);
    expect(assets).toHaveLength(2);
    for (const name of assets) {
      expect(name).toMatch(/^(app|console)-[0-9a-f]{10}\.(js|css)$/);
      const zipped = await get(`/console/${name}`);
      const plain = await get(`/console/${name}`, false);
      expect(zipped.statusCode).toBe(200);
      expect(zipped.headers['content-encoding']).toBe('gzip');
      expect(zipped.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(plain.headers['content-encoding']).toBeUndefined();
      expect(gunzipSync(zipped.rawPayload).equals(plain.rawPayload)).toBe(true);
    }
  });

  it('first load (index.html and its assets) is under 200 KB compressed', async () => {
    const index = await get('/console/');
    const names = [
      ...gunzipSync(index.rawPayload)
        .toString()
        .matchAll(/(?:src|href)="([\w.-]+\.(?:js|css))"/g),
    ].map((m) => m[1]!);
    let bytes = index.rawPayload.length;
    for (const name of names) bytes += (await get(`/console/${name}`)).rawPayload.length;
    console.log(`[console] first load: ${bytes} bytes gzipped (${names.join(', ')} and index.html)`);
    expect(bytes).toBeLessThan(200 * 1024);
  });

  it('an unknown file is a 404, and so is any path that tries to leave the directory', async () => {
    for (const url of ['/console/nope.js', '/console/..%2Fpackage.json', '/console/%2e%2e%2fpackage.json']) {
      const res = await get(url);
      expect(res.statusCode, url).toBe(404);
      expect(res.json()).toEqual({ error: 'not found' });
    }
  });

  it('without a build, /console says how to build it', async () => {
    const app = Fastify();
    await app.register(consoleRoutes('/nonexistent/console'));
    const res = await app.inject({ method: 'GET', url: '/console/' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: 'the console is not built: run npm run build' });
    await app.close();
  });
});
