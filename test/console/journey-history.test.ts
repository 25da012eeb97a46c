import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDevice, waitFor } from '../helpers/gateways.js';
import { haveChromium, openAt, startConsoleServer, type ConsoleServer } from './session.js';

/**
 * The journey form's second-round steps in Chromium (a digest, a webhook, a delay until the best time), the webhook
 * secret shown once after the create, and an entrant's history looked up on the journey's page as the workers move it.
 */
describe.skipIf(!haveChromium)('the journey form builds digest, webhook and best-time steps; the page shows an entrant', () => {
  let s: ConsoleServer;
  beforeAll(async () => {
    s = await startConsoleServer({ JOURNEY_POLL_MS: '100' });
  });
  afterAll(async () => s?.close());

  it('makes the steps the fields say, shows the secret once, then lists what the entrant did', async () => {
    const { page, problems } = await openAt(s, '#/journeys');
    await page.fill('#journey-name', 'Likes');
    await page.selectOption('[data-step="0"] [data-field="type"]', 'digest');
    await page.fill('[data-step="0"] [data-field="main"]', 'like');
    await page.fill('[data-step="0"] [data-field="extra"]', '1h');
    await page.click('#add-step');
    await page.selectOption('[data-step="1"] [data-field="type"]', 'webhook');
    await page.fill('[data-step="1"] [data-field="main"]', 'https://hooks.example.com/pushd');
    await page.click('#add-step');
    await page.selectOption('[data-step="2"] [data-field="type"]', 'delay');
    await page.fill('[data-step="2"] [data-field="main"]', 'best time');
    await page.click('#add-step');
    await page.fill('[data-step="3"] [data-field="main"]', 'New likes');
    await page.click('#save-journey');
    await page.waitForSelector('#journey-secret');
    expect(await page.textContent('#journey-secret')).toMatch(/^Webhook signing secret \(shown once\): whsec_/);
    await page.click('#journey-error a');
    await page.waitForSelector('#journey-summary');
    const id = page.url().split('/').pop()!;
    const { json } = await s.api('GET', `/v6/journeys/${id}`, s.keys.read);
    expect(json.journey.steps).toEqual([
      { id: 'step1', type: 'digest', event: 'like', window: '1h' },
      { id: 'step2', type: 'webhook', url: 'https://hooks.example.com/pushd' },
      { id: 'step3', type: 'delay', until: 'best_time' },
      { id: 'step4', type: 'send', notification: { payload: { alert: 'New likes' } } },
    ]);
    expect(json.journey).not.toHaveProperty('webhook_secret');

    const device = await registerDevice(s.h, s.keys.sdk, { platform: 'ios' });
    expect((await s.api('POST', `/v6/journeys/${id}/entries`, s.keys.write, { device_id: device.id })).status).toBe(202);
    // the digest begins its window once a worker runs it
    await waitFor('the digest to begin', async () => {
      const { json: h } = await s.api('GET', `/v6/journeys/${id}/entrants/device:${device.id}`, s.keys.read);
      return h.entrants[0].history.some((x: { what: string }) => x.what === 'waiting');
    });
    await page.fill('#entrant-key', `device:${device.id}`);
    await page.click('#entrant-show');
    await page.waitForSelector('.entrant-history tbody tr');
    const rows = await page
      .locator('.entrant-history tbody tr')
      .evaluateAll((trs) => trs.map((r) => [r.children[1]!.textContent, r.children[2]!.textContent, r.children[3]!.textContent]));
    expect(rows[0]).toEqual(['step1', 'entered', '']);
    expect(rows[1]![0]).toBe('step1');
    expect(rows[1]![1]).toBe('waiting');
    expect(rows[1]![2]).toMatch(/^event like · until \S+/);
    expect(await page.textContent('.entrant-entry p')).toMatch(/\(version 1\) · waiting at step1$/);
    await page.fill('#entrant-key', 'device:00000000-0000-0000-0000-000000000000');
    await page.click('#entrant-show');
    await page.waitForSelector('#entrant-history .muted');
    expect(await page.textContent('#entrant-history')).toBe('It never entered this journey.');
    expect(problems).toEqual([]);
    await page.close();
  });
});
