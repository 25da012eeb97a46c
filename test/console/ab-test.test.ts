import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { abBounds, abPoint, bucketOf, HOLDOUT } from '../../src/domain/ab-test.js';
import { registerDevice, type RegisteredDevice } from '../helpers/gateways.js';
import { haveChromium, openAt, startConsoleServer, type ConsoleServer } from './session.js';

/**
 * An A/B test from the console in Chromium: composed with a second variant's alert, a test share, a holdout and a
 * manual winner; its notification page shows the figures per variant, the holdout's baseline and each variant's
 * lift over it, and picks the winner, which goes to the rest.
 */
describe.skipIf(!haveChromium)('A/B tests in the console', () => {
  let s: ConsoleServer;
  const devices: RegisteredDevice[] = [];
  // enough that some device is held out (25 %) and some in A (25 %) whatever the notification's id draws: both miss
  // with a chance of 2 x 0.75^48, about 2 in a million (at 20 devices it was 6 in a thousand)
  const DEVICES = 48;

  beforeAll(async () => {
    s = await startConsoleServer();
    for (let i = 0; i < DEVICES; i++) devices.push(await registerDevice(s.h, s.keys.sdk, { platform: i % 2 ? 'android' : 'ios' }));
  });
  afterAll(async () => s?.close());

  it('composes a test, shows each variant sent, and sends the picked one to the rest', async () => {
    const { page, problems } = await openAt(s, '#/compose');
    await page.click('input[name="target"][value="all"]');
    await page.fill('input[name="alert"]', 'Variant A');
    await page.check('#ab-on');
    await page.fill('#ab-alert-1', 'Variant B');
    await page.fill('#ab-test', '50');
    await page.fill('#ab-holdout', '25');
    await page.selectOption('#ab-winner', 'manual');
    await expect.poll(() => page.textContent('#device-count')).toBe(String(DEVICES));
    await page.click('#send');
    await page.click('#confirm-send');
    await page.waitForURL(/#\/notifications\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').pop()!;

    const stored = (await s.api('GET', `/v6/notifications/${id}`, s.keys.read)).json;
    expect(stored.notification).toMatchObject({
      variants: [{ payload: { alert: 'Variant A' } }, { payload: { alert: 'Variant B' } }],
      test_fraction: 0.5,
      holdout_fraction: 0.25,
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

    // the baseline: a held-out device and a device of A open the app after the test went out
    const bounds = abBounds({ variants: stored.notification.variants, test_fraction: 0.5, holdout_fraction: 0.25, winner: 'manual' });
    const of = (bucket: number) => devices.filter((d) => bucketOf(abPoint(id, d.id), bounds) === bucket);
    const [held, inA] = [of(HOLDOUT), of(0)];
    if (!held.length || !inA.length) throw new Error('this test needs a device held out and one in A (a rerun draws anew)');
    for (const d of [held[0]!, inA[0]!])
      expect((await s.api('POST', `/v6/devices/${d.id}/sessions`, s.keys.sdk, { session: { id: randomUUID() } })).status).toBeLessThan(300);
    const baseline = (await s.api('GET', `/v6/stats/notifications/${id}/events`, s.keys.read)).json.ab_test;
    expect(baseline.holdout).toMatchObject({ devices: held.length, app_opened: 1 });
    expect(baseline.variants[0]).toMatchObject({ app_opened: 1 });
    const cell = (v: string, n: number) => page.locator(`#ab-variants tr[data-variant="${v}"] td:nth-child(${n})`).textContent();
    const pct = (r: number) => `${(r * 100).toFixed(2)} %`;
    await expect.poll(() => cell('holdout', 2)).toBe(`${held.length} devices`);
    await expect.poll(() => cell('holdout', 5)).toBe(`1 (${pct(baseline.holdout.app_open_rate)})`);
    await expect.poll(() => cell('0', 5)).toBe(`1 (${pct(baseline.variants[0].app_open_rate)})`);
    const lift = baseline.variants[0].lift.app_opens as number;
    await expect.poll(() => cell('0', 7)).toBe(`app opens ${lift >= 0 ? '+' : ''}${pct(lift)}`);

    await page.click('button[data-pick="1"]');
    await expect.poll(() => page.textContent('#ab-stage'), { timeout: 20_000 }).toMatch(/^variant B won/);
    const after = (await s.api('GET', `/v6/stats/notifications/${id}/events`, s.keys.read)).json.ab_test;
    expect(after).toMatchObject({ stage: 'rest', winner: 1 });
    await expect
      .poll(async () => (await s.api('GET', `/v6/notifications/${id}`, s.keys.read)).json.state, { timeout: 20_000 })
      .toBe('sent');
    const total = (await s.api('GET', `/v6/stats/notifications/${id}/events`, s.keys.read)).json.ab_test;
    expect(total.variants[0].sent + total.variants[1].sent + total.rest.sent + total.holdout.devices).toBe(DEVICES);
    await expect.poll(() => sent('rest')).toBe(String(total.rest.sent));
    expect(problems).toEqual([]);
  });
});
