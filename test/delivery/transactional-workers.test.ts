import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';

/**
 * Transactional sends in a process that runs the workers too (`npm start`), with a sweeper that looks every
 * second: a send the request is still waiting on has no job in the queue, and must not be taken for a lost one.
 */
describe('transactional notifications beside the workers', () => {
  let h: Harness;
  let gw: Gateways;
  let write: string;
  const devices: RegisteredDevice[] = [];

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, env: { ...gw.env, SWEEP_AFTER_SECONDS: '1', TRANSACTIONAL_TIMEOUT_MS: '5000' } });
    const app = await h.createApp('com.example.transactional.workers');
    write = app.keys.write;
    await setCredentials(h, app.app.id, gw);
    for (let i = 0; i < 8; i++)
      devices.push(await registerDevice(h, app.keys.sdk, { platform: i % 2 ? 'ios' : 'android', user_id: `u${i % 4}` }));
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  const send = (to: { field: string; value: string }) =>
    h.server.inject({
      method: 'POST',
      url: '/v6/transactional/notifications',
      headers: { authorization: basic(write) },
      payload: { to, group: 'receipts', notification: { payload: { alert: 'Your receipt' } } },
    });
  const pushesTo = (token: string) => [...gw.apns.pushes, ...gw.fcm.pushes].filter((p) => p.token === token).length;

  it('pushes each device once, also when the gateway takes longer than the sweeper waits', async () => {
    // every push answered 2.5 s late: the sends stay in their requests' hands past several sweeps
    for (const mock of [gw.apns, gw.fcm]) mock.faults.sometimes(1, { type: 'delay', ms: 2500 });
    const answers = await Promise.all([
      ...devices.slice(0, 4).map((d) => send({ field: 'device_id', value: d.id })),
      send({ field: 'user_id', value: 'u0' }), // devices 0 and 4
    ]);
    for (const a of answers) expect(a.statusCode, a.body).toBe(200);
    expect(answers.map((a) => a.json().results.success)).toEqual([1, 1, 1, 1, 2]);
    for (const mock of [gw.apns, gw.fcm]) mock.faults.clear();

    await new Promise((r) => setTimeout(r, 3000)); // three more sweeps; a push re-sent by a worker would arrive now
    expect(devices.map((d) => pushesTo(d.token))).toEqual([2, 1, 1, 1, 1, 0, 0, 0]);
    for (const a of answers) {
      const n = await waitFor('the notification to be read', async () => {
        const res = await h.server.inject({
          method: 'GET',
          url: `/v6/notifications/${a.json().id}`,
          headers: { authorization: basic(write) },
        });
        return res.statusCode === 200 ? (res.json() as { state: string }) : null;
      });
      expect(n.state).toBe('sent');
    }
  });
});
