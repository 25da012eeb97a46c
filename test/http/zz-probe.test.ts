import { it } from 'vitest';
import { basic, createHarness } from '../helpers/harness.js';

it('probe', async () => {
  const h = await createHarness();
  const { keys, app } = await h.createApp();
  const auth = basic(keys.write);
  const bodies: unknown[] = [
    { notification: { to: [{ criteria: ['a'] }], payload: { alert: 'x' } } },
    { notification: { to: [{ name: 5, criteria: ['a'] }], payload: { alert: 'x' } } },
    { notification: { to: [{ name: 'locale' }], payload: { alert: 'x' } } },
    { notification: { to: [{ name: 'location', criteria: [{ distance: 1, unit: 'km' }] }], payload: { alert: 'x' } } },
    { notification: { to: [{ name: 'location', criteria: [{ point: { latitude: 1 }, distance: 1, unit: 'km' }] }], payload: { alert: 'x' } } },
    { notification: { to: [{ name: 'location', criteria: [{ point: { latitude: 1, longitude: 1 }, unit: 'km' }] }], payload: { alert: 'x' } } },
    { notification: { to: [{ name: 'location', criteria: [{ point: { latitude: 1, longitude: 1 }, distance: 1 }] }], payload: { alert: 'x' } } },
    { notification: { to: [{ name: 'location', criteria: [{ point: { latitude: '1', longitude: 1 }, distance: 1, unit: 'km' }] }], payload: { alert: 'x' } } },
    { notification: { to: [{ name: 'location', criteria: [{ polygon: 'x' }] }], payload: { alert: 'x' } } },
    { notification: { to: [{ name: 'location', criteria: [{ polygon: [{ latitude: 1, longitude: 0 }, { latitude: 1, longitude: 0 }, { latitude: 100, longitude: 0 }] }] }], payload: { alert: 'x' } } },
    { notification: { to: [{ name: 'location', criteria: [{ point: { latitude: 1, longitude: 1 }, distance: 1, unit: 'km', extra: 1 }] }], payload: { alert: 'x' } } },
    { notification: { to: [{ name: 'badge', criteria: [{ gt: 1, foo: 2 }] }], payload: { alert: 'x' } } },
    { notification: { to: [{ name: 'badge', criteria: [null] }], payload: { alert: 'x' } } },
    { notification: { to: [{ name: 'locale', criteria: [['a']] }], payload: { alert: 'x' } } },
    { notification: { to: '*', payload: 'x' } },
    { notification: { to: '*', payload: [] } },
    { notification: { to: '*', payload: null } },
    { other: 1 },
    {},
    { notification: { to: '*', payload: { relevance_score: 0.29 } } },
    { notification: { to: '*', payload: { relevance_score: 0.57 } } },
    { notification: { to: '*', payload: { relevance_score: 1e-300 } } },
    { notification: { to: '*', payload: { badge: 1e300 } } },
  ];
  for (const b of bodies) {
    const res = await h.server.inject({ method: 'POST', url: '/v6/notifications', headers: { authorization: auth, 'content-type': 'application/json' }, payload: JSON.stringify(b) });
    console.log(JSON.stringify(b).slice(0, 120), '=>', res.statusCode, res.body);
  }
  for (const [ct, body] of [['text/plain', 'x'], ['application/json', ''], ['application/json', '{'], ['application/x-www-form-urlencoded', 'a=b'], ['application/json', '{"__proto__":{"a":1}}'], [undefined, undefined]] as const) {
    const res = await h.server.inject({ method: 'POST', url: '/v6/notifications', headers: { authorization: auth, ...(ct ? { 'content-type': ct } : {}) }, payload: body });
    console.log(ct, JSON.stringify(body), '=>', res.statusCode, res.body);
  }
  const big = await h.server.inject({ method: 'POST', url: '/v6/notifications', headers: { authorization: auth, 'content-type': 'application/json' }, payload: JSON.stringify({ notification: { to: '*', payload: { alert: 'x'.repeat(2_000_000) } } }) });
  console.log('big', big.statusCode, big.body);
  console.log(app);
  await h.close();
});
