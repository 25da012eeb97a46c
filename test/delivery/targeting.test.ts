import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';

/**
 * Every filter kind, end to end: devices registered through the device API (attributes, custom attributes,
 * events, GPS location), a notification posted with the filter, and the set of tokens the mock gateways
 * received must be exactly the devices the filter names — and the audience's own device listing.
 */
describe('delivery reaches exactly the devices of each filter kind', () => {
  let h: Harness;
  let gw: Gateways;
  let keys: { read: string; write: string; sdk: string };
  const d: Record<string, RegisteredDevice> = {};

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, env: gw.env });
    const created = await h.createApp('com.example.targeting');
    keys = created.keys;
    await setCredentials(h, created.app.id, gw);
    const custom = (c: Record<string, [string, unknown]>) =>
      Object.fromEntries(Object.entries(c).map(([k, [type, value]]) => [k, { type, value }]));
    d.paris = await registerDevice(h, keys.sdk, {
      platform: 'ios',
      locale: 'fr_FR',
      os_name: 'iOS',
      badge: 2,
      tags: ['vip'],
      notifications_allowed: 'Enabled',
      location: { latitude: 48.8566, longitude: 2.3522 },
      custom: custom({ plan: ['string', 'pro'], age: ['integer', 34], beta: ['boolean', true], colors: ['string', ['red', 'blue']] }),
    });
    d.lyon = await registerDevice(h, keys.sdk, {
      platform: 'android',
      locale: 'fr_FR',
      os_name: 'Android',
      badge: 0,
      tags: ['news'],
      notifications_allowed: 'Disabled',
      location: { latitude: 45.764, longitude: 4.8357 },
      custom: custom({ plan: ['string', 'free'], age: ['integer', 19], score: ['float', 2.5] }),
    });
    d.berlin = await registerDevice(h, keys.sdk, {
      platform: 'android',
      locale: 'de_DE',
      os_name: 'Android',
      badge: 9,
      tags: ['vip', 'news'],
      location: { latitude: 52.52, longitude: 13.405 },
      custom: custom({ age: ['integer', 61], renewal: ['date', '2026-01-15T00:00:00Z'] }),
    });
    d.nyc = await registerDevice(h, keys.sdk, { platform: 'ios', development: true, locale: 'en_US', os_name: 'iOS', user_id: 'u-ny' });
    d.bare = await registerDevice(h, keys.sdk, { platform: 'ios' });
    const event = (device: RegisteredDevice, name: string, times: number) =>
      Promise.all(
        Array.from({ length: times }, () =>
          h.server.inject({
            method: 'POST',
            url: `/v6/devices/${device.id}/events`,
            headers: { authorization: basic(keys.sdk) },
            payload: { events: [{ name }] },
          }),
        ),
      );
    await event(d.paris!, 'purchase', 3);
    await event(d.lyon!, 'purchase', 1);
    await event(d.berlin!, 'opened', 1);
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  const square = (lat: number, lng: number, r: number) => ({
    polygon: [
      { latitude: lat - r, longitude: lng - r },
      { latitude: lat - r, longitude: lng + r },
      { latitude: lat + r, longitude: lng + r },
      { latitude: lat + r, longitude: lng - r },
    ],
  });
  const cases: [string, unknown[], string[]][] = [
    ['string attribute', [{ name: 'locale', criteria: ['fr_FR'] }], ['paris', 'lyon']],
    ['number range', [{ name: 'badge', criteria: [{ gte: 2 }] }], ['paris', 'berlin']],
    ['boolean (development)', [{ name: 'development', criteria: [true] }], ['nyc']],
    ['tags', [{ name: 'tags', criteria: ['news'] }], ['lyon', 'berlin']],
    ['notifications_allowed', [{ name: 'notifications_allowed', criteria: ['Disabled'] }], ['lyon']],
    ['user_id', [{ name: 'user_id', criteria: ['u-ny'] }], ['nyc']],
    [
      'created_at date math',
      [{ name: 'created_at', criteria: [{ gte: 'now-1h', lte: 'now+1m' }] }],
      ['paris', 'lyon', 'berlin', 'nyc', 'bare'],
    ],
    ['custom string', [{ name: 'custom.string.plan', criteria: ['pro', 'free'] }], ['paris', 'lyon']],
    ['custom string array', [{ name: 'custom.string.colors', criteria: ['blue'] }], ['paris']],
    ['custom integer range', [{ name: 'custom.integer.age', criteria: [{ gt: 30, lt: 65 }] }], ['paris', 'berlin']],
    ['custom float', [{ name: 'custom.float.score', criteria: [{ gte: 2 }] }], ['lyon']],
    ['custom boolean', [{ name: 'custom.boolean.beta', criteria: [true] }], ['paris']],
    ['custom date', [{ name: 'custom.date.renewal', criteria: [{ lt: '2026-02-01' }] }], ['berlin']],
    ['event happened', [{ name: 'events.purchase', criteria: [true] }], ['paris', 'lyon']],
    ['event count', [{ name: 'events.purchase', criteria: [{ gte: 2 }] }], ['paris']],
    ['event last time', [{ name: 'events.opened', criteria: [{ gte: 'now-7d' }] }], ['berlin']],
    [
      'distance',
      [{ name: 'sdk_location', criteria: [{ point: { latitude: 48.85, longitude: 2.35 }, distance: 500, unit: 'km' }] }],
      ['paris', 'lyon'],
    ],
    [
      'polygon or distance',
      [
        {
          name: 'location',
          criteria: [square(52.52, 13.4, 0.5), { point: { latitude: 45.76, longitude: 4.83 }, distance: 10, unit: 'mi' }],
        },
      ],
      ['lyon', 'berlin'],
    ],
    [
      'negation (lacking the attribute matches)',
      [{ name: 'custom.integer.age', criteria: [{ gt: 30 }], not_filter: true }],
      ['lyon', 'nyc', 'bare'],
    ],
    [
      'three filters',
      [
        { name: 'os_name', criteria: ['Android'] },
        { name: 'tags', criteria: ['vip'] },
        { name: 'custom.integer.age', criteria: [{ gt: 60 }] },
      ],
      ['berlin'],
    ],
  ];

  it.each(cases)('%s', async (_kind, filters, expected) => {
    gw.reset();
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      // a background push, which reaches the devices whose notifications are Disabled too (lyon): what the filter selects
      payload: { notification: { to: filters, payload: { content_available: true, targeted: 'yes' } } },
    });
    expect(res.statusCode, res.body).toBe(201);
    const { id, to } = res.json() as { id: string; to: { id: string } };
    const n = await waitFor('delivery', async () => {
      const r = (
        await h.server.inject({ method: 'GET', url: `/v6/notifications/${id}`, headers: { authorization: basic(keys.read) } })
      ).json();
      return r.state === 'sent' || r.state === 'failed' ? r : null;
    });
    const expectedTokens = expected.map((name) => d[name]!.token).sort();
    const received = [...gw.apns.pushes, ...gw.sandbox.pushes, ...gw.fcm.pushes].map((p) => p.token).sort();
    expect(received).toEqual(expectedTokens);
    expect(n).toMatchObject({ devices_targeted: expected.length, pushes_succeeded: expected.length });
    // the audience's own listing selects the same devices
    const listing = (
      await h.server.inject({ method: 'GET', url: `/v6/audiences/${to.id}/devices`, headers: { authorization: basic(keys.read) } })
    ).json();
    expect(listing.devices.map((x: { id: string }) => x.id).sort()).toEqual(expected.map((name) => d[name]!.id).sort());
  });
});
