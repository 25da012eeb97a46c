import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDevice, waitFor, type RegisteredDevice } from '../helpers/gateways.js';
import { haveChromium, loaded, openAt, signIn, startConsoleServer, type ConsoleServer } from './session.js';

/**
 * The Journeys page in Chromium: a journey built step by step in the form (a bad duration named under its step, in
 * words), its page counting each step as the workers run it, the push delivered to the mock gateway, and pause.
 */
const ARTIFACTS = path.resolve('test-artifacts/console');

describe.skipIf(!haveChromium)('journeys in Chromium', () => {
  let s: ConsoleServer;
  let device: RegisteredDevice;

  beforeAll(async () => {
    s = await startConsoleServer({ JOURNEY_POLL_MS: '100' });
    device = await registerDevice(s.h, s.keys.sdk, { platform: 'ios' });
  });
  afterAll(async () => s?.close());

  it('builds a journey in the form, shows what is wrong under the step, then counts each step as it runs', async () => {
    const { page, problems } = await openAt(s, '#/journeys');
    expect(await page.textContent('#no-journeys')).toBe('No journey yet.');
    await page.fill('#journey-name', 'Welcome');
    await page.fill('[data-step="0"] [data-field="main"]', '0s');
    await page.click('#add-step');
    await page.fill('[data-step="1"] [data-field="main"]', 'Welcome aboard');
    await page.click('#save-journey');
    await expect.poll(() => page.textContent('[data-error="journey.steps[0]"]')).toBe('duration: must be at least 1 second');

    await page.fill('[data-step="0"] [data-field="main"]', '1s');
    await page.click('#save-journey');
    await page.waitForSelector('#journey-summary');
    expect(await page.textContent('#journey-summary')).toContain('entered through the API · active · version 1');
    const id = page.url().split('/').pop()!;
    const entry = await s.api('POST', `/v6/journeys/${id}/entries`, s.keys.write, { device_id: device.id });
    expect(entry.json).toEqual({ entered: true, outcome: 'entered' });
    await waitFor('the push from the journey', async () => s.gw.apns.pushes.some((p) => p.token === device.token));
    expect(s.gw.apns.pushes.find((p) => p.token === device.token)!.payload).toMatchObject({ aps: { alert: 'Welcome aboard' } });

    await page.reload();
    await loaded(page);
    expect(await page.textContent('[data-step="step1"] [data-count="passed"]')).toBe('1');
    expect(await page.textContent('[data-step="step2"] [data-count="sent"]')).toBe('1');
    expect(await page.textContent('#trigger-counts')).toContain('1 entered');
    await page.click('#journey-pause');
    await expect.poll(() => page.textContent('#journey-summary')).toContain('paused');
    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: path.join(ARTIFACTS, 'journey.png'), fullPage: true });

    await page.goto(`${s.base}/console/#/journeys`);
    await loaded(page);
    expect(await page.textContent(`[data-journey="${id}"] [data-field="state"]`)).toBe('paused');
    expect(await page.textContent(`[data-journey="${id}"] [data-field="entered"]`)).toBe('1');
    expect(problems.filter((p) => !p.includes('400'))).toEqual([]);
    await page.close();

    const reader = await s.context.newPage();
    await signIn(reader, s.base, s.keys.read);
    await reader.goto(`${s.base}/console/#/journeys/${id}`);
    await loaded(reader);
    expect(await reader.locator('#journey-resume').count()).toBe(0);
    await reader.close();
  });
});
