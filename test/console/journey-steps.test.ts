import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haveChromium, openAt, startConsoleServer, type ConsoleServer } from './session.js';

/**
 * The Journeys form's other step types in Chromium (journeys.test.ts builds a delay and a send): a wait_for and a
 * branch made from their fields, a wait_for's missing timeout named under its step in words, the trigger and the
 * exit event, and the journey's page listing each step with its type.
 */
describe.skipIf(!haveChromium)('the journey form builds wait_for and branch steps', () => {
  let s: ConsoleServer;
  beforeAll(async () => {
    s = await startConsoleServer();
  });
  afterAll(async () => s?.close());

  it('makes the definition the fields say, after naming what is wrong under the step', async () => {
    const { page, problems } = await openAt(s, '#/journeys');
    await page.fill('#journey-name', 'Come back');
    await page.fill('#journey-trigger', 'signup');
    await page.fill('#journey-exit', 'purchase, subscribed');
    await page.selectOption('[data-step="0"] [data-field="type"]', 'wait_for');
    await page.fill('[data-step="0"] [data-field="main"]', 'app_open');
    await page.click('#add-step');
    await page.selectOption('[data-step="1"] [data-field="type"]', 'branch');
    await page.fill('[data-step="1"] [data-field="main"]', 'US');
    await page.click('#add-step');
    await page.fill('[data-step="2"] [data-field="main"]', 'We miss you');
    await page.click('#save-journey');
    await expect
      .poll(() => page.textContent('[data-error="journey.steps[0]"]'))
      .toBe('timeout: must be a duration such as "90s", "10m", "2h" or "3d"');

    await page.fill('[data-step="0"] [data-field="extra"]', '1d');
    await page.click('#save-journey');
    await page.waitForSelector('#journey-summary');
    expect(await page.textContent('#journey-summary')).toContain('on event signup · active · version 1');
    expect(await page.textContent('#journey-summary')).toContain('exits on purchase, subscribed');
    const id = page.url().split('/').pop()!;
    const { json } = await s.api('GET', `/v6/journeys/${id}`, s.keys.read);
    expect(json.journey).toMatchObject({ trigger: { event: 'signup' }, exit_on: ['purchase', 'subscribed'] });
    expect(json.journey.steps).toEqual([
      { id: 'step1', type: 'wait_for', event: 'app_open', timeout: '1d' },
      { id: 'step2', type: 'branch', filters: [{ name: 'country', criteria: ['US'] }], else: 'end' },
      { id: 'step3', type: 'send', notification: { payload: { alert: 'We miss you' } } },
    ]);
    const types = await page
      .locator('#step-counts tbody tr')
      .evaluateAll((rows) => rows.map((r) => [r.getAttribute('data-step'), r.children[1]!.textContent]));
    expect(types).toEqual([
      ['step1', 'wait_for'],
      ['step2', 'branch'],
      ['step3', 'send'],
    ]);
    expect(problems.filter((p) => !p.includes('400'))).toEqual([]);
    await page.close();
  });
});
