import { randomBytes, randomUUID } from 'node:crypto';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDevice } from '../helpers/gateways.js';
import { basic } from '../helpers/harness.js';
import { haveChromium, openAt, startConsoleServer, type ConsoleServer } from './session.js';

/**
 * The Live Activity compose page in Chromium: an update for an activity with a registered token shows the APNs
 * request it becomes, goes out, and its page counts the push; hostile input shows the API's own message and sends
 * nothing; an update on a broadcast channel goes out as one request to APNs' broadcast endpoint. And compose's
 * filter builder offers the platforms by name, Huawei among them.
 */
describe.skipIf(!haveChromium)('Live Activities in Chromium', () => {
  let s: ConsoleServer;
  const activity = randomUUID();
  const token = randomBytes(80).toString('hex');

  const open = (hash: string) => openAt(s, hash);
  const field = (page: Page, name: string) => page.textContent(`#la-status [data-field="${name}"]`);
  const created = async () => (await s.h.db.db.selectFrom('notifications').select('id').where('app_id', '=', s.appId).execute()).length;

  beforeAll(async () => {
    s = await startConsoleServer();
    const device = await registerDevice(s.h, s.keys.sdk, { platform: 'ios' });
    await registerDevice(s.h, s.keys.sdk, { platform: 'ios' }); // holds no token of the activity
    const put = await s.h.server.inject({
      method: 'PUT',
      url: `/v6/devices/${device.id}/live-activities/${activity}`,
      headers: { authorization: basic(s.keys.sdk) },
      payload: { activity_type: 'DeliveryAttributes', token },
    });
    expect(put.statusCode).toBe(204);
    await registerDevice(s.h, s.keys.sdk, { platform: 'android' });
    for (let i = 0; i < 3; i++) {
      const hms = `IQAAAACy0${randomBytes(48).toString('base64url')}`;
      expect((await s.api('POST', '/v6/devices', s.keys.sdk, { device: { platform: 'huawei', token: hms } })).status).toBe(201);
    }
  });
  afterAll(async () => s?.close());

  it('composes an update for an activity, previews its APNs request, sends it and counts the push', async () => {
    const { page, problems } = await open('#/live-activities');
    await page.waitForTimeout(400); // past the form's debounce: the empty form asks nothing, so shows no error
    expect(problems).toEqual([]);
    expect(await page.textContent('#la-error')).toBe('');
    await page.fill('input[name="activity_id"]', activity);
    await page.fill('textarea[name="content_state"]', '{"eta": 5}');
    await page.fill('input[name="alert_body"]', 'Almost there');
    await page.selectOption('select[name="priority"]', 'normal');
    // the preview is the server's mapping of this very form
    await expect.poll(() => page.textContent('#la-preview')).toContain('"content-state"');
    const preview = (await page.textContent('#la-preview'))!;
    expect(preview).toContain('"apns-push-type": "liveactivity"');
    expect(preview).toContain('"apns-priority": 5');
    expect(preview).toContain('"eta": 5');
    expect(preview).toContain('"body": "Almost there"');
    expect(await page.textContent('#la-error')).toBe('');

    await page.click('#la-send');
    await page.waitForURL(/#\/live-activities\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').pop()!;
    await expect.poll(() => field(page, 'state'), { timeout: 20_000 }).toBe('sent');
    expect(await field(page, 'devices_targeted')).toBe('1');
    expect(await field(page, 'pushes_succeeded')).toBe('1');
    expect(await field(page, 'activity_id')).toBe(activity);
    // what the page shows is what the API answers, and the push reached the activity's token at APNs
    const record = (await s.api('GET', `/v6/live-activities/${id}`, s.keys.read)).json.live_activity;
    expect(record).toMatchObject({ state: 'sent', event: 'update', devices_targeted: 1, pushes_succeeded: 1 });
    expect(s.gw.apns.pushes.map((p) => [p.token, p.priority, p.payload])).toEqual([
      [token, 5, { aps: expect.objectContaining({ event: 'update', 'content-state': { eta: 5 }, alert: { body: 'Almost there' } }) }],
    ]);
    // a half-written form is refused by the preview (a 400 the browser logs), never an exception of the page
    expect(problems.filter((p) => p.startsWith('pageerror'))).toEqual([]);
    await page.close();
  });

  it("shows the API's message for hostile input, as text, and sends nothing", async () => {
    const { page } = await open('#/live-activities');
    const before = await created();
    await page.fill('input[name="activity_id"]', "order-1'; DROP TABLE devices;--");
    await page.fill('textarea[name="content_state"]', '{"eta": 1}');
    await expect
      .poll(() => page.textContent('#la-error'))
      .toBe("live_activity.activity_id: must be the activity's id, a UUID (ActivityKit's Activity.id)");
    await page.fill('input[name="activity_id"]', activity);
    await page.fill('textarea[name="content_state"]', '<img src=x onerror=alert(1)>');
    await expect
      .poll(() => page.textContent('#la-error'))
      .toBe('live_activity.content_state: must be a JSON object (the ContentState of the activity)');
    expect(await page.locator('main img').count()).toBe(0);
    // Send says the same and creates nothing
    await page.click('#la-send');
    await page.waitForTimeout(300);
    expect(await page.textContent('#la-error')).toBe(
      'live_activity.content_state: must be a JSON object (the ContentState of the activity)',
    );
    expect(page.url()).toMatch(/#\/live-activities$/);
    // a start's rules are the server's: without attributes it is refused, naming them
    await page.click('input[name="la-event"][value="start"]');
    await page.fill('input[name="activity_type"]', 'DeliveryAttributes');
    await page.fill('textarea[name="content_state"]', '{"eta": 1}');
    await expect
      .poll(() => page.textContent('#la-error'))
      .toBe('live_activity.attributes: must be a JSON object (the ActivityAttributes of the activity)');
    await page.click('#la-send');
    await page.waitForTimeout(300);
    expect(await created()).toBe(before);
    await page.close();
  });

  it('sends a broadcast on a channel from the console: one request to the broadcast endpoint, no token push', async () => {
    // a channel created through the API before the page loads (the page lists the app's channels when it opens)
    const created = await s.api('POST', '/v6/live-activities/channels', s.keys.write, { message_storage_policy: 0 });
    expect(created.status).toBe(201);
    const channel = created.json.channel.id as string;
    const pushesBefore = s.gw.apns.pushes.length;
    const broadcastsBefore = s.gw.apns.broadcasts.length;
    const { page, problems } = await open('#/live-activities');
    await page.click('input[name="la-by"][value="channel"]');
    await page.selectOption('select[name="channel"]', channel);
    await page.fill('textarea[name="content_state"]', '{"home": 2, "away": 1}');
    await page.fill('input[name="alert_title"]', 'Goal');
    await expect.poll(() => page.textContent('#la-preview')).toContain('"content-state"');
    expect(await page.textContent('#la-preview')).toContain('"apns-push-type": "liveactivity"');
    expect(await page.textContent('#la-error')).toBe('');

    await page.click('#la-send');
    await page.waitForURL(/#\/live-activities\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').pop()!;
    await expect.poll(() => field(page, 'state'), { timeout: 20_000 }).toBe('sent');
    expect(await field(page, 'channel')).toBe(channel);
    expect(await field(page, 'pushes_succeeded')).toBe('1');
    const record = (await s.api('GET', `/v6/live-activities/${id}`, s.keys.read)).json.live_activity;
    expect(record).toMatchObject({ state: 'sent', event: 'update', channel, pushes_succeeded: 1 });
    // exactly one request reached APNs, on the app's broadcast path with the channel's id, and no device token a push
    const broadcasts = s.gw.apns.broadcasts.slice(broadcastsBefore);
    expect(broadcasts).toHaveLength(1);
    const [broadcast] = broadcasts;
    expect(broadcast).toMatchObject({
      path: '/4/broadcasts/apps/com.example.console',
      bundleId: 'com.example.console',
      channelId: channel,
      pushType: 'liveactivity',
      priority: 10,
    });
    expect(broadcast!.headers['apns-channel-id']).toBe(channel);
    expect(broadcast!.payload).toEqual({
      aps: { timestamp: expect.any(Number), event: 'update', 'content-state': { home: 2, away: 1 }, alert: { title: 'Goal' } },
    });
    expect(s.gw.apns.pushes.length).toBe(pushesBefore);
    expect(problems.filter((p) => p.startsWith('pageerror'))).toEqual([]);
    await page.close();
  });

  it("compose's filter builder offers the platforms by name and counts Huawei devices", async () => {
    const { page } = await open('#/compose');
    await page.click('#add-filter');
    const filter = page.locator('[data-filter="0"]');
    await filter.locator('[data-field="attribute"]').selectOption('platform');
    const choice = filter.locator('[data-criterion="0"] [data-field="value"]');
    expect(await choice.locator('option').allTextContents()).toEqual(['iOS', 'Android', 'Web', 'Huawei']);
    await expect.poll(() => page.textContent('#device-count')).toBe('2'); // iOS
    await choice.selectOption('Huawei');
    await expect.poll(() => page.textContent('#device-count')).toBe('3');
    expect(JSON.parse((await page.textContent('#to-json'))!)).toEqual([{ name: 'platform', criteria: ['Huawei'] }]);
    await choice.selectOption('Android');
    await expect.poll(() => page.textContent('#device-count')).toBe('1');
    // its preview shows what Huawei Push Kit and Web Push get
    await page.fill('input[name="alert"]', 'Bonjour');
    await expect.poll(() => page.textContent('#preview-hms')).toContain('"Bonjour"');
    expect(await page.textContent('#preview-web')).toContain('"Bonjour"');
    await page.close();
  });
});
