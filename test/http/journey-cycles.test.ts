import { describe, expect, it } from 'vitest';
import { quickSendingCycle, type JourneyStep } from '../../src/domain/journey.js';
import { basic, useHarness } from '../helpers/harness.js';

const send = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  type: 'send' as const,
  notification: { payload: { alert: 'again' } },
  ...extra,
});
const HOUR = 3_600_000;

describe('quickSendingCycle', () => {
  const quick = (steps: unknown[]) => quickSendingCycle(steps as JourneyStep[], HOUR);

  it('finds a send an entrant comes back to sooner than the minimum, with how soon', () => {
    // the loop of the report: delay 1s ⇄ send
    expect(quick([{ id: 'd', type: 'delay', duration: '1s' }, send('s', { next: 'd' })])).toEqual({ at: 1, ms: 1000 });
    // the quickest way round counts: a branch whose else skips the long delay
    expect(
      quick([
        send('s'),
        { id: 'b', type: 'branch', filters: [], then: 'long', else: 'short' },
        { id: 'long', type: 'delay', duration: '2h', next: 's' },
        { id: 'short', type: 'delay', duration: '10m', next: 's' },
      ]),
    ).toEqual({ at: 0, ms: 10 * 60_000 });
    // a wait_for left by its timeout counts its timeout
    expect(quick([send('s'), { id: 'w', type: 'wait_for', event: 'open', timeout: '5m', on_event: 'end', on_timeout: 's' }])).toEqual({
      at: 0,
      ms: 5 * 60_000,
    });
    // an in-app message step sends too
    expect(
      quick([
        { id: 'm', type: 'message', message: { title: 't' } },
        { id: 'd', type: 'delay', duration: '30m', next: 'm' },
      ]),
    ).toEqual({ at: 0, ms: 30 * 60_000 });
  });

  it('accepts cycles of the minimum or more, through an event, through a local time, and cycles that send nothing', () => {
    expect(quick([send('s'), { id: 'd', type: 'delay', duration: '1h', next: 's' }])).toBeNull();
    expect(quick([send('s'), { id: 'w', type: 'wait_for', event: 'open', timeout: '1d', on_event: 's', on_timeout: 'end' }])).toBeNull();
    expect(quick([send('s'), { id: 'd', type: 'delay', until_local_time: '09:00', next: 's' }])).toBeNull();
    expect(
      quick([
        { id: 'd', type: 'delay', duration: '1s', next: 'b' },
        { id: 'b', type: 'branch', filters: [], then: 'd' },
      ]),
    ).toBeNull();
    expect(quick([send('s'), { id: 'd', type: 'delay', duration: '1s' }])).toBeNull();
  });
});

describe('POST /v6/journeys with a cycle that sends', () => {
  const h = useHarness();
  const post = async (key: string, steps: unknown[]) =>
    h.server.inject({
      method: 'POST',
      url: '/v6/journeys',
      headers: { authorization: basic(key) },
      payload: { journey: { name: 'Loop', trigger: { api: true }, steps } },
    });

  it('refuses delay 1s ⇄ send with a 400 naming the step, and takes the same loop at JOURNEY_MIN_CYCLE', async () => {
    const { keys } = await h.createApp();
    const loop = (duration: string) => [{ id: 'd', type: 'delay', duration }, send('s', { next: 'd' })];
    const refused = await post(keys.write, loop('1s'));
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toBe(
      'journey.steps[1]: an entrant could come back to this step round a cycle after 1s; a cycle that sends must take at least ' +
        '1h (JOURNEY_MIN_CYCLE): lengthen its delays or wait for an event on it (wait_for)',
    );
    expect((await post(keys.write, loop('1h'))).statusCode).toBe(201);
    const made = (await post(keys.write, loop('2h'))).json().journey.id as string;
    const updated = await h.server.inject({
      method: 'PUT',
      url: `/v6/journeys/${made}`,
      headers: { authorization: basic(keys.write) },
      payload: { journey: { name: 'Loop', trigger: { api: true }, steps: loop('59m') } },
    });
    expect([updated.statusCode, updated.json().error]).toEqual([400, expect.stringMatching(/^journey.steps\[1\]: .* after 59m;/)]);
  });
});
