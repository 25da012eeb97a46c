import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haveChromium, openAt, startConsoleServer, type ConsoleServer } from './session.js';

/**
 * Stored templates in the console, in Chromium: the compose page picks one, previews it rendered and sends it by
 * id; the journey form's send step picks one in place of its text.
 */
describe.skipIf(!haveChromium)('stored templates in the console', () => {
  let s: ConsoleServer;
  let template: { id: string };

  beforeAll(async () => {
    s = await startConsoleServer();
    const made = await s.api('POST', '/v6/templates', s.keys.write, {
      template: { name: 'Welcome', payload: { alert: 'Hi {{ custom.first_name | default: "there" }}' } },
    });
    expect(made.status).toBe(201);
    template = made.json.template;
  });
  afterAll(async () => s?.close());

  it('compose picks a stored template, previews it rendered and sends it by id', async () => {
    const { page, problems } = await openAt(s, '#/compose');
    await page.click('input[name="target"][value="all"]');
    await page.selectOption('#template-select', template.id);
    await expect.poll(() => page.textContent('#preview-apns')).toContain('"alert": "Hi there"');
    expect(await page.textContent('#preview-fcm')).toContain('"body": "Hi there"');
    await page.click('#send');
    await page.click('#confirm-send');
    await page.waitForURL(/#\/notifications\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').pop()!;
    const { json } = await s.api('GET', `/v6/notifications/${id}`, s.keys.read);
    // the template's content as it was taken, and which version
    expect(json.notification).toMatchObject({ payload: { alert: 'Hi {{ custom.first_name | default: "there" }}' } });
    const stored = await s.h.db.db.selectFrom('notifications').select('request').where('id', '=', id).executeTakeFirstOrThrow();
    expect(stored.request).toMatchObject({ template_id: template.id, template_version: 1 });
    expect(problems).toEqual([]);
    await page.close();
  });

  it("the journey form's send step picks a stored template in place of its text", async () => {
    const { page, problems } = await openAt(s, '#/journeys');
    await page.fill('#journey-name', 'Welcome series');
    await page.fill('#journey-trigger', 'signup');
    await page.selectOption('[data-step="0"] [data-field="type"]', 'send');
    await page.selectOption('[data-step="0"] [data-field="template"]', template.id);
    await page.click('#save-journey');
    await page.waitForSelector('#journey-summary');
    const id = page.url().split('/').pop()!;
    const { json } = await s.api('GET', `/v6/journeys/${id}`, s.keys.read);
    expect(json.journey.steps).toEqual([{ id: 'step1', type: 'send', notification: { template_id: template.id } }]);
    expect(problems).toEqual([]);
    await page.close();
  });
});
