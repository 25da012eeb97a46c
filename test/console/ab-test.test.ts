import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDevice } from '../helpers/gateways.js';
import { haveChromium, openAt, startConsoleServer, type ConsoleServer } from './session.js';

/**
 * An A/B test from the console in Chromium: composed with a second variant's alert, a test share and a manual
 * winner; its notification page shows the figures per variant and picks the winner, which goes to the rest.
 */
describe.skipIf(!haveChromium)('A/B tests in the console', () => {
  let s: ConsoleServer;

  beforeAll(async () => {
    s = await startConsoleServer();
    for (let i = 0; i < 12; i++) await registerDevice(s.h, s.keys.sdk, { platform: i % 2 ? 'android' : 'ios' });
  });
  afterAll(async () => s?.close());

  it('composes a test, shows each variant sent, and sends the picked one to the rest', async () => {
    const { page, problems } = await openAt(s, '#/compose');
    await page.click('input[name="target"][value="all"]');
    await page.fill('input[name="alert"]', 'Variant A');
    await page.check('#ab-on');
    await page.fill('#ab-alert-1', 'Variant B');
    await page.fill('#ab-test', '50');
    await page.selectOption('#ab-winner', 'manual');
    await expect.poll(() => page.textContent('#device-count')).toBe('12');
    await page.click('#send');
    await page.click('#confirm-send');
    await page.waitForURL(/#\/notifications\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').pop()!;

    const stored = (await s.api('GET', `/v6/notifications/${id}`, s.keys.read)).json;
    expect(stored.notification).toMatchObject({
      variants: [{ payload: { alert: 'Variant A' } }, { payload: { alert: 'Variant B' } }],
      test_fraction: 0.5,
      winner: 'manual',
    });
    await expect.poll(() => page.textContent('#ab-stage'), { timeout: 20_000 }).toBe('waiting for a winner to be picked');
    // the test share delivered (its batches may still be in flight when the fan-out is done)
    await expect
      .poll(async () => {
        const n = (await s.api('GET', `/v6/notifications/${id}`, s.keys.read)).json;
        return n.devices_targeted > 0 && n.pushes_succeeded === n.devices_targeted;
      })
      .toBe(true);
    const stats = (await s.api('GET', `/v6/stats/notifications/${id}/events`, s.keys.read)).json.ab_test;
    const sent = (v: string) => page.locator(`#ab-variants tr[data-variant="${v}"] td:nth-child(2)`).textContent();
    await expect.poll(() => sent('0')).toBe(String(stats.variants[0].sent));
    await expect.poll(() => sent('1')).toBe(String(stats.variants[1].sent));

    await page.click('button[data-pick="1"]');
    await expect.poll(() => page.textContent('#ab-stage'), { timeout: 20_000 }).toMatch(/^variant B won/);
    const after = (await s.api('GET', `/v6/stats/notifications/${id}/events`, s.keys.read)).json.ab_test;
    expect(after).toMatchObject({ stage: 'rest', winner: 1 });
    await expect
      .poll(async () => (await s.api('GET', `/v6/notifications/${id}`, s.keys.read)).json.state, { timeout: 20_000 })
      .toBe('sent');
    const total = (await s.api('GET', `/v6/stats/notifications/${id}/events`, s.keys.read)).json.ab_test;
    expect(total.variants[0].sent + total.variants[1].sent + total.rest.sent).toBe(12);
    await expect.poll(() => sent('rest')).toBe(String(total.rest.sent));
    expect(problems).toEqual([]);
  });
});
