import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { CHROMIUM, launchChromium } from './browser.js';

/**
 * The console in a real headless Chromium against the real server, workers and mock gateways: sign in, the
 * overview, a filter built in the form whose count matches the API's, validation messages, a send watched to
 * 100 %, the lists, and a read key that is offered no send button. Screenshots go to test-artifacts/console.
 */
const ARTIFACTS = path.resolve('test-artifacts/console');
const FIRST_LOAD_LIMIT_BYTES = 200 * 1024;

describe.skipIf(!existsSync(CHROMIUM))('console in Chromium', () => {
  let h: Harness;
  let gw: Gateways;
  let base: string;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let context: BrowserContext;
  let keys: { read: string; write: string; sdk: string };
  let devices: (RegisteredDevice & { locale: string; level: number })[];
  let notificationId: string;

  const api = async (method: 'GET' | 'POST', url: string, key: string, body?: unknown) => {
    const res = await h.server.inject({
      method,
      url,
      headers: { authorization: basic(key) },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    return { status: res.statusCode, json: res.json() };
  };
  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
  const loaded = (page: Page) => page.waitForSelector('main:not([aria-busy])');
  const signIn = async (page: Page, key: string) => {
    await page.goto(`${base}/console`);
    await page.fill('#key', key);
    await page.click('#sign-in button[type=submit]');
    await page.waitForSelector('#who');
    await loaded(page);
  };

  beforeAll(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    gw = await startGateways();
    // small batches, two at a time, so a send takes a few polls and its progress can be watched
    h = await createHarness({
      workers: true,
      env: { ...gw.env, DELIVERY_BATCH_SIZE: '3', DELIVERY_CONCURRENCY: '2', RETRY_BASE_MS: '40' },
    });
    base = await h.server.listen({ host: '127.0.0.1', port: 0 });
    const created = await h.createApp('com.example.console');
    keys = created.keys;
    await setCredentials(h, created.app.id, gw);
    const locales = ['fr_FR', 'de_DE', 'en_US'];
    devices = [];
    for (let i = 0; i < 36; i++) {
      const platform = i % 3 === 0 ? 'ios' : 'android';
      const locale = locales[(i >> 1) % locales.length]!;
      const level = i % 7;
      const d = await registerDevice(h, keys.sdk, {
        platform,
        development: platform === 'ios' && i % 9 === 0,
        locale,
        notifications_allowed: i % 5 === 0 ? 'Disabled' : 'Enabled',
        custom: { level: { type: 'integer', value: level } },
      });
      devices.push({ ...d, locale, level });
    }
    browser = await launchChromium();
    context = browser.context;
  });
  afterAll(async () => {
    await browser?.close();
    await h?.close();
    await gw?.close();
  });

  it(`signs in with a write key; the first load is under ${FIRST_LOAD_LIMIT_BYTES / 1024} KB compressed`, async () => {
    const page = await context.newPage();
    const responses: Promise<number>[] = [];
    page.on('response', (r) =>
      responses.push(
        r
          .request()
          .sizes()
          .then((s) => s.responseBodySize + s.responseHeadersSize),
      ),
    );
    await page.goto(`${base}/console`);
    await page.waitForSelector('#sign-in');
    await page.waitForLoadState('networkidle');
    const bytes = (await Promise.all(responses)).reduce((a, b) => a + b, 0);
    console.log(`[console] first load: ${responses.length} responses, ${bytes} bytes on the wire`);
    expect(responses.length).toBeGreaterThanOrEqual(3); // redirect, index.html, the bundle, the stylesheet
    expect(bytes).toBeLessThan(FIRST_LOAD_LIMIT_BYTES);
    await shot(page, 'sign-in');

    await page.fill('#key', 'not-a-key');
    await page.click('#sign-in button[type=submit]');
    await expect.poll(() => page.textContent('#sign-in-error')).toBe('Unknown or revoked key.');
    await page.fill('#key', keys.sdk);
    await page.click('#sign-in button[type=submit]');
    await expect.poll(() => page.textContent('#sign-in-error')).toContain('sdk key cannot sign in');

    await page.fill('#key', keys.write);
    await page.click('#sign-in button[type=submit]');
    await page.waitForSelector('#who');
    expect(await page.textContent('#who')).toContain('write key');
    await loaded(page);
    const stats = (await api('GET', '/v6/stats/devices', keys.read)).json;
    expect(await page.textContent('[data-stat="devices"]')).toBe(String(stats.total));
    expect(stats.total).toBe(36);
    expect(await page.locator('#device-groups tbody tr').count()).toBe(stats.groups.length);
    // the key stays in this tab: a reload keeps the session
    await page.reload();
    await page.waitForSelector('#who');
    await page.close();
  });

  it('builds a filter whose device count matches the API’s, shows the API’s validation messages, and previews the pushes', async () => {
    const page = await context.newPage();
    await signIn(page, keys.write);
    await page.goto(`${base}/console/#/compose`);
    await loaded(page);

    await page.click('#add-filter');
    await page.fill('[data-filter="0"] [data-criterion="0"] [data-field="value"]', 'fr_FR');
    await page.click('#add-filter');
    const second = page.locator('[data-filter="1"]');
    await second.locator('[data-field="filter on"]').selectOption('custom');
    await second.locator('[data-field="custom type"]').selectOption('integer');
    await second.locator('[data-field="custom-name"]').fill('level');
    await second.locator('[data-field="mode"]').selectOption('range');
    await second.locator('[data-field="lowerOp"]').selectOption('gte');
    await second.locator('[data-field="lower"]').fill('3');

    const filters = [
      { name: 'locale', criteria: ['fr_FR'] },
      { name: 'custom.integer.level', criteria: [{ gte: 3 }] },
    ];
    const expected = devices.filter((d) => d.locale === 'fr_FR' && d.level >= 3).length;
    const counted = (await api('POST', '/v6/audiences/count', keys.read, { filters })).json.device_count;
    expect(counted).toBe(expected);
    expect(expected).toBeGreaterThan(0);
    await expect.poll(() => page.textContent('#device-count')).toBe(String(expected));

    // a filter the API refuses: its own message, under that filter
    await second.locator('[data-field="lower"]').fill('three');
    await expect.poll(() => page.textContent('[data-filter="1"] [data-error]')).toContain('must be a number');
    await expect.poll(() => page.textContent('#device-count')).toBe('—');
    await second.locator('[data-field="lower"]').fill('3');
    await expect.poll(() => page.textContent('#device-count')).toBe(String(expected));

    await page.fill('input[name="alert"]', 'Bonjour');
    await page.fill('input[name="title"]', 'Soldes');
    await page.fill('input[name="badge"]', '-1');
    const apiMessage = (
      await api('POST', '/v6/notifications', keys.write, { notification: { to: filters, payload: { alert: 'x', badge: -1 } } })
    ).json.error as string;
    expect(apiMessage).toBe('notification.payload.badge: must be an integer >= 0');
    await expect.poll(() => page.textContent('[data-error="notification.payload.badge"]')).toBe('must be an integer >= 0');
    expect(await page.isDisabled('#send')).toBe(true);
    await page.fill('input[name="badge"]', '2');
    await page.fill('input[name="collapse_key"]', 'sale');
    await page.click('#add-custom');
    await page.fill('[data-field="custom-key"]', 'url');
    await page.fill('[data-field="custom-value"]', 'https://example.com/sale');
    await expect.poll(() => page.textContent('[data-error="notification.payload.badge"]')).toBe('');

    const payload = { alert: 'Bonjour', title: 'Soldes', badge: 2, collapse_key: 'sale', url: 'https://example.com/sale' };
    const preview = (await api('POST', '/v6/notifications/preview', keys.read, { notification: { to: filters, payload } })).json;
    await expect.poll(async () => JSON.parse((await page.textContent('#preview-fcm'))!)).toEqual(preview.fcm.body);
    expect(await page.textContent('#preview-apns')).toContain(JSON.stringify(preview.apns.body, null, 2));
    expect(await page.textContent('#preview-apns')).toContain('"apns-collapse-id": "sale"');
    await shot(page, 'compose');

    // send, then watch the delivery on the notification's page until it reaches 100 %
    const targeted = devices.filter((d) => d.locale === 'fr_FR' && d.level >= 3);
    const [uninstalled, refused, ...slow] = targeted;
    const faults = (d: RegisteredDevice) => (d.platform === 'ios' ? (d.development ? gw.sandbox : gw.apns) : gw.fcm).faults;
    faults(uninstalled!).forToken(
      uninstalled!.token,
      uninstalled!.platform === 'ios'
        ? { type: 'status', status: 410, reason: 'Unregistered' }
        : { type: 'status', status: 404, reason: 'UNREGISTERED' },
    );
    faults(refused!).forToken(
      refused!.token,
      refused!.platform === 'ios'
        ? { type: 'status', status: 400, reason: 'BadTopic' }
        : { type: 'status', status: 403, reason: 'SENDER_ID_MISMATCH' },
    );
    for (const d of slow) faults(d).forToken(d.token, { type: 'delay', ms: 300 }, 1);
    await page.click('#send');
    await page.waitForURL(/#\/notifications\/[0-9a-f-]{36}$/);
    notificationId = page.url().split('/').pop()!;
    const seen: string[] = [];
    await waitFor(
      'the progress to reach 100 %',
      async () => {
        const progress = await page.textContent('#progress').catch(() => null);
        if (progress && seen[seen.length - 1] !== progress) seen.push(progress);
        return progress === '100 %' && (await page.textContent('#state')) === 'sent';
      },
      30_000,
      25,
    );
    expect(seen.length).toBeGreaterThan(1); // it was watched moving, not just found finished
    const n = (await api('GET', `/v6/notifications/${notificationId}`, keys.read)).json;
    expect(n.devices_targeted).toBe(expected);
    expect(n.pushes_succeeded + n.pushes_failed).toBe(expected);
    await expect.poll(() => page.textContent('#succeeded')).toBe(`${n.pushes_succeeded} succeeded`);
    expect(n.tokens_invalidated).toBe(1);
    expect(n.pushes_failed).toBe(2);
    expect(await page.textContent('#invalidated')).toBe('1 invalidated');
    expect(await page.textContent('#failed')).toBe('1 failed');
    expect(gw.apns.pushes.length + gw.sandbox.pushes.length + gw.fcm.pushes.length).toBeGreaterThanOrEqual(n.pushes_succeeded);
    expect(await page.locator('#rate svg path.rate').count()).toBe(1);
    await shot(page, 'notification');
    await page.close();
  });

  it('lists notifications and audiences, shows an audience’s filters in words and its devices', async () => {
    const page = await context.newPage();
    await signIn(page, keys.write);
    await page.goto(`${base}/console/#/notifications`);
    await loaded(page);
    const row = page.locator('#notifications tbody tr').first();
    expect(await row.textContent()).toContain('Bonjour');
    expect(await row.locator('.state').textContent()).toBe('sent');
    await shot(page, 'notifications');

    const n = (await api('GET', `/v6/notifications/${notificationId}`, keys.read)).json;
    await page.goto(`${base}/console/#/audiences`);
    await loaded(page);
    const count = (await api('GET', `/v6/audiences/${n.to.id}`, keys.read)).json.audience.device_count;
    await expect.poll(() => page.textContent(`[data-count="${n.to.id}"]`)).toBe(String(count));
    await shot(page, 'audiences');

    await page.goto(`${base}/console/#/audiences/${n.to.id}`);
    await loaded(page);
    const words = await page.locator('#audience-filters li').allTextContents();
    expect(words).toEqual(['locale is fr_FR', 'custom integer “level” ≥ 3']);
    expect(await page.locator('#audience-devices tbody tr').count()).toBe(Math.min(count, 20));
    await shot(page, 'audience');

    await page.goto(`${base}/console/#/overview`);
    await loaded(page);
    expect(await page.locator('svg.chart rect.succeeded').count()).toBe(30);
    await shot(page, 'overview');
    await page.close();
  });

  it('offers a read key no send button', async () => {
    const page = await context.newPage();
    await signIn(page, keys.read);
    expect(await page.textContent('#who')).toContain('read key');
    await page.goto(`${base}/console/#/compose`);
    await loaded(page);
    await page.fill('input[name="alert"]', 'hello');
    await page.waitForSelector('#read-only');
    expect(await page.locator('#send').count()).toBe(0);
    expect(await page.locator('button', { hasText: /send/i }).count()).toBe(0);
    await shot(page, 'compose-read-key');
    await page.close();
  });
});
