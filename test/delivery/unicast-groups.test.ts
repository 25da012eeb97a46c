import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';

/**
 * Many small notifications posted at once are created in groups (one transaction, one enqueue for many): each
 * must still be its own notification, with its own audience and devices, delivered exactly once.
 */
describe('unicast notifications posted concurrently', () => {
  let h: Harness;
  let gw: Gateways;
  let write: string;
  let read: string;
  let pacedWrite: string;
  const byId: RegisteredDevice[] = [];
  const byUser: { user: string; devices: RegisteredDevice[] }[] = [];
  let paced: RegisteredDevice;

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, env: gw.env });
    const app = await h.createApp('com.example.unicast');
    const other = await h.createApp('com.example.unicast.paced');
    ({ write, read } = app.keys);
    pacedWrite = other.keys.write;
    await setCredentials(h, app.app.id, gw);
    await setCredentials(h, other.app.id, gw);
    // an app with a ceiling: its unicast notifications are paced, through the fan-out
    await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setLimits(other.app.id, { maxPerMinute: 6000 });
    for (let i = 0; i < 24; i++) byId.push(await registerDevice(h, app.keys.sdk, { platform: i % 2 ? 'ios' : 'android' }));
    for (let u = 0; u < 8; u++) {
      const user = `user-${u}`;
      const devices = [
        await registerDevice(h, app.keys.sdk, { platform: 'ios', user_id: user }),
        await registerDevice(h, app.keys.sdk, { platform: 'android', user_id: user }),
      ];
      byUser.push({ user, devices });
    }
    paced = await registerDevice(h, other.keys.sdk, { platform: 'ios' });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  const post = (key: string, to: unknown, alert: string) =>
    h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(key) },
      payload: { notification: { to, payload: { alert } } },
    });

  it('creates each one with its own audience and delivers every device exactly once', async () => {
    const requests = [
      ...byId.map((d, i) => ({ key: write, to: [{ name: 'device_id', criteria: [d.id] }], alert: `device ${i}`, tokens: [d.token] })),
      ...byUser.map((u) => ({
        key: write,
        to: [{ name: 'user_id', criteria: [u.user] }],
        alert: u.user,
        tokens: u.devices.map((d) => d.token),
      })),
      // the same device twice: two notifications, one audience, two pushes
      { key: write, to: [{ name: 'device_id', criteria: [byId[0]!.id] }], alert: 'device 0 again', tokens: [byId[0]!.token] },
      // nobody: created, and sent to no device
      { key: write, to: [{ name: 'user_id', criteria: ['nobody'] }], alert: 'nobody', tokens: [] },
      { key: pacedWrite, to: [{ name: 'device_id', criteria: [paced.id] }], alert: 'paced', tokens: [paced.token] },
    ];
    const answers = await Promise.all(requests.map((r) => post(r.key, r.to, r.alert)));
    for (const a of answers) expect(a.statusCode, a.body).toBe(201);
    const created = answers.map((a) => a.json() as { id: string; to: { id: string } });
    expect(new Set(created.map((c) => c.id)).size).toBe(requests.length);
    expect(created[byId.length + byUser.length]!.to.id).toBe(created[0]!.to.id);
    expect(new Set(created.slice(0, byId.length + byUser.length).map((c) => c.to.id)).size).toBe(byId.length + byUser.length);

    const expected = requests.flatMap((r) => r.tokens);
    await waitFor('every push', async () => gw.apns.pushes.length + gw.fcm.pushes.length >= expected.length);
    await new Promise((r) => setTimeout(r, 500)); // a push sent twice would arrive now
    const got = [
      ...gw.apns.pushes.map((p) => ({ token: p.token, body: JSON.stringify(p.payload) })),
      ...gw.fcm.pushes.map((p) => ({ token: p.token, body: JSON.stringify(p.message) })),
    ];
    expect(got.map((p) => p.token).sort()).toEqual([...expected].sort());
    // each push carries its own notification's alert
    for (const r of requests)
      for (const token of r.tokens)
        expect(
          got.filter((p) => p.token === token).some((p) => p.body.includes(`"${r.alert}"`)),
          `${r.alert} to ${token}`,
        ).toBe(true);

    for (const [i, r] of requests.entries()) {
      const key = r.key === pacedWrite ? pacedWrite : read;
      const n = await waitFor(`notification ${i} to finish`, async () => {
        const res = await h.server.inject({
          method: 'GET',
          url: `/v6/notifications/${created[i]!.id}`,
          headers: { authorization: basic(key) },
        });
        const body = res.json();
        return body.state === 'sent' ? body : null;
      });
      expect(n.devices_targeted, r.alert).toBe(r.tokens.length);
      expect(n.pushes_succeeded, r.alert).toBe(r.tokens.length);
    }
  });

  it('sends again, after its Retry-After, only what a gateway asked to retry: the rest of the group once', async () => {
    gw.reset();
    const android = byId.filter((_, i) => i % 2 === 0);
    gw.fcm.faults.forToken(android[0]!.token, { type: 'status', status: 429, reason: 'QUOTA_EXCEEDED', retryAfter: '1' }, 1);
    gw.apns.faults.next(1, { type: 'status', status: 503, reason: 'ServiceUnavailable' });
    const answers = await Promise.all(byId.map((d, i) => post(write, [{ name: 'device_id', criteria: [d.id] }], `retry ${i}`)));
    for (const a of answers) expect(a.statusCode, a.body).toBe(201);
    // created in groups: batches stored together went out in one job, named after the group's first
    const ids = answers.map((a) => (a.json() as { id: string }).id);
    const grouped = await h.db.db
      .selectFrom('delivery_batches')
      .select('job_id')
      .where('notification_id', 'in', ids)
      .where('job_id', 'is not', null)
      .execute();
    expect(grouped.length).toBeGreaterThan(0);

    await waitFor('every push', async () => gw.apns.pushes.length + gw.fcm.pushes.length >= byId.length);
    await new Promise((r) => setTimeout(r, 500)); // a push sent twice would arrive now
    const got = [...gw.apns.pushes, ...gw.fcm.pushes].map((p) => p.token).sort();
    expect(got).toEqual(byId.map((d) => d.token).sort());
    const asked = gw.fcm.answers.filter((a) => a.token === android[0]!.token);
    expect(asked.map((a) => a.status)).toEqual([429, 200]);
    expect(asked[1]!.at - asked[0]!.at).toBeGreaterThanOrEqual(950);
    expect(gw.apns.answers.filter((a) => a.status === 503)).toHaveLength(1);
  });
});
