import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways } from '../helpers/gateways.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';

/**
 * A journey's send step is sent by the process that moved its entrants, to the tokens read when its batch was cut, in
 * the process's turns of large batches: no delivery job carries it and no second read of the devices is made. The
 * attempt log line names who made each attempt (`job`).
 */
describe('journeys: a batch is sent by the process that moved it', () => {
  const lines: Record<string, unknown>[] = [];
  let h: Harness;
  let gw: Gateways;
  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({
      workers: true,
      env: { ...gw.env, JOURNEY_POLL_MS: '50', LOG_LEVEL: 'debug' },
      logTo: new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
          done();
        },
      }),
    });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  it('pushes each entrant once, each attempt made directly, none by a delivery job', async () => {
    const app = await h.createApp();
    await setCredentials(h, app.app.id, gw);
    const journey = {
      name: 'Sent here',
      trigger: { api: true },
      steps: [{ id: 'hello', type: 'send', notification: { payload: { alert: 'Hello' } } }],
    };
    const j = (await call(h, 'POST', '/v6/journeys', app.keys.write, { journey })).json().journey;
    const devices: Awaited<ReturnType<typeof registerDevice>>[] = [];
    for (const platform of ['ios', 'android', 'ios'] as const) devices.push(await registerDevice(h, app.keys.sdk, { platform }));
    for (const d of devices)
      expect((await call(h, 'POST', `/v6/journeys/${j.id}/entries`, app.keys.write, { device_id: d.id })).statusCode).toBe(202);

    const pushesTo = (token: string) => [...gw.apns.pushes, ...gw.fcm.pushes].filter((p) => p.token === token).length;
    await waitFor('every entrant pushed', async () => devices.every((d) => pushesTo(d.token) >= 1), 20_000);
    const notifications = (await call(h, 'GET', '/v6/notifications', app.keys.read)).json().notifications as { id: string }[];
    const ids = new Set(notifications.map((n) => n.id));
    const attempts = () => lines.filter((l) => l.msg === 'batch attempt recorded' && ids.has(l.notificationId as string));
    await waitFor('the attempts recorded', async () => attempts().reduce((n, l) => n + (l.sent as number), 0) === 3, 10_000);
    // a while longer: a delivery job, or a second send, would have come by now
    await new Promise((r) => setTimeout(r, 500));
    expect(devices.map((d) => pushesTo(d.token))).toEqual([1, 1, 1]);
    expect(attempts().length).toBeGreaterThan(0);
    expect(attempts().map((l) => l.job)).toEqual(attempts().map(() => 'direct'));
  });
});
