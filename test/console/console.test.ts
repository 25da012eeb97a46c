import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { BrowserContext, Page, Response } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../helpers/harness.js';
import { registerDevice, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import {
  haveChromium,
  loaded,
  localeAndLevelFilters,
  signIn as signInAt,
  startConsoleServer,
  type ApiCall,
  type ConsoleServer,
  type Keys,
} from './session.js';

/**
 * The console in a real headless Chromium against the real server, workers and mock gateways: sign in, the
 * overview, a filter built in the form whose count matches the API's, validation messages, a send watched to
 * 100 %, the lists, and a read key that is offered no send button. Screenshots go to test-artifacts/console.
 */
const ARTIFACTS = path.resolve('test-artifacts/console');
const FIRST_LOAD_LIMIT_BYTES = 200 * 1024;

describe.skipIf(!haveChromium)('console in Chromium', () => {
  let server: ConsoleServer;
  let h: Harness;
  let gw: Gateways;
  let base: string;
  let context: BrowserContext;
  let keys: Keys;
  let api: ApiCall;
  let devices: (RegisteredDevice & { locale: string; level: number; disabled: boolean })[];
  let notificationId: string;

  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
  const signIn = (page: Page, key: string) => signInAt(page, base, key);

  beforeAll(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    // small batches, two at a time, so a send takes a few polls and its progress can be watched
    server = await startConsoleServer({ DELIVERY_BATCH_SIZE: '3', DELIVERY_CONCURRENCY: '2', RETRY_BASE_MS: '40' });
    ({ h, gw, base, context, keys, api } = server);
    const locales = ['fr_FR', 'de_DE', 'en_US'];
    devices = [];
    for (let i = 0; i < 36; i++) {
      const platform = i % 3 === 0 ? 'ios' : 'android';
      const locale = locales[(i >> 1) % locales.length]!;
      const level = i % 7;
      const disabled = i % 5 === 0;
      const d = await registerDevice(h, keys.sdk, {
        platform,
        development: platform === 'ios' && i % 9 === 0,
        locale,
        notifications_allowed: disabled ? 'Disabled' : 'Enabled',
        tags: i % 4 === 0 ? ['vip'] : [],
        badge: i % 4,
        location: { latitude: 48.85 + (i % 6) * 0.1, longitude: 2.35 },
        custom: {
          level: { type: 'integer', value: level },
          premium: { type: 'boolean', value: i % 2 === 0 },
          plan: { type: 'string', value: i % 4 === 1 ? 'pro' : 'free' },
          score: { type: 'float', value: i * 0.5 },
          renewal: { type: 'date', value: `2026-01-${String(1 + (i % 28)).padStart(2, '0')}` },
        },
      });
      devices.push({ ...d, locale, level, disabled });
      // purchases: none, one, or two of them, the last one 3 or 20 days ago
      const purchases = i % 3;
      const events = Array.from({ length: purchases }, (_, k) => ({
        name: 'purchase',
        date: new Date(Date.now() - (k === 0 && i % 2 ? 20 : 3) * 86_400_000).toISOString(),
      }));
      if (events.length) expect((await api('POST', `/v6/devices/${d.id}/events`, keys.sdk, { events })).status).toBe(202);
    }
    // a third of the devices registered long ago (the API sets created_at itself)
    const old = devices.filter((_, i) => i % 3 === 1).map((d) => d.id);
    await h.db.db
      .updateTable('devices')
      .set({ created_at: new Date(Date.now() - 40 * 86_400_000) })
      .where('id', 'in', old)
      .execute();
  });
  afterAll(async () => server?.close());

  it(`signs in with a write key; the first load is under ${FIRST_LOAD_LIMIT_BYTES / 1024} KB compressed`, async () => {
    const page = await context.newPage();
    const responses: Promise<number>[] = [];
    const measure = (r: Response) =>
      responses.push(
        r
          .request()
          .sizes()
          .then((s) => s.responseBodySize + s.responseHeadersSize),
      );
    page.on('response', measure);
    await page.goto(`${base}/console`);
    await page.waitForSelector('#sign-in');
    await page.waitForLoadState('networkidle');
    page.off('response', measure);
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
    // no filter yet: the count is every device, and there is nothing to send to
    await expect.poll(() => page.textContent('#count-note')).toContain('no filter yet');
    expect(await page.textContent('#device-count')).toBe(String(devices.length));
    expect(await page.isDisabled('#send')).toBe(true);

    const second = await localeAndLevelFilters(page);
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
    await expect.poll(() => page.textContent('[data-filter="1"] [data-error]')).toBe('Filter 2, value 1, bound ≥: must be a number');
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
    expect(await page.textContent('#preview-web')).toContain(JSON.stringify(preview.web.document, null, 2));
    expect(await page.textContent('#preview-web')).toContain(`${preview.web.bytes} of 4,096 bytes once encrypted`);
    expect(JSON.parse((await page.textContent('#preview-hms'))!)).toEqual(preview.hms.message);
    await shot(page, 'compose');

    // send, then watch the delivery on the notification's page until it reaches 100 %
    // the audience counts every device it matches; the alert goes to those whose notifications are not Disabled
    const targeted = devices.filter((d) => d.locale === 'fr_FR' && d.level >= 3 && !d.disabled);
    expect(targeted.length).toBeLessThan(expected);
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
    await expect.poll(() => page.textContent('#confirm-text')).toBe(`Send this notification now to ${expected} devices?`);
    await page.click('#confirm-send');
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
    expect(n.devices_targeted).toBe(targeted.length);
    expect(n.devices_not_allowed).toBe(expected - targeted.length);
    expect(await page.textContent('#not-allowed')).toBe(` (${expected - targeted.length} more with notifications Disabled: not sent)`);
    expect(n.pushes_succeeded + n.pushes_failed).toBe(targeted.length);
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

  it('builds a filter of every attribute kind whose count matches the API’s for the same filter', async () => {
    const page = await context.newPage();
    await signIn(page, keys.read);
    await page.goto(`${base}/console/#/compose`);
    await loaded(page);
    await page.fill('input[name="alert"]', 'every kind');
    const row = page.locator('[data-filter="0"]');
    const criterion = (j = 0) => row.locator(`[data-criterion="${j}"]`);
    const field = (name: string, j = 0) => criterion(j).locator(`[data-field="${name}"]`);
    const on = async (source: 'device' | 'custom' | 'event', what?: string) => {
      await row.locator('[data-field="filter on"]').selectOption(source);
      if (source === 'device') await row.locator('[data-field="attribute"]').selectOption(what!);
      if (source === 'custom') {
        const [type, name] = what!.split('.') as [string, string];
        await row.locator('[data-field="custom type"]').selectOption(type);
        await row.locator('[data-field="custom-name"]').fill(name);
      }
      if (source === 'event') await row.locator('[data-field="event-name"]').fill(what!);
    };
    const range = async (lowerOp: string, lower: string, upperOp?: string, upper?: string) => {
      await field('lowerOp').selectOption(lowerOp);
      await field('lower').fill(lower);
      if (upperOp) await field('upperOp').selectOption(upperOp);
      if (upper) await field('upper').fill(upper);
    };
    const cases: { filter: Record<string, unknown>; build: () => Promise<void> }[] = [
      { filter: { name: 'tags', criteria: ['vip'] }, build: async () => (await on('device', 'tags'), await field('value').fill('vip')) },
      { filter: { name: 'development', criteria: [true] }, build: () => on('device', 'development') },
      {
        filter: { name: 'notifications_allowed', criteria: ['Disabled'], not_filter: true },
        build: async () => {
          await on('device', 'notifications_allowed');
          await field('value').selectOption('Disabled');
          await row.locator('[data-field="not"]').check();
        },
      },
      {
        filter: { name: 'badge', criteria: [{ gte: 1, lte: 2 }] },
        build: async () => (await on('device', 'badge'), await field('mode').selectOption('range'), await range('gte', '1', 'lte', '2')),
      },
      {
        filter: { name: 'created_at', criteria: [{ gt: 'now-1M/d' }] },
        build: async () => (await on('device', 'created_at'), await field('mode').selectOption('range'), await range('gt', 'now-1M/d')),
      },
      {
        filter: { name: 'custom.string.plan', criteria: ['pro'], not_filter: true },
        build: async () => (
          await on('custom', 'string.plan'),
          await field('value').fill('pro'),
          await row.locator('[data-field="not"]').check()
        ),
      },
      {
        filter: { name: 'custom.boolean.premium', criteria: [false] },
        build: async () => {
          await on('custom', 'boolean.premium');
          await field('value').selectOption('false');
        },
      },
      {
        filter: { name: 'custom.float.score', criteria: [{ gte: 2.5, lt: 10 }] },
        build: async () => (
          await on('custom', 'float.score'),
          await field('mode').selectOption('range'),
          await range('gte', '2.5', 'lt', '10')
        ),
      },
      {
        filter: { name: 'custom.date.renewal', criteria: [{ gte: '2026-01-10', lte: '2026-01-01||+3w/d' }] },
        build: async () => (
          await on('custom', 'date.renewal'),
          await field('mode').selectOption('range'),
          await range('gte', '2026-01-10', 'lte', '2026-01-01||+3w/d')
        ),
      },
      { filter: { name: 'events.purchase', criteria: [true] }, build: () => on('event', 'purchase') },
      {
        filter: { name: 'events.purchase', criteria: [2] },
        build: async () => (await on('event', 'purchase'), await field('mode').selectOption('count'), await field('value').fill('2')),
      },
      {
        filter: { name: 'events.purchase', criteria: [{ lt: 2 }] },
        build: async () => (
          await on('event', 'purchase'),
          await field('mode').selectOption('count range'),
          await range('gte', '', 'lt', '2')
        ),
      },
      {
        filter: { name: 'events.purchase', criteria: [{ gte: 'now-7d/d' }] },
        build: async () => (
          await on('event', 'purchase'),
          await field('mode').selectOption('last happened'),
          await range('gte', 'now-7d/d')
        ),
      },
      {
        filter: { name: 'location', criteria: [{ point: { latitude: 48.85, longitude: 2.35 }, distance: 15, unit: 'km' }] },
        build: async () => {
          await on('device', 'location');
          await field('lat').fill('48.85');
          await field('lon').fill('2.35');
          await field('distance').fill('15');
          await field('unit').selectOption('km');
        },
      },
      {
        filter: {
          name: 'sdk_location',
          criteria: [
            {
              polygon: [
                { latitude: 48.8, longitude: 2.3 },
                { latitude: 49.12, longitude: 2.3 },
                { latitude: 49.12, longitude: 2.4 },
                { latitude: 48.8, longitude: 2.4 },
              ],
            },
            { point: { latitude: 49.35, longitude: 2.35 }, distance: 1, unit: 'mi' },
          ],
        },
        build: async () => {
          await on('device', 'sdk_location');
          await field('mode').selectOption('polygon');
          await field('points').fill('48.8, 2.3\n49.12, 2.3\n49.12 2.4\n48.8,2.4');
          await row.locator('.add-criterion').click();
          await field('lat', 1).fill('49.35');
          await field('lon', 1).fill('2.35');
          await field('distance', 1).fill('1');
          await field('unit', 1).selectOption('mi');
        },
      },
    ];
    for (const { filter, build } of cases) {
      if ((await row.count()) > 0) await row.locator('.remove').first().click();
      await page.click('#add-filter');
      await build();
      const { status, json } = await api('POST', '/v6/audiences/count', keys.read, { filters: [filter] });
      expect(status, JSON.stringify(json)).toBe(200);
      expect(json.device_count, `${filter.name} selects some devices but not all`).toBeGreaterThan(0);
      expect(json.device_count, `${filter.name} selects some devices but not all`).toBeLessThan(devices.length);
      // the count shown is the one of this filter, as the builder wrote it
      await expect
        .poll(async () => JSON.parse((await page.textContent('#to-json')) || 'null'), { message: JSON.stringify(filter) })
        .toEqual([filter]);
      expect(await page.textContent('#device-count')).toBe(String(json.device_count));
      expect(await page.textContent('#compose-error')).toBe('');
    }
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
    // from an audience to a notification for it: the compose page targets it and counts it
    await page.click('text=Compose a notification to this audience');
    await loaded(page);
    expect(await page.isChecked('input[name="target"][value="audience"]')).toBe(true);
    expect(await page.inputValue('#audience-select')).toBe(n.to.id);
    await expect.poll(() => page.textContent('#device-count')).toBe(String(count));

    await page.goto(`${base}/console/#/overview`);
    await loaded(page);
    expect(await page.locator('svg.chart rect.succeeded').count()).toBe(30);
    await shot(page, 'overview');
    await page.close();
  });

  it('schedules a notification for later with a pace, shows when it goes, and cancels it', async () => {
    const page = await context.newPage();
    await signIn(page, keys.write);
    await page.goto(`${base}/console/#/compose`);
    await loaded(page);
    await page.click('input[name="target"][value="all"]');
    await page.fill('input[name="alert"]', 'later');
    await page.click('input[name="when"][value="at"]');
    expect(await page.textContent('#send')).toBe('Schedule');
    await page.fill('#send-at', '2020-01-01T09:00'); // the past: the API's own message, under the field
    await page.click('#send');
    await expect
      .poll(() => page.textContent('#confirm-text'))
      .toBe(
        `Schedule this notification for 2020-01-01 09:00 (this browser’s time)? Its target counts ${devices.length} devices now; it is counted again when it goes out.`,
      );
    await page.click('#confirm-send');
    await expect.poll(() => page.textContent('[data-error="notification.send_at"]')).toBe('is in the past');
    const later = new Date(Date.now() + 3 * 3_600_000);
    const local = new Date(later.getTime() - later.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    await page.fill('#send-at', local);
    await page.fill('#per-minute', '0');
    await page.click('#send');
    await page.click('#confirm-send');
    await expect.poll(() => page.textContent('[data-error="notification.throttle.per_minute"]')).toBe('must be at least 1');
    await page.fill('#per-minute', '6000');
    await page.click('#send');
    await page.click('#confirm-send');
    await page.waitForURL(/#\/notifications\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').pop()!;
    await page.waitForSelector('#cancel');
    expect(await page.textContent('#state')).toBe('scheduled');
    const n = (await api('GET', `/v6/notifications/${id}`, keys.read)).json;
    expect(n).toMatchObject({ state: 'scheduled', throttle: { per_minute: 6000 } });
    expect(Math.abs(Date.parse(n.send_at) - Math.floor(later.getTime() / 60_000) * 60_000)).toBeLessThan(1000);
    await shot(page, 'notification-scheduled');
    await page.click('#cancel');
    await expect.poll(() => page.textContent('#state')).toBe('canceled');
    expect(await page.locator('#cancel').count()).toBe(0);
    expect((await api('GET', `/v6/notifications/${id}`, keys.read)).json.state).toBe('canceled');
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
