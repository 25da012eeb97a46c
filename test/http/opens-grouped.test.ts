import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { registerDevice, setCredentials, useGatewaysHarness } from '../helpers/gateways.js';
import { call, holdDevice } from './device-support.js';
import type { AppWithKeys } from './support.js';

/**
 * Push opens that arrive together, as the taps on a broadcast's push do, are checked and written in one transaction
 * (`ActivityService.writeOpens`): each is still answered as it would be alone (202; 400 naming the field for a
 * notification not the app's, not received, or opened before it was made; 404 unknown; 451 erased), a device's two
 * opens in one burst are both kept, a retry counts nothing more, and the notification's figures count each once.
 */
describe('push opens that arrive together', () => {
  const { h, gw } = useGatewaysHarness();

  async function newApp(): Promise<AppWithKeys> {
    const app = await h.createApp();
    await setCredentials(h, app.app.id, gw);
    return app;
  }
  /** One push to every device of `user`, answered once the gateways have (so each device has its receipt). */
  async function pushToUser(app: AppWithKeys, user: string, devices: number): Promise<string> {
    const res = await call(h, 'POST', '/v6/transactional/notifications', app.keys.write, {
      to: { field: 'user_id', value: user },
      group: 'opens-grouped',
      notification: { payload: { alert: 'Back in stock' } },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().results.success).toBe(devices);
    return res.json().id as string;
  }
  const open = (app: AppWithKeys, deviceId: string, body: Record<string, unknown>, key = app.keys.sdk) =>
    call(h, 'POST', `/v6/devices/${deviceId}/opens`, key, { open: body });

  it('are checked and written together, each answered and counted as if alone', async () => {
    const app = await newApp();
    const elsewhere = await newApp();
    const devices = [];
    for (let i = 0; i < 20; i++)
      devices.push(await registerDevice(h, app.keys.sdk, { platform: i % 2 ? 'android' : 'ios', user_id: 'reader' }));
    const stranger = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
    const erased = await registerDevice(h, app.keys.sdk, { platform: 'android', user_id: 'reader' });
    const nid = await pushToUser(app, 'reader', devices.length + 1);
    await registerDevice(h, elsewhere.keys.sdk, { platform: 'ios', user_id: 'other' });
    const foreign = await pushToUser(elsewhere, 'other', 1);
    expect((await call(h, 'POST', `/v6/devices/${erased.id}/erase`, app.keys.write)).statusCode).toBe(200);

    const answers = await Promise.all([
      // the third device's id in upper case, as the path takes it too
      ...devices.map((d, i) => open(app, i === 2 ? d.id.toUpperCase() : d.id, { _nid: nid, tapped: i % 4 !== 3 })),
      // the first device opened the app again without a tap, and the second's retry, in the same burst
      open(app, devices[0]!.id, { _nid: nid, tapped: false }),
      open(app, devices[1]!.id, { _nid: nid, tapped: true }),
      open(app, stranger.id, { _nid: nid, tapped: true }),
      open(app, stranger.id, { _nid: foreign, tapped: true }),
      open(app, devices[4]!.id, { _nid: nid, tapped: true, opened_at: new Date(Date.now() - 3_600_000).toISOString() }),
      open(app, randomUUID(), { _nid: nid, tapped: true }),
      open(app, erased.id, { _nid: nid, tapped: true }),
    ]);
    expect(answers.map((a) => a.statusCode)).toEqual([...devices.map(() => 202), 202, 202, 400, 400, 400, 404, 451]);
    expect(answers.slice(devices.length + 2).map((a) => a.json())).toEqual([
      { error: 'open._nid: was not delivered to this device' },
      { error: 'open._nid: is not a notification of this app' },
      { error: 'open.opened_at: is before the notification was created' },
      { error: 'device not found' },
      { error: expect.any(String) },
    ]);

    const stored = await h.db.db
      .selectFrom('push_opens')
      .select(['device_id', 'kind', sql<string>`xmin::text`.as('xmin')])
      .where('notification_id', '=', nid)
      .execute();
    const kinds = (deviceId: string) =>
      stored
        .filter((s) => s.device_id === deviceId)
        .map((s) => s.kind)
        .sort();
    devices.forEach((d, i) =>
      expect(kinds(d.id), `device ${i}`).toEqual(i === 0 ? ['direct', 'indirect'] : [i % 4 !== 3 ? 'direct' : 'indirect']),
    );
    expect(kinds(stranger.id)).toEqual([]);
    // written by a few transactions, not one an open
    expect(new Set(stored.map((s) => s.xmin)).size).toBeLessThan(devices.length / 2);

    const figures = (await call(h, 'GET', `/v6/stats/notifications/${nid}/events`, app.keys.read)).json();
    expect(figures).toMatchObject({ direct_opens: 15, indirect_opens: 6, influenced_opens: 21, opens: 20 });
    for (const d of devices) {
      const device = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json().device;
      expect(Date.parse(device.last_opened)).toBeGreaterThan(Date.now() - 60_000);
    }
    // a backend relaying its app's reports (the write key) is believed in a group too
    const relayed = await Promise.all([open(app, stranger.id, { _nid: nid, tapped: true }, app.keys.write)]);
    expect(relayed.map((a) => a.statusCode)).toEqual([202]);
  });

  it('wait for no device held by other work: only its own open waits for it', async () => {
    const app = await newApp();
    const held = await registerDevice(h, app.keys.sdk, { platform: 'ios', user_id: 'pair' });
    const free = await registerDevice(h, app.keys.sdk, { platform: 'android', user_id: 'pair' });
    const nid = await pushToUser(app, 'pair', 2);
    const holder = await holdDevice(h, held.id);
    let heldAnswered = false;
    const heldAnswer = open(app, held.id, { _nid: nid, tapped: true }).finally(() => (heldAnswered = true));
    const [freeAnswer] = await Promise.all([open(app, free.id, { _nid: nid, tapped: true }), new Promise((r) => setTimeout(r, 300))]);
    expect(freeAnswer.statusCode, freeAnswer.body).toBe(202);
    expect(heldAnswered).toBe(false);
    await holder.release();
    expect((await heldAnswer).statusCode).toBe(202);
    const stored = await h.db.db.selectFrom('push_opens').select('device_id').where('notification_id', '=', nid).execute();
    expect(stored.map((s) => s.device_id).sort()).toEqual([held.id, free.id].sort());
  });
});
