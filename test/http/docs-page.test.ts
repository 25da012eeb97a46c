import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../console/browser.js';
import { haveChromium } from '../console/session.js';
import { createHarness, type Harness } from '../helpers/harness.js';

/** The API reference at /docs in the real headless Chromium: every documented operation listed, nothing fetched off the server. */
describe.skipIf(!haveChromium)('the API reference page (/docs)', () => {
  let h: Harness;
  let base: string;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  beforeAll(async () => {
    h = await createHarness();
    base = await h.server.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('renders every operation of the document, with its assets served by pushd alone', async () => {
    const doc = (await (await fetch(`${base}/documentation/json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`));
    const page = await browser.context.newPage();
    const elsewhere: string[] = [];
    const failed: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(base) && !r.url().startsWith('data:')) elsewhere.push(r.url());
    });
    page.on('requestfailed', (r) => failed.push(r.url()));
    page.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
    });
    await page.goto(`${base}/docs`, { waitUntil: 'networkidle' });
    await page.waitForSelector('.opblock', { timeout: 30_000 });
    const listed = await page.$$eval('.opblock-summary', (blocks) =>
      blocks.map((b) => {
        const method = b.querySelector('.opblock-summary-method')?.textContent?.trim() ?? '';
        const path = b.querySelector('.opblock-summary-path')?.getAttribute('data-path') ?? '';
        return `${method} ${path}`;
      }),
    );
    expect(operations.length).toBeGreaterThan(50);
    expect(listed.sort()).toEqual(operations.sort());
    expect(await page.title()).toMatch(/Swagger UI|pushd/);
    expect(elsewhere, 'requests that left the server').toEqual([]);
    expect(failed, 'requests that failed').toEqual([]);
    await page.close();
  }, 120_000);

  it('is off with API_REFERENCE_PAGE=false, the document still served', async () => {
    const off = await createHarness({ env: { API_REFERENCE_PAGE: 'false' } });
    try {
      expect((await off.server.inject({ method: 'GET', url: '/docs' })).statusCode).toBe(404);
      expect((await off.server.inject({ method: 'GET', url: '/documentation/json' })).statusCode).toBe(200);
    } finally {
      await off.close();
    }
  });
});
