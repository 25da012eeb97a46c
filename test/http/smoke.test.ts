import { describe, expect, it } from 'vitest';
import { basic, useHarness } from '../helpers/harness.js';

describe('create notification (smoke)', () => {
  const h = useHarness();

  it('stores a notification to all devices and answers 201 with the audience id', async () => {
    const { keys } = await h.createApp();
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      payload: { notification: { to: '*', payload: { alert: 'hello' } } },
    });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.state).toBe('scheduled');
    expect(body.to.type).toBe('Audience');
    expect(body.notification).toEqual({ to: '*', payload: { alert: 'hello' } });
  });
});
