import { describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { useHarness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';

describe('journeys: the workers poll for due entrants', () => {
  const h = useHarness({ workers: true, env: { JOURNEY_POLL_MS: '50' } });

  it('a worker process runs a due step without being asked', async () => {
    const app = await h.createApp();
    const journey = {
      name: 'Polled',
      trigger: { api: true },
      steps: [{ id: 'hi', type: 'send', notification: { payload: { alert: 'hi' } } }],
    };
    const j = (await call(h, 'POST', '/v6/journeys', app.keys.write, { journey })).json().journey;
    const device = (await call(h, 'POST', '/v6/devices', app.keys.write, { device: { platform: 'ios' } })).json().device;
    expect((await call(h, 'POST', `/v6/journeys/${j.id}/entries`, app.keys.write, { device_id: device.id })).statusCode).toBe(202);
    const sent = async () =>
      h.db.db
        .selectFrom('notifications')
        .select('id')
        .where(sql<boolean>`request->'journey'->>'id' = ${j.id}`)
        .execute();
    const deadline = Date.now() + 10_000;
    while ((await sent()).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await sent()).toHaveLength(1);
    const counts = (await call(h, 'GET', `/v6/journeys/${j.id}`, app.keys.read)).json().journey.counts;
    expect(counts.steps[0]).toMatchObject({ id: 'hi', entered: 1, waiting: 0, sent: 1 });
  });
});
