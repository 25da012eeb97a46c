import { beforeAll, describe, expect, it } from 'vitest';
import { useHarness, type Harness } from '../helpers/harness.js';
import { call } from './device-support.js';
import { cartJourney } from './journey-support.js';

type App = Awaited<ReturnType<Harness['createApp']>>;

describe('journeys: the definition API', () => {
  const h = useHarness();
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });
  const create = (journey: unknown, key = app.keys.write) => call(h, 'POST', '/v6/journeys', key, { journey });

  it('creates with the write key, reads with the read key, refuses the sdk key', async () => {
    const res = await create(cartJourney());
    expect(res.statusCode).toBe(201);
    const j = res.json().journey;
    expect(j).toMatchObject({ name: 'Cart reminder', state: 'active', version: 1, re_entry: 'never', exit_on: ['purchase'] });
    expect(j.counts.steps.map((s: { id: string; entered: number }) => [s.id, s.entered])).toEqual([
      ['wait', 0],
      ['remind', 0],
    ]);
    expect((await create(cartJourney(), app.keys.sdk)).statusCode).toBe(403);
    expect((await create(cartJourney(), app.keys.read)).statusCode).toBe(403);
    const got = await call(h, 'GET', `/v6/journeys/${j.id}`, app.keys.read);
    expect(got.statusCode).toBe(200);
    expect(got.json().journey.steps).toEqual(j.steps);
    expect((await call(h, 'GET', `/v6/journeys/${j.id}`, app.keys.sdk)).statusCode).toBe(403);
    const list = await call(h, 'GET', '/v6/journeys', app.keys.read);
    expect(list.json().journeys.map((x: { id: string }) => x.id)).toContain(j.id);
    expect((await call(h, 'GET', '/v6/journeys/not-a-uuid', app.keys.read)).statusCode).toBe(404);
    const other = await h.createApp();
    expect((await call(h, 'GET', `/v6/journeys/${j.id}`, other.keys.read)).statusCode).toBe(404);
  });

  it('answers 400 naming the field of a bad definition', async () => {
    const steps = (s: unknown[]) => ({ ...cartJourney(), steps: s });
    const cases: [unknown, string][] = [
      [steps([{ id: 'a', type: 'teleport' }]), 'journey.steps[0].type: must be one of delay, wait_for, branch, send, message'],
      [
        steps([{ id: 'a', type: 'delay', duration: '1h', next: 'nowhere' }]),
        'journey.steps[0].next: names no step ("nowhere"; a step id or "end")',
      ],
      [
        steps([{ id: 'a', type: 'delay', duration: '500ms' }]),
        'journey.steps[0].duration: must be a duration such as "90s", "10m", "2h" or "3d"',
      ],
      [steps([{ id: 'a', type: 'delay', duration: '0s' }]), 'journey.steps[0].duration: must be at least 1 second'],
      [steps([{ id: 'a', type: 'delay', duration: '91d' }]), 'journey.steps[0].duration: must be at most 90 days'],
      [steps([{ id: 'a', type: 'wait_for', event: 'open', timeout: '100d' }]), 'journey.steps[0].timeout: must be at most 90 days'],
      [
        steps([
          { id: 'a', type: 'send', notification: { payload: { alert: 'x' } } },
          { id: 'b', type: 'branch', filters: [{ name: 'country', criteria: ['US'] }], then: 'a', else: 'end' },
        ]),
        'journey.steps[1].then: closes a cycle without a delay or a wait_for in it',
      ],
      [steps([{ id: 'a', type: 'send', notification: { payload: { alert: 'x' }, ttl: -1 } }]), 'journey.steps[0].notification.ttl'],
      [steps([{ id: 'a', type: 'send', notification: { payload: { alert: 'x' }, to: '*' } }]), 'journey.steps[0].notification.to'],
      [steps([{ id: 'a', type: 'send', notification: { payload: 'hello' } }]), 'journey.steps[0].notification.payload'],
      [steps([{ id: 'a', type: 'message', message: { text: 'no title' } }]), 'journey.steps[0].message.title'],
      [steps([{ id: 'a', type: 'branch', filters: [{ name: 'nope', criteria: [1] }] }]), 'journey.steps[0].filters[0]'],
      [steps([]), 'journey.steps: must hold at least one step'],
      [{ ...cartJourney(), trigger: { event: 'bad name!' } }, 'journey.trigger'],
      [{ ...cartJourney(), re_entry: 'sometimes' }, 'journey.re_entry: must be "never", "after_exit" or {"after": DURATION}'],
      [
        steps([
          { id: 'a', type: 'delay', duration: '1h' },
          { id: 'a', type: 'delay', duration: '1h' },
        ]),
        'journey.steps[1].id: repeats the id of steps[0]',
      ],
    ];
    for (const [journey, error] of cases) {
      const res = await create(journey);
      expect(res.statusCode, JSON.stringify(journey)).toBe(400);
      expect(res.json().error.startsWith(error), `${res.json().error} / ${error}`).toBe(true);
    }
    // a cycle through a delay is a loop over time, and allowed
    const loop = steps([
      { id: 'a', type: 'send', notification: { payload: { alert: 'x' } } },
      { id: 'b', type: 'delay', duration: '1d', next: 'a' },
    ]);
    expect((await create(loop)).statusCode).toBe(201);
  });

  it('PUT makes a new version; pause, resume and archive move its state', async () => {
    const j = (await create(cartJourney())).json().journey;
    const changed = { ...cartJourney(), name: 'Cart reminder v2', steps: [{ id: 'wait', type: 'delay', duration: '2h' }] };
    const put = await call(h, 'PUT', `/v6/journeys/${j.id}`, app.keys.write, { journey: changed });
    expect(put.statusCode).toBe(200);
    expect(put.json().journey).toMatchObject({ version: 2, name: 'Cart reminder v2', steps: [{ id: 'wait', duration: '2h' }] });
    const paused = await call(h, 'POST', `/v6/journeys/${j.id}/pause`, app.keys.write);
    expect(paused.json().journey.state).toBe('paused');
    expect((await call(h, 'POST', `/v6/journeys/${j.id}/resume`, app.keys.write)).json().journey.state).toBe('active');
    expect((await call(h, 'POST', `/v6/journeys/${j.id}/archive`, app.keys.write)).json().journey.state).toBe('archived');
    const again = await call(h, 'PUT', `/v6/journeys/${j.id}`, app.keys.write, { journey: changed });
    expect(again.statusCode).toBe(409);
    expect(again.json().error).toBe('journey: it is archived and cannot be changed');
    expect((await call(h, 'POST', `/v6/journeys/${j.id}/resume`, app.keys.write)).statusCode).toBe(409);
    expect((await call(h, 'POST', `/v6/journeys/${j.id}/pause`, app.keys.read)).statusCode).toBe(403);
  });

  it('entries through the API only for an api-triggered journey, naming a device or a user', async () => {
    const evented = (await create(cartJourney())).json().journey;
    const api = (await create({ ...cartJourney(), trigger: { api: true } })).json().journey;
    const device = (await call(h, 'POST', '/v6/devices', app.keys.write, { device: { platform: 'ios' } })).json().device;
    const wrong = await call(h, 'POST', `/v6/journeys/${evented.id}/entries`, app.keys.write, { device_id: device.id });
    expect(wrong.statusCode).toBe(409);
    expect((await call(h, 'POST', `/v6/journeys/${api.id}/entries`, app.keys.write, { nobody: 1 })).statusCode).toBe(400);
    expect((await call(h, 'POST', `/v6/journeys/${api.id}/entries`, app.keys.write, { user_id: 'ghost' })).statusCode).toBe(404);
    const ok = await call(h, 'POST', `/v6/journeys/${api.id}/entries`, app.keys.write, { device_id: device.id });
    expect(ok.statusCode).toBe(202);
    expect(ok.json()).toEqual({ entered: true, outcome: 'entered' });
    // re_entry "never" (the default): once is all
    const twice = await call(h, 'POST', `/v6/journeys/${api.id}/entries`, app.keys.write, { device_id: device.id });
    expect(twice.json()).toEqual({ entered: false, outcome: 'not_re_entered' });
    const counts = (await call(h, 'GET', `/v6/journeys/${api.id}`, app.keys.read)).json().journey.counts;
    expect(counts.trigger).toEqual({ entered: 1, skipped: 1, filtered: 0, converted: 0 });
    expect(counts.steps[0]).toMatchObject({ id: 'wait', entered: 1, waiting: 1 });
  });
});
