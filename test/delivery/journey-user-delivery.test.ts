import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways } from '../helpers/gateways.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';

/**
 * Journeys' sends end to end, workers and mock gateways: the events of two of a user's devices enter the user once,
 * the journey's send reaches each of the user's devices once (and no one else), and it is listed and counted in
 * the statistics like any notification, with its journey and step; a send step under the app's frequency cap is
 * capped like any notification, and the entrant's history says so beside each notification it was sent.
 */
describe('journeys: sends to a user entrant, and under a frequency cap', () => {
  let h: Harness;
  let gw: Gateways;
  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, env: { ...gw.env, JOURNEY_POLL_MS: '50' } });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  it("each of the user's devices gets the step's push once, the statistics count them, with the journey and step", async () => {
    const app = await h.createApp();
    await setCredentials(h, app.app.id, gw);
    const journey = {
      name: 'Welcome the user',
      trigger: { event: 'signed_up' },
      steps: [{ id: 'hello', type: 'send', notification: { payload: { alert: 'Hello, you' } } }],
    };
    const j = (await call(h, 'POST', '/v6/journeys', app.keys.write, { journey })).json().journey;
    const phone = await registerDevice(h, app.keys.sdk, { platform: 'ios', user_id: 'ada' });
    const tablet = await registerDevice(h, app.keys.sdk, { platform: 'android', user_id: 'ada' });
    const stranger = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
    for (const d of [phone, tablet])
      expect((await call(h, 'POST', `/v6/devices/${d.id}/events`, app.keys.sdk, { events: [{ name: 'signed_up' }] })).statusCode).toBe(202);

    const pushesTo = (token: string) => [...gw.apns.pushes, ...gw.fcm.pushes].filter((p) => p.token === token).length;
    await waitFor('both devices of the user pushed', async () => pushesTo(phone.token) + pushesTo(tablet.token) >= 2, 20_000);
    const listed = async () =>
      (await call(h, 'GET', '/v6/notifications', app.keys.read)).json().notifications.filter((n: { journey?: unknown }) => n.journey);
    await waitFor('the send finished', async () => (await listed()).every((n: { state: string }) => n.state === 'sent'), 20_000);
    // a while longer: a second send would have come by now
    await new Promise((r) => setTimeout(r, 500));
    expect([pushesTo(phone.token), pushesTo(tablet.token), pushesTo(stranger.token)]).toEqual([1, 1, 0]);

    const [sent] = await listed();
    expect(await listed()).toHaveLength(1);
    expect(sent.journey).toEqual({ id: j.id, version: 1, step: 'hello' });
    const stats = (await call(h, 'GET', `/v6/stats/notifications/${sent.id}/events`, app.keys.read)).json();
    expect(stats).toMatchObject({ pushes_succeeded: 2, push_text: 'Hello, you', journey: { id: j.id, version: 1, step: 'hello' } });
    const counts = (await call(h, 'GET', `/v6/journeys/${j.id}`, app.keys.read)).json().journey.counts;
    expect(counts.trigger).toMatchObject({ entered: 1, skipped: 1 });
    expect(counts.steps[0]).toMatchObject({ id: 'hello', entered: 1, sent: 1, waiting: 0 });
  });

  it('the capped push is not sent, and the history shows one delivered and the other not_delivered (frequency_capped)', async () => {
    const app = await h.createApp();
    await setCredentials(h, app.app.id, gw);
    const capped = await h.server.inject({
      method: 'PATCH',
      url: '/v6/app',
      headers: { authorization: basic(app.keys.write) },
      payload: { frequency_caps: [{ limit: 1, window: 'day' }] },
    });
    expect(capped.statusCode, capped.body).toBe(200);
    const journey = {
      name: 'Twice',
      trigger: { api: true },
      steps: [
        { id: 'first', type: 'send', notification: { payload: { alert: 'one' } } },
        { id: 'second', type: 'send', notification: { payload: { alert: 'two' } } },
      ],
    };
    const j = (await call(h, 'POST', '/v6/journeys', app.keys.write, { journey })).json().journey;
    const phone = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
    expect((await call(h, 'POST', `/v6/journeys/${j.id}/entries`, app.keys.write, { device_id: phone.id })).statusCode).toBe(202);

    type Sent = { step: string; what: string; deliveries?: { outcome: string; reason?: string }[] };
    const sent = async () => {
      const res = await call(h, 'GET', `/v6/journeys/${j.id}/entrants/device:${phone.id}`, app.keys.read);
      return (res.json().entrants[0]?.history ?? []).filter((e: Sent) => e.what === 'sent') as Sent[];
    };
    const settled = (s: Sent[]) => s.length === 2 && s.every((e) => e.deliveries?.every((d) => d.outcome !== 'pending'));
    await waitFor('both steps sent and settled', async () => settled(await sent()), 20_000);
    // the two steps' notifications are made a moment apart and delivered by concurrent workers: whichever reaches
    // the cap first is sent, the other is capped, and the history says which
    const history = await sent();
    const delivered = history.filter((e) => e.deliveries?.[0]?.outcome === 'delivered');
    const refused = history.filter((e) => e.deliveries?.[0]?.outcome === 'not_delivered');
    expect(delivered).toHaveLength(1);
    expect(refused).toHaveLength(1);
    expect(refused[0]!.deliveries).toEqual([expect.objectContaining({ outcome: 'not_delivered', reason: 'frequency_capped' })]);
    const pushed = gw.apns.pushes.filter((p) => p.token === phone.token);
    expect(pushed).toHaveLength(1);
    expect(JSON.stringify(pushed[0]!.payload)).toContain(delivered[0]!.step === 'first' ? '"one"' : '"two"');
  });
});
