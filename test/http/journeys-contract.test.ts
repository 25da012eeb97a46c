import { beforeAll, describe, expect, it } from 'vitest';
import { useHarness, type Harness } from '../helpers/harness.js';
import { call } from './device-support.js';
import { cartJourney, applyEvents } from './journey-support.js';

type App = Awaited<ReturnType<Harness['createApp']>>;

/**
 * The journeys API's contract beyond journeys.test.ts, point by point from issue 58: every bad definition a 400
 * naming its field, each key's permission on every route, and what an entry through the API answers and counts.
 */
describe('journeys: the definition rules and entries', () => {
  const h = useHarness();
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });
  const create = (journey: unknown, key = app.keys.write) => call(h, 'POST', '/v6/journeys', key, { journey });
  const steps = (s: unknown[]) => ({ ...cartJourney(), steps: s });
  const send = (id: string, extra: Record<string, unknown> = {}) => ({
    id,
    type: 'send',
    notification: { payload: { alert: id } },
    ...extra,
  });

  it('answers 400 naming the field of each bad definition', async () => {
    const cases: [unknown, string][] = [
      // every way onward names a step or "end"
      [
        steps([{ id: 'w', type: 'wait_for', event: 'open', timeout: '1h', on_event: 'ghost' }]),
        'journey.steps[0].on_event: names no step ("ghost"; a step id or "end")',
      ],
      [
        steps([{ id: 'w', type: 'wait_for', event: 'open', timeout: '1h', on_timeout: 'ghost' }]),
        'journey.steps[0].on_timeout: names no step ("ghost"',
      ],
      [steps([{ id: 'b', type: 'branch', filters: [], else: 'ghost' }]), 'journey.steps[0].else: names no step ("ghost"'],
      // a cycle that moves on at once: a step onto itself, and a longer one through a branch's else
      [steps([send('a', { next: 'a' })]), 'journey.steps[0].next: closes a cycle without a delay or a wait_for in it'],
      [
        steps([send('a'), send('b'), { id: 'c', type: 'branch', filters: [], then: 'end', else: 'a' }]),
        'journey.steps[2].else: closes a cycle without a delay or a wait_for in it',
      ],
      // durations: 1 s to 90 days, in any unit
      [steps([{ id: 'd', type: 'delay', duration: '2161h' }]), 'journey.steps[0].duration: must be at most 90 days'],
      [steps([{ id: 'd', type: 'delay', duration: '1w' }]), 'journey.steps[0].duration: must be a duration such as'],
      [steps([{ id: 'd', type: 'delay', duration: 60 }]), 'journey.steps[0].duration: must be a duration such as'],
      [steps([{ id: 'w', type: 'wait_for', event: 'open', timeout: '0m' }]), 'journey.steps[0].timeout: must be at least 1 second'],
      [steps([{ id: 'w', type: 'wait_for', event: 'open' }]), 'journey.steps[0].timeout:'],
      [{ ...cartJourney(), re_entry: { after: '0s' } }, 'journey.re_entry'],
      [{ ...cartJourney(), re_entry: { after: '91d' } }, 'journey.re_entry'],
      // a delay is one of duration and until_local_time, a time of day
      [
        steps([{ id: 'd', type: 'delay', duration: '1h', until_local_time: '09:00' }]),
        'journey.steps[0].duration: takes one of duration, until_local_time and until',
      ],
      [steps([{ id: 'd', type: 'delay' }]), 'journey.steps[0].duration: takes one of duration, until_local_time and until'],
      [steps([{ id: 'd', type: 'delay', until_local_time: '24:00' }]), 'journey.steps[0].until_local_time: must be a time "HH:MM"'],
      [steps([{ id: 'd', type: 'delay', until: 'soon' }]), 'journey.steps[0].until: must be "best_time"'],
      [steps([{ id: 'd', type: 'delay', duration: '1h', within: '2h' }]), 'journey.steps[0].within: goes with until: "best_time"'],
      [steps([{ id: 'd', type: 'delay', until: 'best_time', within: '91d' }]), 'journey.steps[0].within: must be at most 90 days'],
      // webhook and digest steps
      [steps([{ id: 'h', type: 'webhook' }]), 'journey.steps[0].url: must be an https URL'],
      [steps([{ id: 'h', type: 'webhook', url: 'https://hooks.example.com/', max_attempts: 0 }]), 'journey.steps[0].max_attempts:'],
      [
        steps([{ id: 'h', type: 'webhook', url: 'https://hooks.example.com/', on_success: 'nowhere' }]),
        'journey.steps[0].on_success: names no step',
      ],
      [steps([{ id: 'g', type: 'digest', event: 'like' }]), 'journey.steps[0].window:'],
      [steps([{ id: 'g', type: 'digest', event: 'bad.name.', window: '1h' }]), 'journey.steps[0].event: must be an event name'],
      // types and their fields
      [steps([{ id: 'x' }]), 'journey.steps[0].type: must be one of delay, wait_for, branch, send, message'],
      [steps(['delay']), 'journey.steps[0]: must be one of delay, wait_for, branch, send, message'],
      [steps([{ id: 'd', type: 'delay', duration: '1h', color: 'red' }]), 'journey.steps[0]'],
      [steps([{ id: 'bad id!', type: 'delay', duration: '1h' }]), 'journey.steps[0].id: must be 1 to 64 letters, digits, _ or -'],
      // "end" is the way out: a step of that id could not be reached
      [
        steps([send('a'), { id: 'end', type: 'delay', duration: '1h' }]),
        'journey.steps[1].id: must not be "end", which names the way out of the journey',
      ],
      [
        steps(Array.from({ length: 101 }, (_, i) => ({ id: `d${i}`, type: 'delay', duration: '1h' }))),
        'journey.steps: must hold at most 100 steps',
      ],
      [steps([{ id: 'w', type: 'wait_for', event: 'two words', timeout: '1h' }]), 'journey.steps[0].event: must be an event name'],
      [{ ...cartJourney(), exit_on: ['ok', 'not ok'] }, 'journey.exit_on[1]: must be an event name'],
      [{ ...cartJourney(), trigger: { event: 'x', api: true } }, 'journey.trigger: must be {"event": NAME} or {"api": true}'],
      [{ ...cartJourney(), trigger: { api: false } }, 'journey.trigger: must be {"event": NAME} or {"api": true}'],
      [{ ...cartJourney(), state: 'archived' }, 'journey.state: must be "active" or "paused"'],
      [{ ...cartJourney(), name: '  ' }, 'journey.name: must not be empty'],
      [{ ...cartJourney(), entry_filters: [{ name: 'country', criteria: [7] }] }, 'journey.entry_filters[0].criteria[0]'],
      // a send's notification: the usual checks, and what the journey sets left out
      [steps([send('s', { notification: { payload: {} } })]), 'journey.steps[0].notification.payload'],
      [
        steps([send('s', { notification: { payload: { alert: 'x' }, send_at: '2030-01-01T00:00:00Z' } })]),
        'journey.steps[0].notification.send_at: is set by the journey; leave it out',
      ],
      [
        steps([send('s', { notification: { payload: { alert: 'x' }, local_time: true } })]),
        'journey.steps[0].notification.local_time: is set by the journey; leave it out',
      ],
      [
        steps([send('s', { notification: { payload: { alert: 'x' }, ttl: 60, expires_at: '2030-01-01T00:00:00Z' } })]),
        'journey.steps[0].notification.ttl: cannot be given with expires_at',
      ],
      [
        steps([send('s', { notification: { payload: { alert: 'x' }, expires_at: 'tomorrow' } })]),
        'journey.steps[0].notification.expires_at',
      ],
      [steps([send('s', { notification: { payload: { alert: 'x' }, priority: 'urgent' } })]), 'journey.steps[0].notification.priority'],
      [
        steps([send('s', { notification: { variants: [{ payload: { alert: 'a' } }], test_fraction: 2 } })]),
        'journey.steps[0].notification.',
      ],
      [
        steps([send('s', { notification: 'hello' })]),
        'journey.steps[0].notification: must be an object as POST /v6/notifications takes it',
      ],
      // a message step's message: the usual checks, without `to`
      [
        steps([{ id: 'm', type: 'message', message: { title: 'Hi', to: '*' } }]),
        'journey.steps[0].message.to: is set by the journey; leave it out',
      ],
      [
        steps([
          {
            id: 'm',
            type: 'message',
            message: { title: 'Hi', notification: { payload: { alert: 'x' }, ttl: 60, expires_at: '2030-01-01T00:00:00Z' } },
          },
        ]),
        'journey.steps[0].message.notification.ttl: cannot be given with expires_at',
      ],
      [steps([{ id: 'm', type: 'message', message: 'Hi' }]), 'journey.steps[0].message: must be an object as POST /v6/messages takes it'],
      // the shape around it
      [undefined, 'journey: must be an object with name, trigger and steps'],
    ];
    for (const [journey, error] of cases) {
      const res = await create(journey);
      expect(res.statusCode, `${JSON.stringify(journey)} → ${res.body}`).toBe(400);
      expect(res.json().error.startsWith(error), `${res.json().error} / ${error}`).toBe(true);
    }
    // the bounds themselves are allowed: 1 second, 90 days however written, a loop through a wait_for
    const fine = steps([
      { id: 'a', type: 'delay', duration: '1s' },
      { id: 'b', type: 'delay', duration: '2160h' },
      { id: 'c', type: 'wait_for', event: 'Public Api.open', timeout: '90d', on_event: 'd', on_timeout: 'c' },
      send('d', { next: 'c' }),
    ]);
    expect((await create(fine)).statusCode).toBe(201);
    const noBody = await call(h, 'POST', '/v6/journeys', app.keys.write, { name: 'x' });
    expect(noBody.statusCode).toBe(400);
  });

  it('PUT checks its definition as create does, and leaves the journey as it was', async () => {
    const j = (await create(cartJourney())).json().journey;
    const bad = await call(h, 'PUT', `/v6/journeys/${j.id}`, app.keys.write, {
      journey: steps([{ id: 'a', type: 'delay', duration: '100d' }]),
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toBe('journey.steps[0].duration: must be at most 90 days');
    const got = (await call(h, 'GET', `/v6/journeys/${j.id}`, app.keys.read)).json().journey;
    expect(got).toMatchObject({ version: 1, steps: j.steps });
    const unknown = await call(h, 'PUT', `/v6/journeys/00000000-0000-4000-8000-000000000000`, app.keys.write, { journey: cartJourney() });
    expect(unknown.statusCode).toBe(404);
  });

  it('the write key changes, the read key reads, the sdk key does neither, on every route', async () => {
    const j = (await create({ ...cartJourney(), trigger: { api: true } })).json().journey;
    const device = (await call(h, 'POST', '/v6/devices', app.keys.write, { device: { platform: 'ios' } })).json().device;
    const writes: [string, string, unknown][] = [
      ['POST', '/v6/journeys', { journey: cartJourney() }],
      ['PUT', `/v6/journeys/${j.id}`, { journey: { ...cartJourney(), trigger: { api: true } } }],
      ['POST', `/v6/journeys/${j.id}/pause`, undefined],
      ['POST', `/v6/journeys/${j.id}/resume`, undefined],
      ['POST', `/v6/journeys/${j.id}/entries`, { device_id: device.id }],
      ['POST', `/v6/journeys/${j.id}/archive`, undefined],
    ];
    for (const [method, url, body] of writes)
      for (const key of [app.keys.read, app.keys.sdk])
        expect((await call(h, method as 'POST', url, key, body)).statusCode, `${method} ${url}`).toBe(403);
    for (const url of ['/v6/journeys', `/v6/journeys/${j.id}`]) {
      expect((await call(h, 'GET', url, app.keys.sdk)).statusCode, url).toBe(403);
      expect((await call(h, 'GET', url, app.keys.read)).statusCode, url).toBe(200);
      expect((await call(h, 'GET', url, app.keys.write)).statusCode, url).toBe(200);
    }
    // nothing the refused calls asked for happened
    const after = (await call(h, 'GET', `/v6/journeys/${j.id}`, app.keys.read)).json().journey;
    expect(after).toMatchObject({ state: 'active', version: 1 });
    expect(after.counts.trigger.entered).toBe(0);
    for (const [method, url, body] of writes.slice(1))
      expect((await call(h, method as 'POST', url, app.keys.write, body)).statusCode, `${method} ${url}`).toBeLessThan(300);
  });

  it('an entry through the API answers and counts filtered, paused (skipped) and archived (409)', async () => {
    const j = (
      await create({
        ...cartJourney(),
        trigger: { api: true },
        re_entry: 'after_exit',
        entry_filters: [{ name: 'country', criteria: ['US'] }],
      })
    ).json().journey;
    const register = async (device: Record<string, unknown>) =>
      (await call(h, 'POST', '/v6/devices', app.keys.write, { device: { platform: 'ios', ...device } })).json().device.id as string;
    const french = await register({ country: 'FR' });
    const american = await register({ country: 'US' });
    const enter = async (who: Record<string, string>) => {
      const res = await call(h, 'POST', `/v6/journeys/${j.id}/entries`, app.keys.write, who);
      return { status: res.statusCode, body: res.json() };
    };
    expect(await enter({ device_id: french })).toEqual({ status: 202, body: { entered: false, outcome: 'filtered' } });
    expect((await call(h, 'POST', `/v6/journeys/${j.id}/pause`, app.keys.write)).statusCode).toBe(200);
    expect(await enter({ device_id: american })).toEqual({ status: 202, body: { entered: false, outcome: 'paused' } });
    let counts = (await call(h, 'GET', `/v6/journeys/${j.id}`, app.keys.read)).json().journey.counts;
    expect(counts.trigger).toEqual({ entered: 0, skipped: 1, filtered: 1, converted: 0 });
    expect(counts.steps[0]).toMatchObject({ entered: 0, waiting: 0 });
    await call(h, 'POST', `/v6/journeys/${j.id}/resume`, app.keys.write);
    expect(await enter({ device_id: american })).toEqual({ status: 202, body: { entered: true, outcome: 'entered' } });
    expect((await call(h, 'POST', `/v6/journeys/${j.id}/entries`, app.keys.write, { device_id: 'not-a-device' })).statusCode).toBe(404);
    await call(h, 'POST', `/v6/journeys/${j.id}/archive`, app.keys.write);
    const archived = await enter({ device_id: american });
    expect(archived.status).toBe(409);
    expect(archived.body.error).toBe('journey: it is archived');
    counts = (await call(h, 'GET', `/v6/journeys/${j.id}`, app.keys.read)).json().journey.counts;
    expect(counts.trigger).toEqual({ entered: 1, skipped: 1, filtered: 1, converted: 0 });
    expect(counts.steps[0]).toMatchObject({ entered: 1, waiting: 0, exited: 1 });
    const both = await call(h, 'POST', `/v6/journeys/${j.id}/entries`, app.keys.write, { device_id: american, user_id: 'u' });
    expect(both.statusCode).toBe(400);
  });

  it("a user enters once for all the user's devices, whichever device or the user names it", async () => {
    const j = (await create({ ...cartJourney(), trigger: { api: true } })).json().journey;
    const ev = (await create({ ...cartJourney(), trigger: { event: 'cart_abandoned' } })).json().journey;
    const register = async () =>
      (await call(h, 'POST', '/v6/devices', app.keys.write, { device: { platform: 'ios', user_id: 'shared-user' } })).json().device
        .id as string;
    const [phone, tablet] = [await register(), await register()];
    const enter = async (who: Record<string, string>) =>
      (await call(h, 'POST', `/v6/journeys/${j.id}/entries`, app.keys.write, who)).json();
    expect(await enter({ device_id: phone })).toEqual({ entered: true, outcome: 'entered' });
    expect(await enter({ device_id: tablet })).toEqual({ entered: false, outcome: 'not_re_entered' });
    expect(await enter({ user_id: 'shared-user' })).toEqual({ entered: false, outcome: 'not_re_entered' });
    // an event trigger the same: the tablet's event after the phone's, and the user's own, enter no one again
    for (const url of [`/v6/devices/${phone}/events`, `/v6/devices/${tablet}/events`])
      expect((await call(h, 'POST', url, app.keys.sdk, { events: [{ name: 'cart_abandoned' }] })).statusCode).toBe(202);
    const user = await call(h, 'POST', '/v6/users/shared-user/events', app.keys.write, { events: [{ name: 'cart_abandoned' }] });
    await applyEvents(h);
    expect(user.statusCode).toBe(202);
    const counts = (await call(h, 'GET', `/v6/journeys/${ev.id}`, app.keys.read)).json().journey.counts;
    expect(counts.trigger).toMatchObject({ entered: 1, skipped: 2 });
  });

  it('a trigger named source.name is entered by that source only', async () => {
    const j = (await create({ ...cartJourney(), trigger: { event: 'Public Api.checkout' } })).json().journey;
    const device = (await call(h, 'POST', '/v6/devices', app.keys.write, { device: { platform: 'ios' } })).json().device.id as string;
    await call(h, 'POST', `/v6/devices/${device}/events`, app.keys.sdk, { events: [{ name: 'checkout' }] });
    await applyEvents(h);
    expect((await call(h, 'GET', `/v6/journeys/${j.id}`, app.keys.read)).json().journey.counts.trigger.entered).toBe(0);
    await call(h, 'POST', `/v6/devices/${device}/events`, app.keys.write, { events: [{ name: 'checkout' }] });
    await applyEvents(h);
    expect((await call(h, 'GET', `/v6/journeys/${j.id}`, app.keys.read)).json().journey.counts.trigger.entered).toBe(1);
  });
});
