import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDevice, waitFor } from '../helpers/gateways.js';
import { haveChromium, localeAndLevelFilters, openAt, startConsoleServer, type ConsoleServer } from './session.js';

/**
 * The compose form in Chromium: quiet until the user writes (no error on the empty form), filter errors in
 * words under their filter, and a confirmation naming the target's device count before anything is sent.
 */
const ARTIFACTS = path.resolve('test-artifacts/console');

describe.skipIf(!haveChromium)('compose in Chromium', () => {
  let s: ConsoleServer;
  let audienceId: string;

  const notificationCount = async () => (await s.api('GET', '/v6/notifications?per=1000', s.keys.read)).json.notifications.length;
  const errorsShown = async (page: Page) => (await page.locator('main [data-error], #compose-error').allTextContents()).filter(Boolean);
  const open = (hash = '#/compose') => openAt(s, hash);
  /** The count the form shows once its check has answered. */
  const counted = async (page: Page, expected: number) => expect.poll(() => page.textContent('#device-count')).toBe(String(expected));

  beforeAll(async () => {
    s = await startConsoleServer();
    for (let i = 0; i < 5; i++)
      await registerDevice(s.h, s.keys.sdk, {
        platform: i % 2 ? 'android' : 'ios',
        locale: i < 3 ? 'fr_FR' : 'en_US',
        custom: { level: { type: 'integer', value: i } },
      });
    const stored = await s.api('POST', '/v6/notifications', s.keys.write, {
      notification: { to: [{ name: 'locale', criteria: ['en_US'] }], payload: { alert: 'makes the audience' } },
    });
    expect(stored.status).toBe(201);
    audienceId = stored.json.to.id;
  });
  afterAll(async () => s?.close());

  it('shows no error on the empty form; an emptied payload or Send with none says it must not be empty', async () => {
    const { page, problems } = await open();
    await counted(page, 5);
    await page.waitForTimeout(400); // past the form's debounce: any check it runs has answered
    expect(await errorsShown(page)).toEqual([]);
    expect(problems).toEqual([]); // no refused request either (the browser logs a 400 as a console error)

    // written, then emptied: said as soon as it happens, under the payload
    await page.fill('input[name="alert"]', 'x');
    await expect.poll(() => page.textContent('#preview-fcm')).toContain('"x"');
    await page.fill('input[name="alert"]', '');
    await expect.poll(() => page.textContent('[data-error="notification.payload"]')).toBe('must not be empty');
    expect(await page.isDisabled('#send')).toBe(true);
    await page.close();

    // Send on a form with nothing written: checked then, nothing asked, nothing sent
    const before = await notificationCount();
    const second = await open();
    await second.page.click('input[name="target"][value="all"]');
    await counted(second.page, 5);
    expect(await errorsShown(second.page)).toEqual([]);
    await second.page.click('#send');
    await expect.poll(() => second.page.textContent('[data-error="notification.payload"]')).toBe('must not be empty');
    expect(await second.page.locator('#confirm[open]').count()).toBe(0);
    expect(await notificationCount()).toBe(before);
    await second.page.close();
  });

  it('says what is wrong with a filter in words, under that filter', async () => {
    const { page } = await open();
    await page.fill('input[name="alert"]', 'filters');
    const second = await localeAndLevelFilters(page);
    await second.locator('[data-field="value"]').fill('three');
    const error = (i: number) => page.textContent(`[data-filter="${i}"] [data-error]`);
    await expect.poll(() => error(1)).toBe('Filter 2, value 1: must be a number or a range object');
    await second.locator('[data-field="mode"]').selectOption('range');
    await second.locator('[data-field="lower"]').fill('x');
    await expect.poll(() => error(1)).toBe('Filter 2, value 1, bound ≥: must be a number');
    await second.locator('[data-field="lower"]').fill('2');
    await expect.poll(() => error(1)).toBe('');
    await page.click('#add-filter');
    const third = page.locator('[data-filter="2"]');
    await third.locator('[data-field="attribute"]').selectOption('sdk_location');
    await third.locator('[data-field="mode"]').selectOption('polygon');
    await third.locator('[data-field="points"]').fill('48.8, 2.3\nnorth, 2.3\n49.1, 2.4');
    await expect.poll(() => error(2)).toBe('Filter 3, value 1, polygon point 2, latitude: must be a number');
    expect(await error(0)).toBe('');
    expect(await page.textContent('#compose-error')).toBe('');
    expect(await page.textContent('#device-count')).toBe('—');
    await page.close();
  });

  it('asks before sending, naming the device count of the target, and sends only when confirmed', async () => {
    const { page } = await open();
    await page.click('#add-filter');
    await page.fill('[data-filter="0"] [data-criterion="0"] [data-field="value"]', 'fr_FR');
    await page.fill('input[name="alert"]', 'Confirm me');
    const filters = [{ name: 'locale', criteria: ['fr_FR'] }];
    const devices = (await s.api('POST', '/v6/audiences/count', s.keys.read, { filters })).json.device_count;
    expect(devices).toBe(3);
    await counted(page, devices);
    const before = await notificationCount();

    // Cancel: nothing sent, still composing
    await page.click('#send');
    await expect.poll(() => page.textContent('#confirm-text')).toBe('Send this notification now to 3 devices?');
    expect(await page.locator('#confirm[open]').count()).toBe(1);
    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: path.join(ARTIFACTS, 'compose-confirm.png') });
    await page.click('#confirm-cancel');
    expect(await page.locator('#confirm[open]').count()).toBe(0);
    // Escape closes it as Cancel does
    await page.click('#send');
    await page.waitForSelector('#confirm[open]');
    await page.keyboard.press('Escape');
    await page.waitForSelector('#confirm:not([open])', { state: 'attached' });
    expect(page.url()).toMatch(/#\/compose$/);
    // the dialog's close event, which gives Send back, is a task queued after the open attribute goes
    await expect.poll(() => page.isEnabled('#send')).toBe(true);
    expect(await notificationCount()).toBe(before);

    // Send: created once, to the devices it named
    await page.click('#send');
    await page.click('#confirm-send');
    await page.waitForURL(/#\/notifications\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').pop()!;
    expect(await notificationCount()).toBe(before + 1);
    const n = await waitFor('the send to finish', async () => {
      const record = (await s.api('GET', `/v6/notifications/${id}`, s.keys.read)).json;
      return record.state === 'sent' && record;
    });
    expect(n).toMatchObject({ devices_targeted: devices, notification: { to: filters, payload: { alert: 'Confirm me' } } });
    await page.close();
  });

  it('names the count of a stored audience, as the audience route counts it', async () => {
    const { page } = await open(`#/compose/audience/${audienceId}`);
    const devices = (await s.api('GET', `/v6/audiences/${audienceId}`, s.keys.read)).json.audience.device_count;
    expect(devices).toBe(2);
    await page.fill('input[name="alert"]', 'To the audience');
    await counted(page, devices);
    const before = await notificationCount();
    await page.click('#send');
    await expect.poll(() => page.textContent('#confirm-text')).toBe('Send this notification now to 2 devices?');
    await page.click('#confirm-cancel');
    expect(await notificationCount()).toBe(before);
    await page.close();
  });
});
