import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, useHarness, type Harness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';
import { journeyApi } from '../http/journey-support.js';

type App = Awaited<ReturnType<Harness['createApp']>>;
const HOUR = 3_600_000;
const T0 = '2026-06-01T10:00:00Z';

/**
 * An entrant's history through every step type (update, branch, split, send, wait_for's event and timeout, delay,
 * message), read by GET /v6/journeys/:id/entrants/:key with the read key; and the update and split steps' effects.
 */
describe('journeys: entrant history, update and split', () => {
  const clock = new ManualClock(new Date(T0));
  const h = useHarness({ clock });
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });
  const runDue = () => h.ctx.services.journeyEngine.runDue();
  const api = journeyApi(h, () => app);
  const { device, event, stepCounts } = api;
  const enter = async (journeyId: string, deviceId: string) =>
    expect((await call(h, 'POST', `/v6/journeys/${journeyId}/entries`, app.keys.write, { device_id: deviceId })).statusCode).toBe(202);
  const history = async (journeyId: string, key: string) => {
    const res = await call(h, 'GET', `/v6/journeys/${journeyId}/entrants/${encodeURIComponent(key)}`, app.keys.read);
    expect(res.statusCode, res.body).toBe(200);
    return res.json().entrants as { outcome: string | null; history: Record<string, unknown>[] }[];
  };

  it('lists each step an entrant took with its time and why, and what became of what it was sent', async () => {
    clock.set(T0);
    const j = await api.create({
      name: 'Everything',
      trigger: { api: true },
      steps: [
        { id: 'upd', type: 'update', custom: { tier: { type: 'string', value: 'gold' } }, add_tags: ['vip'] },
        { id: 'where', type: 'branch', filters: [{ name: 'custom.string.tier', criteria: ['gold'] }], then: 'ab', else: 'end' },
        {
          id: 'ab',
          type: 'split',
          paths: [
            { name: 'a', percent: 50, next: 'hi' },
            { name: 'b', percent: 50, next: 'hi' },
          ],
        },
        { id: 'hi', type: 'send', notification: { payload: { alert: 'hi' } } },
        { id: 'opened', type: 'wait_for', event: 'app_open', timeout: '1h', on_event: 'later', on_timeout: 'end' },
        { id: 'later', type: 'delay', duration: '1d' },
        { id: 'tips', type: 'message', message: { title: 'Tips', text: 'One, two' } },
      ],
    });
    const [opener, idle] = [await device({ token: 'a'.repeat(64), tags: ['old'] }), await device({ token: 'b'.repeat(64) })];
    await enter(j.id, opener);
    await enter(j.id, idle);
    await runDue();
    // the update wrote the attribute and the tag, which the branch read
    const stored = (await call(h, 'GET', `/v6/devices/${opener}`, app.keys.read)).json().device;
    expect(stored.tags).toEqual(['old', 'vip']);
    expect(JSON.stringify(stored.custom)).toContain('gold');
    clock.advance(60_000);
    await event(opener, 'app_open');
    clock.advance(HOUR);
    await runDue();
    clock.advance(24 * HOUR);
    await runDue();

    const [mine] = await history(j.id, `device:${opener}`);
    const what = mine!.history.map((e) => `${e.step}:${e.what}`);
    expect(what).toEqual([
      'upd:entered',
      'upd:updated',
      'where:branch',
      'ab:split',
      'hi:sent',
      'opened:waiting',
      'opened:event',
      'later:waiting',
      'tips:sent',
    ]);
    const at = (step: string, kind: string) => mine!.history.find((e) => e.step === step && e.what === kind)!;
    expect(at('where', 'branch')).toMatchObject({ matched: true, to: 'ab', read: { 'custom.string.tier': 'gold' } });
    expect(['a', 'b']).toContain(at('ab', 'split').path);
    expect(at('opened', 'waiting')).toMatchObject({ event: 'app_open', until: '2026-06-01T11:00:00.000Z' });
    expect(at('opened', 'event')).toMatchObject({ event: 'app_open', to: 'later', at: '2026-06-01T10:01:00.000Z' });
    expect(at('later', 'waiting').until).toBe('2026-06-02T10:01:00.000Z');
    expect(at('tips', 'sent').message_id).toEqual(expect.any(String));
    const sent = at('hi', 'sent');
    expect(sent.notification_id).toEqual(expect.any(String));
    expect((sent.deliveries as { device_id: string }[]).map((d) => d.device_id)).toEqual([opener]);
    expect(mine!.outcome).toBe('completed');

    const [theirs] = await history(j.id, `device:${idle}`);
    expect(theirs!.history.map((e) => `${e.step}:${e.what}`).slice(-2)).toEqual(['opened:waiting', 'opened:timeout']);
    // the timeout is recorded when the poll after it ran
    expect(theirs!.history.at(-1)).toMatchObject({ to: 'end', at: '2026-06-01T11:01:00.000Z' });

    // split: per-path counts beside the step's
    const ab = (await stepCounts(j.id)).ab as unknown as { entered: number; paths: { name: string; entered: number }[] };
    expect(ab.entered).toBe(2);
    expect(ab.paths.reduce((n, p) => n + p.entered, 0)).toBe(2);
    expect(ab.paths.find((p) => p.name === at('ab', 'split').path)!.entered).toBeGreaterThanOrEqual(1);
  });

  it('a split is stable per entrant and near its percentages; a bad key is a 400, an unknown journey a 404', async () => {
    clock.set(T0);
    const paths = [
      { name: 'control', percent: 20, next: 'hold' },
      { name: 'test', percent: 80, next: 'hold' },
    ];
    const j = await api.create({
      name: 'Split',
      trigger: { api: true },
      exit_on: ['purchase'],
      steps: [
        { id: 'exp', type: 'split', paths },
        { id: 'hold', type: 'delay', duration: '1d' },
      ],
    });
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) ids.push(await device());
    for (const d of ids) await enter(j.id, d);
    await runDue();
    // the first ten buy: each path counts its own converted
    for (const d of ids.slice(0, 10)) await event(d, 'purchase');
    const counts = (await stepCounts(j.id)).exp as unknown as { paths: { name: string; entered: number; converted: number }[] };
    const [control, test] = ['control', 'test'].map((name) => counts.paths.find((p) => p.name === name)!);
    expect(control!.entered + test!.entered).toBe(100);
    expect(control!.entered).toBeGreaterThan(5);
    expect(control!.entered).toBeLessThan(40);
    let inControl = 0;
    for (const d of ids.slice(0, 10)) if ((await history(j.id, `device:${d}`))[0]!.history[1]!.path === 'control') inControl++;
    expect([control!.converted, test!.converted]).toEqual([inControl, 10 - inControl]);
    const bad = await call(h, 'GET', `/v6/journeys/${j.id}/entrants/${ids[0]}`, app.keys.read);
    expect([bad.statusCode, bad.json().error]).toEqual([400, expect.stringMatching(/key: must be device:<device_id> or user:<user_id>/)]);
    const unknown = await call(h, 'GET', `/v6/journeys/00000000-0000-0000-0000-000000000000/entrants/device:${ids[0]}`, app.keys.read);
    expect(unknown.statusCode).toBe(404);
    expect((await call(h, 'GET', `/v6/journeys/${j.id}/entrants/device:${ids[0]}`, app.keys.sdk)).statusCode).toBe(403);
  });

  it('update: removes attributes and tags of every device of a user entrant', async () => {
    clock.set(T0);
    const j = await api.create({
      name: 'Unset',
      trigger: { event: 'churned' },
      steps: [{ id: 'clean', type: 'update', custom: { plan: null }, remove_tags: ['trial'] }],
    });
    const [phone, tablet] = [await device({ user_id: 'ada', tags: ['trial', 'x'] }), await device({ user_id: 'ada', tags: ['trial'] })];
    for (const d of [phone, tablet])
      await call(h, 'PUT', `/v6/devices/${d}`, app.keys.write, { device: { custom: { plan: { type: 'string', value: 'pro' } } } });
    await event(phone, 'churned');
    await runDue();
    for (const d of [phone, tablet]) {
      const stored = (await call(h, 'GET', `/v6/devices/${d}`, app.keys.read)).json().device;
      expect(stored.tags).toEqual(d === phone ? ['x'] : []);
      expect(JSON.stringify(stored)).not.toContain('"pro"');
    }
    const [entry] = await history(j.id, 'user:ada');
    expect(entry!.history.map((e) => e.what)).toEqual(['entered', 'updated']);
  });
});
