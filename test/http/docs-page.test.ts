import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../console/browser.js';
import { haveChromium } from '../console/session.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';

/** The API reference at /docs in the real headless Chromium: every documented operation listed, nothing fetched off the server. */
describe.skipIf(!haveChromium)('the API reference page (/docs)', () => {
  let h: Harness;
  let base: string;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let app: Awaited<ReturnType<Harness['createApp']>>;
  beforeAll(async () => {
    h = await createHarness();
    app = await h.createApp();
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
    // in the order the browser asked for them and got them: the document's download starts with the page's scripts
    const events: string[] = [];
    page.on('request', (r) => events.push(`asked ${new URL(r.url()).pathname}`));
    page.on('requestfinished', (r) => events.push(`got ${new URL(r.url()).pathname}`));
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
    expect(events.filter((e) => e === 'asked /docs/json')).toHaveLength(1);
    expect(events.indexOf('asked /docs/json')).toBeLessThan(events.indexOf('got /docs/static/swagger-ui-bundle.js'));
    expect(elsewhere, 'requests that left the server').toEqual([]);
    expect(failed, 'requests that failed').toEqual([]);
    await page.close();
  }, 120_000);

  it('offers the first example as the body to try for POST /v6/notifications, so a copy of it works', async () => {
    const doc = (await (await fetch(`${base}/documentation/json`)).json()) as {
      paths: Record<string, Record<string, { requestBody: { content: Record<string, { examples: Record<string, { value: unknown }> }> } }>>;
    };
    const first = Object.values(doc.paths['/v6/notifications']!.post!.requestBody.content['application/json']!.examples)[0]!.value;
    const page = await browser.context.newPage();
    await page.goto(`${base}/docs#/notifications`, { waitUntil: 'networkidle' });
    const block = page.locator('.opblock-post', { has: page.locator('.opblock-summary-path[data-path="/v6/notifications"]') });
    await block.locator('.opblock-summary').click();
    await block.locator('button.try-out__btn').click();
    const sample = await block.locator('textarea.body-param__text').inputValue();
    expect(JSON.parse(sample)).toEqual(first);
    expect(sample).not.toContain('"string"');
    const created = await fetch(`${base}/v6/notifications`, {
      method: 'POST',
      headers: { authorization: basic(app.keys.write), 'content-type': 'application/json' },
      body: sample,
    });
    expect(created.status).toBe(201);
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
