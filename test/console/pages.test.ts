import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDevice, waitFor, type RegisteredDevice } from '../helpers/gateways.js';
import { haveChromium, loaded, problemsOf, signIn, startConsoleServer, type ConsoleServer } from './session.js';

/**
 * Every kind of notification the API makes, created through the API, then read in the console: its row in the
 * list and its own page say what it went to and what it says, with no uncaught error or console error. And the
 * router draws one page at a time however fast the hash changes after sign-in.
 */
const ARTIFACTS = path.resolve('test-artifacts/console');
const when = (iso: string) => new Date(iso).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';

interface Kind {
  name: string;
  id: string;
  /** the target in words, as the list and the page show it */
  to: string;
  text: string;
  group?: string;
  /** the list's timing note beside the state */
  timing?: string;
}

describe.skipIf(!haveChromium)('console pages in Chromium', () => {
  let s: ConsoleServer;
  let ana: RegisteredDevice;
  const kinds: Kind[] = [];
  const record = async (id: string) => (await s.api('GET', `/v6/notifications/${id}`, s.keys.read)).json;

  beforeAll(async () => {
    s = await startConsoleServer();
    const { api, keys } = s;
    ana = await registerDevice(s.h, keys.sdk, { platform: 'ios', user_id: 'ana', locale: 'en_US' });
    await registerDevice(s.h, keys.sdk, { platform: 'android', user_id: 'ana', locale: 'fr_FR' });
    await registerDevice(s.h, keys.sdk, { platform: 'android', locale: 'fr_FR', tags: ['vip'] });
    const create = async (notification: Record<string, unknown>) => {
      const res = await api('POST', '/v6/notifications', keys.write, { notification });
      expect(res.status, JSON.stringify(res.json)).toBe(201);
      return res.json as { id: string; to: { id: string } };
    };
    const transactional = async (body: Record<string, unknown>) => {
      const res = await api('POST', '/v6/transactional/notifications', keys.write, body);
      expect(res.status, JSON.stringify(res.json)).toBe(200);
      expect(res.json.results.success).toBe(1);
      return res.json as { id: string };
    };

    const broadcast = await create({ to: '*', payload: { alert: 'To every device' } });
    kinds.push({ name: 'broadcast', id: broadcast.id, to: 'all devices', text: 'To every device' });
    const filters = await create({ to: [{ name: 'locale', criteria: ['fr_FR'] }], payload: { alert: 'Bonjour' } });
    kinds.push({ name: 'on-the-fly filters', id: filters.id, to: 'locale is fr_FR', text: 'Bonjour' });
    const stored = await create({ to: { audience: filters.to.id }, payload: { alert: 'Again, to the stored audience' } });
    kinds.push({ name: 'stored audience', id: stored.id, to: 'a stored audience', text: 'Again, to the stored audience' });
    const byDevice = await transactional({
      to: { field: 'device_id', value: ana.id },
      group: 'receipt',
      notification: { payload: { alert: 'Your receipt' } },
    });
    kinds.push({ name: 'transactional by device_id', id: byDevice.id, to: `device ${ana.id}`, text: 'Your receipt', group: 'receipt' });
    const byUser = await transactional({
      to: { field: 'user_id', value: 'ana' },
      group: 'chat-message',
      notification: { payload: { title: 'Bea wrote', thread: 't-1' } },
      extra_filters: [{ name: 'locale', criteria: ['en_US'] }],
    });
    kinds.push({
      name: 'transactional by user_id',
      id: byUser.id,
      to: 'user ana and locale is en_US',
      text: 'Bea wrote',
      group: 'chat-message',
    });
    const sendAt = new Date(Math.ceil((Date.now() + 3 * 3_600_000) / 60_000) * 60_000).toISOString();
    const scheduled = await create({ to: [{ name: 'tags', criteria: ['vip'] }], payload: { alert: 'Later' }, send_at: sendAt });
    kinds.push({ name: 'scheduled', id: scheduled.id, to: 'tags is vip', text: 'Later', timing: `at ${when(sendAt)}` });
    // a wall time two days on, so every zone's clock still has it ahead; a background push: no text, its keys
    const wall = new Date(Date.now() + 2 * 86_400_000).toISOString().slice(0, 11) + '09:00';
    const local = await create({ to: '*', payload: { content_available: true, sync: 'inbox' }, send_at: wall, local_time: true });
    // (its keys in the order the API answers them: PostgreSQL's jsonb puts shorter keys first)
    kinds.push({ name: 'local time', id: local.id, to: 'all devices', text: 'sync, content_available', timing: 'local time' });

    // the sends go out before the console reads them, so the states it shows hold still
    for (const k of kinds.filter((k) => !k.timing))
      await waitFor(`${k.name} to be sent`, async () => (await record(k.id)).state === 'sent', 20_000);
  });
  afterAll(async () => s?.close());

  it('lists every kind of notification with what it went to and what it says, without an error', async () => {
    const page = await s.context.newPage();
    const problems = problemsOf(page);
    await signIn(page, s.base, s.keys.read);
    await page.goto(`${s.base}/console/#/notifications`);
    await loaded(page);
    // a page that fails to render shows its error in a box (p.error) instead of the table
    expect((await page.locator('main p.error').allTextContents()).filter(Boolean)).toEqual([]);
    expect(await page.locator('#notifications tbody tr').count()).toBe(kinds.length);
    for (const k of kinds) {
      const n = await record(k.id);
      const row = page.locator('#notifications tbody tr', { has: page.locator(`a[href="#/notifications/${k.id}"]`) });
      expect(await row.locator('td.to').textContent(), k.name).toBe(k.to);
      expect(await row.locator('td.text').textContent(), k.name).toBe(k.text);
      expect(await row.locator('.state').textContent(), k.name).toBe(n.state);
      expect(await row.locator('.timing').allTextContents(), k.name).toEqual(k.timing ? [` ${k.timing}`] : []);
    }
    expect(problems).toEqual([]);
    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: path.join(ARTIFACTS, 'notifications-every-kind.png'), fullPage: true });
    await page.close();
  });

  it('shows each kind of notification on its own page, without an error', async () => {
    const page = await s.context.newPage();
    const problems = problemsOf(page);
    await signIn(page, s.base, s.keys.write);
    for (const k of kinds) {
      const n = await record(k.id);
      await page.goto(`${s.base}/console/#/notifications/${k.id}`);
      await loaded(page);
      await page.waitForSelector('#state');
      expect((await page.locator('main p.error').allTextContents()).filter(Boolean), k.name).toEqual([]);
      expect(await page.textContent('main h1'), k.name).toBe(`Notification ${k.id}`);
      expect(await page.textContent('#state'), k.name).toBe(n.state);
      expect(await page.textContent('#notification-to'), k.name).toBe(k.to);
      expect(await page.textContent('#notification-text'), k.name).toBe(k.text);
      expect(JSON.parse((await page.textContent('#payload'))!), k.name).toEqual(n.notification.payload);
      expect(await page.locator('#notification-group').allTextContents(), k.name).toEqual(k.group ? [k.group] : []);
      // a transactional send has no audience to link to; the others link to theirs
      const audienceLinks = await page
        .locator('#delivery dd a[href^="#/audiences/"]')
        .evaluateAll((as) => as.map((a) => a.getAttribute('href')));
      expect(audienceLinks, k.name).toEqual(n.to.id ? [`#/audiences/${n.to.id}`] : []);
      if (k.timing) expect(await page.textContent('#send-at'), k.name).toBe(when(n.send_at));
      if (k.timing) expect(await page.locator('#cancel').count(), k.name).toBe(1);
    }
    expect(problems).toEqual([]);
    await page.close();
  });

  it('draws exactly one page when the hash changes right after sign-in (10 runs)', async () => {
    const targets: [hash: string, heading: string][] = [
      ['#/notifications', 'Notifications'],
      ['#/audiences', 'Audiences'],
      ['#/compose', 'Compose'],
      [`#/notifications/${kinds[0]!.id}`, `Notification ${kinds[0]!.id}`],
    ];
    for (let run = 0; run < 10; run++) {
      const [hash, heading] = targets[run % targets.length]!;
      const page: Page = await s.context.newPage();
      const problems = problemsOf(page);
      // the overview's statistics answer late in most runs: the page asked for after it answers first
      const lateMs = run % 5 === 4 ? 0 : 150 + 50 * (run % 4);
      if (lateMs)
        await page.route('**/v6/stats/**', async (r) => {
          await new Promise((resolve) => setTimeout(resolve, lateMs));
          await r.continue().catch(() => undefined);
        });
      await page.goto(`${s.base}/console`);
      await page.fill('#key', s.keys.write);
      await page.click('#sign-in button[type=submit]');
      await page.waitForSelector('#who');
      await page.evaluate((h) => (location.hash = h), hash);
      await loaded(page);
      // long enough for the overview's late answers and its render
      await page.waitForTimeout(lateMs + 300);
      await page.waitForLoadState('networkidle');
      expect(await page.locator('main h1').allTextContents(), `run ${run}: ${hash}`).toEqual([heading]);
      expect(await page.locator('main [data-stat]').count(), `run ${run}: no overview card`).toBe(0);
      expect(problems, `run ${run}`).toEqual([]);
      await page.close();
    }
  });
});
