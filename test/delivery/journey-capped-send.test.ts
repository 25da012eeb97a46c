import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways } from '../helpers/gateways.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';

/**
 * A send step under the app's frequency cap, end to end (workers, mock gateways): the second step's push is capped
 * like any notification's, and the entrant's history says so beside each notification it was sent.
 */
describe('journeys: a send step under a frequency cap', () => {
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

  it('the capped push is not sent, and the history shows delivered then not_delivered (frequency_capped)', async () => {
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
    const [first, second] = await sent();
    expect(first!.deliveries).toEqual([expect.objectContaining({ outcome: 'delivered' })]);
    expect(second!.deliveries).toEqual([expect.objectContaining({ outcome: 'not_delivered', reason: 'frequency_capped' })]);
    expect(gw.apns.pushes.filter((p) => p.token === phone.token)).toHaveLength(1);
  });
});
