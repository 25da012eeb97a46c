import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways } from '../helpers/gateways.js';
import { basic, createHarness, ManualClock, type Harness } from '../helpers/harness.js';

const clock = new ManualClock(new Date('2026-03-07T12:00:00Z'));

/**
 * No foreign key keeps a notification's audience (migration 044). A scheduled notification whose audience was
 * deleted meanwhile (by hand: pushd deletes audiences only with their app) must not read as "no filters" and go to
 * every device of the app: it fails, `audience_missing`, and sends nothing.
 */
describe('a notification whose audience was deleted before its fan-out', () => {
  let h: Harness;
  let gw: Gateways;
  let keys: { read: string; write: string; sdk: string };
  const received: string[] = [];

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, clock, env: { ...gw.env, SCHEDULE_POLL_MS: '20', RATE_LIMIT_SDK_PER_SECOND: '0' } });
    const created = await h.createApp('com.example.audience-missing');
    keys = created.keys;
    await setCredentials(h, created.app.id, gw);
    gw.apns.onAccept = gw.fcm.onAccept = (token) => received.push(token);
    for (const tags of [['vip'], [], []]) await registerDevice(h, keys.sdk, { platform: 'ios', tags });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  const post = (payload: Record<string, unknown>) =>
    h.server.inject({ method: 'POST', url: '/v6/notifications', headers: { authorization: basic(keys.write) }, payload });
  const read = async (id: string) =>
    (await h.server.inject({ method: 'GET', url: `/v6/notifications/${id}`, headers: { authorization: basic(keys.read) } })).json();

  it('fails with audience_missing and pushes to no device', { timeout: 30_000 }, async () => {
    const res = await post({
      notification: { to: [{ name: 'tags', criteria: ['vip'] }], payload: { alert: 'vip only' }, send_at: '2026-03-07T13:00:00Z' },
    });
    expect(res.statusCode, res.body).toBe(201);
    const { id, to } = res.json() as { id: string; to: { id: string } };
    await sql`delete from audiences where id = ${to.id}::uuid`.execute(h.db.db);

    clock.set('2026-03-07T13:00:01Z');
    await waitFor('the notification to finish', async () => ((await read(id)).state === 'scheduled' ? null : true), 10_000, 20);
    await new Promise((r) => setTimeout(r, 300));
    expect(await read(id)).toMatchObject({ state: 'failed', failure_reason: 'audience_missing', pushes_succeeded: 0 });
    expect(received).toEqual([]);

    // the same send with its audience kept reaches the one device it names
    const again = await post({ notification: { to: [{ name: 'tags', criteria: ['vip'] }], payload: { alert: 'vip only' } } });
    expect(again.statusCode, again.body).toBe(201);
    await waitFor('the vip push', async () => received.length >= 1, 10_000, 20);
    await new Promise((r) => setTimeout(r, 300));
    expect(received).toHaveLength(1);
  });
});
