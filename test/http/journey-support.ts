import { expect } from 'vitest';
import type { Harness } from '../helpers/harness.js';
import { call } from './device-support.js';

/** The journeys tests' shared calls: the docs' cart-abandonment journey, and the API calls they make of an app. */
type App = Awaited<ReturnType<Harness['createApp']>>;

/** The cart-abandonment journey of the docs. */
export const cartJourney = () => ({
  name: 'Cart reminder',
  trigger: { event: 'cart_abandoned' },
  exit_on: ['purchase'],
  steps: [
    { id: 'wait', type: 'delay', duration: '1h' },
    { id: 'remind', type: 'send', notification: { payload: { alert: 'Your cart is waiting' } } },
  ],
});

/** Journeys, devices and events of the app `app()` names (read when called: apps are made in a beforeAll). */
export function journeyApi(h: Harness, app: () => App) {
  const journey = async (id: string) => (await call(h, 'GET', `/v6/journeys/${id}`, app().keys.read)).json().journey;
  return {
    create: async (definition: unknown) => {
      const res = await call(h, 'POST', '/v6/journeys', app().keys.write, { journey: definition });
      if (res.statusCode !== 201) throw new Error(res.body);
      return res.json().journey as { id: string };
    },
    journey,
    /** Each step's counters, by step id. */
    stepCounts: async (id: string) =>
      Object.fromEntries((await journey(id)).counts.steps.map((s: { id: string }) => [s.id, s])) as Record<string, Record<string, number>>,
    device: async (fields: Record<string, unknown> = {}) =>
      (await call(h, 'POST', '/v6/devices', app().keys.write, { device: { platform: 'ios', ...fields } })).json().device.id as string,
    /** The device enters the journey through the API. */
    enter: async (journeyId: string, deviceId: string) =>
      expect((await call(h, 'POST', `/v6/journeys/${journeyId}/entries`, app().keys.write, { device_id: deviceId })).statusCode).toBe(202),
    /** The entrant's entries (`device:<id>` or `user:<id>`), newest first, as GET .../entrants/:key answers them. */
    entrants: async (journeyId: string, key: string) => {
      const res = await call(h, 'GET', `/v6/journeys/${journeyId}/entrants/${encodeURIComponent(key)}`, app().keys.read);
      expect(res.statusCode, res.body).toBe(200);
      return res.json().entrants as { step: string; phase: string; due_at: string | null; history: Record<string, unknown>[] }[];
    },
    /** An SDK event recorded for the device, and applied to the journeys as a worker does. */
    event: async (deviceId: string, name: string) => {
      expect((await call(h, 'POST', `/v6/devices/${deviceId}/events`, app().keys.sdk, { events: [{ name }] })).statusCode).toBe(202);
      await applyEvents(h);
    },
  };
}

/** The events requests recorded for journeys, applied as the journey workers apply them; answers how many rows. */
export async function applyEvents(h: Harness): Promise<number> {
  let n = 0;
  for (let taken = -1; taken !== 0; n += taken) taken = await h.ctx.services.journeys.takeEvents(1000);
  return n;
}
