import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { oneFailure } from './support.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';

/**
 * A transactional send with a collapse_key is the same notification as the earlier one with that key to the same
 * recipient: same id, payload replaced, sent again; another recipient's, or a broadcast's, with that key is another
 * notification and is left alone. An API-only process (no workers) on the mock gateways; retries ~0.4–0.8 s apart,
 * so that a later send can come while an earlier one waits to retry.
 */
describe('transactional sends with a collapse_key', () => {
  let h: Harness;
  let gw: Gateways;
  let keys: { read: string; write: string; sdk: string };
  let ana: RegisteredDevice[];
  let bob: RegisteredDevice;

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({
      env: { ...gw.env, RETRY_BASE_MS: '3000', RETRY_MAX_MS: '3000', DELIVERY_MAX_ATTEMPTS: '5', TRANSACTIONAL_TIMEOUT_MS: '8000' },
    });
    const created = await h.createApp('com.example.transactional-collapse');
    keys = created.keys;
    await setCredentials(h, created.app.id, gw);
    ana = [
      await registerDevice(h, keys.sdk, { platform: 'ios', user_id: 'ana' }),
      await registerDevice(h, keys.sdk, { platform: 'android', user_id: 'ana' }),
    ];
    bob = await registerDevice(h, keys.sdk, { platform: 'android', user_id: 'bob' });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });
  beforeEach(() => {
    gw.reset();
    gw.fcm.faults.clear();
  });

  const send = (to: { field: string; value: string }, payload: Record<string, unknown>, group = 'order-status') =>
    h.server.inject({
      method: 'POST',
      url: '/v6/transactional/notifications',
      headers: { authorization: basic(keys.write) },
      payload: { to, group, notification: { payload } },
    });
  const record = async (id: string) =>
    (await h.server.inject({ method: 'GET', url: `/v6/notifications/${id}`, headers: { authorization: basic(keys.read) } })).json();
  /** The text of the notification's payload now (the stats' push_text). */
  const text = async (id: string) =>
    (
      await h.server.inject({ method: 'GET', url: `/v6/stats/notifications/${id}/events`, headers: { authorization: basic(keys.read) } })
    ).json().push_text;
  const toAna = { field: 'user_id', value: 'ana' };
  /** What the gateways accepted, in order: the token, the alert and the notification id it carried. */
  const accepted = () => [
    ...gw.apns.pushes.map((p) => ({ token: p.token, alert: (p.payload.aps as { alert?: string }).alert, nid: p.payload._nid })),
    ...gw.fcm.pushes.map((p) => {
      const data = p.message.data as Record<string, string>;
      return { token: p.token, alert: data.alert, nid: data._nid };
    }),
  ];

  it('a later send with the same key to the same user is the same notification: same id, payload replaced, sent again', async () => {
    const first = await send(toAna, { alert: 'Order 7: packed', collapse_key: 'order-7' });
    expect(first.statusCode, first.body).toBe(200);
    const second = await send(toAna, { alert: 'Order 7: shipped', collapse_key: 'order-7' }, 'order-shipped');
    expect(second.statusCode, second.body).toBe(200);
    const { id } = first.json();
    expect(second.json()).toEqual({ id, results: { success: 2, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 } });

    expect(await record(id)).toMatchObject({
      id,
      state: 'sent',
      group: 'order-shipped',
      devices_targeted: 4, // the counters continue, as for a broadcast's collapse_key
      pushes_succeeded: 4,
    });
    expect(await text(id)).toBe('Order 7: shipped');
    // each send went to the user's devices with the one notification id (and the key the gateways collapse on)
    const pushes = accepted();
    expect(pushes).toHaveLength(4);
    for (const p of pushes) expect(p.nid).toBe(id);
    expect(
      pushes
        .filter((p) => p.alert === 'Order 7: shipped')
        .map((p) => p.token)
        .sort(),
    ).toEqual(ana.map((d) => d.token).sort());
    expect(gw.apns.pushes.map((p) => p.collapseId)).toEqual(['order-7', 'order-7']);
  });

  it('the same key to another recipient (another user, or one device by id) is another notification', async () => {
    const toAna = await send({ field: 'user_id', value: 'ana' }, { alert: 'a', collapse_key: 'chat' });
    const toBob = await send({ field: 'user_id', value: 'bob' }, { alert: 'b', collapse_key: 'chat' });
    const toDevice = await send({ field: 'device_id', value: ana[0]!.id }, { alert: 'c', collapse_key: 'chat' });
    const ids = [toAna, toBob, toDevice].map((r) => r.json().id);
    expect(new Set(ids).size).toBe(3);
    // a device id is one recipient however it is written
    const again = await send({ field: 'device_id', value: ana[0]!.id.toUpperCase() }, { alert: 'd', collapse_key: 'chat' });
    expect(again.json().id).toBe(ids[2]);
    expect(await text(ids[0])).toBe('a');
    expect(await text(ids[1])).toBe('b');
    expect(accepted().filter((p) => p.token === bob.token)).toHaveLength(1);
  });

  it("never takes over a broadcast's notification with that key, nor is taken over by one", async () => {
    const post = (alert: string) =>
      h.server.inject({
        method: 'POST',
        url: '/v6/notifications',
        headers: { authorization: basic(keys.write) },
        payload: {
          notification: { to: '*', payload: { alert, collapse_key: 'promo' }, send_at: new Date(Date.now() + 3_600_000).toISOString() },
        },
      });
    const broadcast = (await post('Sale tomorrow')).json();
    const tx = await send(toAna, { alert: 'Your coupon', collapse_key: 'promo' });
    expect(tx.json().id).not.toBe(broadcast.id);
    expect(await record(broadcast.id)).toMatchObject({ state: 'scheduled', notification: { payload: { alert: 'Sale tomorrow' } } });

    const updated = (await post('Sale today')).json();
    expect(updated.id).toBe(broadcast.id); // the broadcasts' own collapse_key still holds
    expect(await record(tx.json().id)).toMatchObject({ state: 'sent', pushes_succeeded: 2 });
    expect(await text(tx.json().id)).toBe('Your coupon');
  });

  it('a send waiting to retry is superseded by a later one with the same key: its older payload is not sent after it', async () => {
    // the retry waits 1.5-3 s (RETRY_BASE_MS, jittered): time for the second send to come in first on a busy machine
    gw.fcm.faults.forToken(bob.token, { type: 'status', status: 503, reason: 'UNAVAILABLE' }, 1);
    const first = send({ field: 'user_id', value: 'bob' }, { alert: 'Driver is 10 min away', collapse_key: 'eta' });
    await waitFor('the first attempt', async () => gw.fcm.requestCount >= 1, 5_000, 5);
    const second = await send({ field: 'user_id', value: 'bob' }, { alert: 'Driver is here', collapse_key: 'eta' });
    expect(second.json().results).toEqual({ success: 1, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 });
    const older = await first;
    expect(older.json()).toEqual({
      id: second.json().id,
      results: oneFailure(bob.id, 'superseded by a later send with the same collapse_key'),
    });
    await new Promise((r) => setTimeout(r, 200));
    expect(accepted().map((p) => p.alert)).toEqual(['Driver is here']);
    expect(await record(second.json().id)).toMatchObject({ state: 'sent', pushes_succeeded: 1 });
  });

  it('concurrent sends with one key and recipient take turns: one notification, each send answered and delivered', async () => {
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) => send({ field: 'user_id', value: 'bob' }, { alert: `update ${i}`, collapse_key: 'live-score' })),
    );
    for (const a of answers) expect(a.statusCode, a.body).toBe(200);
    expect(new Set(answers.map((a) => a.json().id)).size).toBe(1);
    for (const a of answers)
      expect(a.json().results).toEqual({ success: 1, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 });
    expect(accepted()).toHaveLength(6);
    expect(await record(answers[0]!.json().id)).toMatchObject({ state: 'sent', devices_targeted: 6, pushes_succeeded: 6 });
  });
});
