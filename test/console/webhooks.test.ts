import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDevice, waitFor } from '../helpers/gateways.js';
import { basic } from '../helpers/harness.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { haveChromium, openAt, startConsoleServer, type ConsoleServer } from './session.js';

const ARTIFACTS = path.resolve('test-artifacts/console');

/**
 * The Webhooks page in Chromium: each endpoint with its latest requests (status, latency, the answer's start), and a
 * notice on one pushd disabled (its receiver answered 410 to the workers' sender) and on one a key disabled.
 */
describe.skipIf(!haveChromium)('webhooks in Chromium', () => {
  let s: ConsoleServer;
  let rx: Receiver;
  const ids: Record<'healthy' | 'gone' | 'off', string> = { healthy: '', gone: '', off: '' };

  beforeAll(async () => {
    rx = await startReceiver();
    s = await startConsoleServer({ WEBHOOK_ALLOWED_ORIGINS: rx.origin, WEBHOOK_POLL_MS: '50' });
    const create = async (events: string[]) => {
      const res = await s.api('POST', '/v6/webhooks', s.keys.write, { url: rx.url, events, description: events.join(' ') });
      expect(res.status, JSON.stringify(res.json)).toBe(201);
      return res.json.webhook.id as string;
    };
    // one that answers (a ping), one the sender gets a 410 from, one turned off with the write key
    ids.healthy = await create(['conversion']);
    expect((await s.api('POST', `/v6/webhooks/${ids.healthy}/test`, s.keys.write)).json.status).toBe(204);
    ids.off = await create(['journey.entered']);
    expect((await s.api('PATCH', `/v6/webhooks/${ids.off}`, s.keys.write, { enabled: false })).status).toBe(200);
    rx.answerAlways({ status: 410 });
    ids.gone = await create(['push.delivered']);
    await registerDevice(s.h, s.keys.sdk, { platform: 'ios' });
    expect((await s.api('POST', '/v6/notifications', s.keys.write, { notification: { to: '*', payload: { alert: 'hi' } } })).status).toBe(
      201,
    );
    await waitFor('the endpoint disabled by pushd', async () => {
      const w = (await s.api('GET', `/v6/webhooks/${ids.gone}`, s.keys.read)).json.webhook;
      return w.enabled ? null : w;
    });
    rx.answerAlways({ status: 204 });
  });
  afterAll(async () => {
    await s?.close();
    await rx?.close();
  });

  it('shows each endpoint, its latest requests, and why one is disabled', async () => {
    const { page, problems } = await openAt(s, '#/webhooks');
    const panel = (id: string) => page.locator(`[data-webhook="${id}"]`);
    expect(await page.locator('[data-webhook]').count()).toBe(3);
    expect((await page.locator('main p.error[role=alert]').allTextContents()).filter(Boolean)).toEqual([]);

    expect(await panel(ids.healthy).locator('[data-field="ok"]').textContent()).toBe('Enabled and answering.');
    expect(await panel(ids.healthy).locator('[data-field="events"]').textContent()).toBe('conversion');
    expect(await panel(ids.healthy).locator('[data-field="status"]').allTextContents()).toEqual(['204']);

    const gone = await panel(ids.gone).locator('[data-field="disabled"]').textContent();
    expect(gone).toContain('pushd disabled this endpoint: the receiver answered 410 Gone.');
    expect(await panel(ids.gone).locator('[data-field="status"]').allTextContents()).toEqual(['410']);
    expect(await panel(ids.gone).locator('td.details').first().textContent()).toBe('answer body');

    expect(await panel(ids.off).locator('[data-field="disabled"]').textContent()).toBe(
      'Disabled with a write key: no event is recorded for it.',
    );
    expect(await panel(ids.off).locator('tbody').textContent()).toBe('No request sent yet.');
    expect(problems).toEqual([]);
    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: path.join(ARTIFACTS, 'webhooks.png'), fullPage: true });
    await page.close();
  });

  it('says when the app has no endpoint', async () => {
    for (const id of Object.values(ids)) {
      const res = await s.h.server.inject({ method: 'DELETE', url: `/v6/webhooks/${id}`, headers: { authorization: basic(s.keys.write) } });
      expect(res.statusCode).toBe(204);
    }
    const { page, problems } = await openAt(s, '#/webhooks');
    expect(await page.textContent('#no-webhooks')).toBe('No webhook endpoint yet.');
    expect(problems).toEqual([]);
    await page.close();
  });
});
