import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDevice, waitFor, type RegisteredDevice } from '../helpers/gateways.js';
import { haveChromium, loaded, openAt, signIn, startConsoleServer, type ConsoleServer } from './session.js';

/**
 * App settings and their per-notification overrides in Chromium: the caps and quiet hours edited on the settings
 * page (a read key sees them, unchanged), the change shown in the audit log below them (a write key's only), compose sending without the app's quiet hours and caps, and a
 * notification's page naming what the caps held back.
 */
const ARTIFACTS = path.resolve('test-artifacts/console');

describe.skipIf(!haveChromium)('app settings in Chromium', () => {
  let s: ConsoleServer;
  let device: RegisteredDevice;
  const settings = async () => (await s.api('GET', '/v6/app', s.keys.read)).json;
  const settled = (id: string) =>
    waitFor('the send to finish', async () => {
      const record = (await s.api('GET', `/v6/notifications/${id}`, s.keys.read)).json;
      return ['sent', 'failed'].includes(record.state) && record;
    });

  beforeAll(async () => {
    s = await startConsoleServer({ RATE_LIMIT_SDK_PER_SECOND: '0' });
    device = await registerDevice(s.h, s.keys.sdk, { platform: 'ios', locale: 'fr_FR' });
  });
  afterAll(async () => s?.close());

  it('edits the caps and quiet hours with a write key, says what is wrong under the field, and shows them to a read key', async () => {
    const { page, problems } = await openAt(s, '#/settings');
    expect(await page.textContent('#max-per-minute')).toContain('no ceiling');
    await page.click('#add-cap');
    await page.fill('[data-cap="0"] [data-field="cap-limit"]', '0');
    await page.click('#save-settings');
    await expect.poll(() => page.textContent('[data-error="frequency_caps[0].limit"]')).toBe('must be at least 1');
    expect((await settings()).frequency_caps).toBeNull();

    await page.fill('[data-cap="0"] [data-field="cap-limit"]', '1');
    await page.selectOption('[data-cap="0"] [data-field="cap-window"]', 'hour');
    await page.check('#quiet-on');
    await page.fill('#quiet-start', '21:30');
    await page.fill('#quiet-end', '07:00');
    await page.selectOption('#quiet-then', 'drop');
    await page.fill('#default-zone', 'Europe/Paris');
    await page.click('#save-settings');
    await expect.poll(() => page.textContent('#settings-saved')).toContain('caps 1 a hour');
    expect(await page.textContent('[data-error="frequency_caps[0].limit"]')).toBe('');
    // the audit log below shows the change first (the refused one made none), by this key, as the API has it
    const latest = page.locator('#audit-rows tr').first();
    await expect.poll(() => latest.getAttribute('data-action')).toBe('settings.changed');
    const [recorded] = (await s.api('GET', '/v6/audit?action=settings.changed', s.keys.write)).json.entries;
    expect(await latest.textContent()).toContain(`write key ${recorded.actor.key_id.slice(0, 8)}`);
    expect(await latest.textContent()).toContain(recorded.client_address);
    expect(await latest.textContent()).toContain('changed: default_time_zone, quiet_hours, frequency_caps');
    expect(await page.locator('#audit-rows tr[data-action="settings.changed"]').count()).toBe(1);
    expect(await page.textContent('#audit-rows tr[data-action="app.created"]')).toContain('command line');
    expect(await settings()).toMatchObject({
      frequency_caps: [{ limit: 1, window: 'hour' }],
      quiet_hours: { start: '21:30', end: '07:00', then: 'drop' },
      default_time_zone: 'Europe/Paris',
    });
    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: path.join(ARTIFACTS, 'settings.png'), fullPage: true });
    expect(problems.filter((p) => !p.includes('400'))).toEqual([]);
    await page.close();

    const reader = await s.context.newPage();
    await signIn(reader, s.base, s.keys.read);
    await reader.goto(`${s.base}/console/#/settings`);
    await loaded(reader);
    expect(await reader.inputValue('[data-cap="0"] [data-field="cap-limit"]')).toBe('1');
    expect(await reader.isDisabled('[data-cap="0"] [data-field="cap-limit"]')).toBe(true);
    expect(await reader.inputValue('#quiet-start')).toBe('21:30');
    expect(await reader.locator('#save-settings').count()).toBe(0);
    expect(await reader.locator('#audit').count()).toBe(0);
    await reader.close();
  });

  it('sends from compose without the app quiet hours and caps, and a notification page names the capped devices', async () => {
    await s.api('PATCH', '/v6/app', s.keys.write, { quiet_hours: null, frequency_caps: [{ limit: 1, window: 'hour' }] });
    await new Promise((r) => setTimeout(r, 300)); // the server's cache hears the change
    const to = [{ name: 'device_id', criteria: [device.id] }];
    const first = await s.api('POST', '/v6/notifications', s.keys.write, { notification: { to, payload: { alert: 'first' } } });
    expect((await settled(first.json.id)).pushes_succeeded).toBe(1);
    const second = await s.api('POST', '/v6/notifications', s.keys.write, { notification: { to, payload: { alert: 'second' } } });
    expect(await settled(second.json.id)).toMatchObject({ pushes_succeeded: 0, pushes_capped: 1 });

    const capped = await openAt(s, `#/notifications/${second.json.id}`);
    expect(await capped.page.textContent('#capped')).toBe('1 devices at a cap, not sent to');
    expect(await capped.page.textContent('#quiet-hours')).toBe("the app's, if any");
    await capped.page.close();

    const { page } = await openAt(s, '#/compose');
    expect(await page.textContent('#quiet-choice')).toContain("the app's (none)");
    expect(await page.textContent('label:has(#apply-caps)')).toContain('1 a hour');
    await page.click('input[name="target"][value="all"]');
    await page.fill('input[name="alert"]', 'urgent');
    await page.click('input[name="quiet"][value="none"]');
    await page.uncheck('#apply-caps');
    await expect.poll(() => page.textContent('#device-count')).toBe('1');
    await page.click('#send');
    await page.click('#confirm-send');
    await page.waitForURL(/#\/notifications\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').pop()!;
    expect(await settled(id)).toMatchObject({ pushes_succeeded: 1, pushes_capped: 0, notification: { quiet_hours: false, cap: false } });
    await expect.poll(() => page.textContent('#capped')).toBe('not applied');
    expect(await page.textContent('#quiet-hours')).toBe('none');
    await page.close();

    // its own quiet hours, malformed: said under them
    const own = await openAt(s, '#/compose');
    await own.page.click('input[name="target"][value="all"]');
    await own.page.fill('input[name="alert"]', 'quiet');
    await own.page.click('input[name="quiet"][value="own"]');
    await own.page.fill('#quiet-start', '08:00');
    await own.page.fill('#quiet-end', '08:00');
    await expect.poll(() => own.page.textContent('#device-count')).toBe('1');
    await own.page.click('#send');
    await own.page.click('#confirm-send');
    await expect.poll(() => own.page.textContent('[data-error="notification.quiet_hours"]')).toBe('must differ from start');
    await own.page.close();
  });
});
