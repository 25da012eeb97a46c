import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice } from '../helpers/gateways.js';
import { call, holdDevice } from './device-support.js';

/**
 * Session reports that arrive together are written in one transaction (`ActivityService.writeSessions`): each is
 * still answered as it would be alone (202, 404 unknown, 451 erased), a device's start and end in one burst are both
 * kept, a retry counts nothing more, and the daily figures count each session once.
 */
describe('session reports that arrive together', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('are written together, each answered and counted as if alone', async () => {
    const app = await h.createApp();
    const devices = [];
    for (let i = 0; i < 20; i++) devices.push(await registerDevice(h, app.keys.sdk, { platform: i % 2 ? 'android' : 'ios' }));
    const erased = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
    expect((await call(h, 'POST', `/v6/devices/${erased.id}/erase`, app.keys.write)).statusCode).toBe(200);
    const session = (deviceId: string, body: Record<string, unknown>) =>
      call(h, 'POST', `/v6/devices/${deviceId}/sessions`, app.keys.sdk, { session: body });

    const ids = devices.map(() => randomUUID());
    const startedAt = devices.map((_, i) => new Date(Date.now() - 60_000 + i * 1000).toISOString());
    const answers = await Promise.all([
      // the third device's id in upper case, as the path takes it too
      ...devices.map((d, i) => session(i === 2 ? d.id.toUpperCase() : d.id, { id: ids[i], started_at: startedAt[i] })),
      // the first device's end and the second's retry, in the same burst as their starts
      session(devices[0]!.id, { id: ids[0], duration: 42 }),
      session(devices[1]!.id, { id: ids[1], started_at: startedAt[1] }),
      session(randomUUID(), { id: randomUUID() }),
      session(erased.id, { id: randomUUID() }),
    ]);
    expect(answers.map((a) => a.statusCode)).toEqual([...devices.map(() => 202), 202, 202, 404, 451]);
    expect(answers[devices.length + 2]!.json()).toEqual({ error: 'device not found' });

    const stored = await h.db.db
      .selectFrom('app_sessions')
      .select(['device_id', 'id', 'started_at', 'duration_seconds', sql<string>`xmin::text`.as('xmin')])
      .where('app_id', '=', app.app.id)
      .execute();
    expect(stored).toHaveLength(devices.length);
    const byDevice = new Map(stored.map((s) => [s.device_id, s]));
    devices.forEach((d, i) => {
      expect(byDevice.get(d.id)).toMatchObject({ id: ids[i], started_at: new Date(startedAt[i]!) });
    });
    expect(byDevice.get(devices[0]!.id)!.duration_seconds).toBe(42);
    // written by a few transactions, not one a report
    expect(new Set(stored.map((s) => s.xmin)).size).toBeLessThan(devices.length / 2);

    for (const [i, d] of devices.entries()) {
      const device = (await call(h, 'GET', `/v6/devices/${d.id}`, app.keys.read)).json().device;
      expect(device.last_opened).toBe(startedAt[i]);
    }
    // the starts a minute back may fall on the day before, just after midnight
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    const [from, to] = [day(Date.now() - 86_400_000), day(Date.now())];
    for (const metric of ['sessions', 'active_users']) {
      const res = await call(h, 'GET', `/v6/stats/${metric}?from=${from}&to=${to}`, app.keys.read);
      const counts = (res.json() as { count: number }[]).map((r) => r.count);
      expect(
        counts.reduce((a, b) => a + b, 0),
        metric,
      ).toBe(devices.length);
    }
  });
  it('wait for no device held by other work: only its own report waits for it', async () => {
    const app = await h.createApp();
    const held = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
    const free = await registerDevice(h, app.keys.sdk, { platform: 'android' });
    const session = (deviceId: string) =>
      call(h, 'POST', `/v6/devices/${deviceId}/sessions`, app.keys.sdk, { session: { id: randomUUID() } });
    const holder = await holdDevice(h, held.id);
    let heldAnswered = false;
    const heldAnswer = session(held.id).finally(() => (heldAnswered = true));
    const [freeAnswer] = await Promise.all([session(free.id), new Promise((resolve) => setTimeout(resolve, 300))]);
    expect(freeAnswer.statusCode, freeAnswer.body).toBe(202);
    expect(heldAnswered).toBe(false);
    await holder.release();
    expect((await heldAnswer).statusCode).toBe(202);
    const stored = await h.db.db.selectFrom('app_sessions').select('device_id').where('app_id', '=', app.app.id).execute();
    expect(stored.map((s) => s.device_id).sort()).toEqual([held.id, free.id].sort());
  });
});
