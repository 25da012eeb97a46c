import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { waitFor } from '../helpers/gateways.js';
import { call } from '../http/device-support.js';
import { WebPushMock } from '../mocks/web-push-mock.js';

/**
 * A journey's send step with browser fields, end to end through the real workers to a Web Push service that decrypts
 * what it gets; and Live Activity fields, which a send step does not take (Live Activities have their own API).
 */
describe('journeys: a send step with web and Live Activity fields', () => {
  let h: Harness;
  let mock: WebPushMock;
  beforeAll(async () => {
    mock = await WebPushMock.start();
    h = await createHarness({ workers: true, env: { WEB_PUSH_ALLOWED_ORIGINS: mock.origin, GATEWAY_THREADS: '1', JOURNEY_POLL_MS: '50' } });
  });
  afterAll(async () => {
    await h?.close();
    await mock?.close();
  });

  it("the browser gets the step's web fields: icon, url, actions, renotify with its tag", async () => {
    const app = await h.createApp('com.example.web-journey');
    const vapidKey = (
      await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setWebPush(app.app.id, {
        subject: 'mailto:ops@example.com',
      })
    ).public_key;
    const sub = mock.subscribe(vapidKey);
    const registered = await call(h, 'POST', '/v6/devices', app.keys.sdk, { device: { platform: 'web', subscription: sub } });
    expect(registered.statusCode, registered.body).toBe(201);
    const deviceId = registered.json().device.id as string;
    const web = {
      icon: '/icon.png',
      url: 'https://shop.example.com/cart',
      actions: [{ action: 'open', title: 'Open cart' }],
      renotify: true,
    };
    const journey = {
      name: 'Web cart',
      trigger: { api: true },
      steps: [{ id: 'nudge', type: 'send', notification: { payload: { alert: 'Your cart', title: 'Shop', collapse_key: 'cart', web } } }],
    };
    const created = await call(h, 'POST', '/v6/journeys', app.keys.write, { journey });
    expect(created.statusCode, created.body).toBe(201);
    const j = created.json().journey;
    expect((await call(h, 'POST', `/v6/journeys/${j.id}/entries`, app.keys.write, { device_id: deviceId })).statusCode).toBe(202);
    await waitFor('the push at the browser', async () => mock.pushes.length > 0, 20_000);
    const [push] = mock.pushes;
    expect(push!.endpoint).toBe(sub.endpoint);
    expect(push!.document).toEqual({
      title: 'Shop',
      body: 'Your cart',
      tag: 'cart',
      ...web,
      data: { _nid: expect.any(String) },
    });
    const history = (await call(h, 'GET', `/v6/journeys/${j.id}/entrants/device:${deviceId}`, app.keys.read)).json().entrants[0].history;
    const sent = history.find((x: { what: string }) => x.what === 'sent');
    expect(sent.notification_id).toBe((push!.document.data as { _nid: string })._nid);
  });

  it('Live Activity fields in a send step are a 400 naming the field, and a web field of the wrong shape too', async () => {
    const app = await h.createApp('com.example.la-journey');
    const definition = (payload: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
      journey: { name: 'LA', trigger: { api: true }, steps: [{ id: 's', type: 'send', notification: { payload, ...extra } }] },
    });
    const live = await call(h, 'POST', '/v6/journeys', app.keys.write, definition({ alert: 'x' }, { live_activity: { event: 'update' } }));
    expect(live.statusCode).toBe(400);
    expect(live.json().error).toMatch(/^journey\.steps\[0\]\.notification/);
    expect(live.json().error).toContain('live_activity');
    const badWeb = await call(h, 'POST', '/v6/journeys', app.keys.write, definition({ alert: 'x', web: { dir: 'up' } }));
    expect(badWeb.statusCode).toBe(400);
    expect(badWeb.json().error).toBe('journey.steps[0].notification.payload.web.dir: must be auto, ltr or rtl');
    const renotify = await call(h, 'POST', '/v6/journeys', app.keys.write, definition({ alert: 'x', web: { renotify: true } }));
    expect(renotify.statusCode).toBe(400);
    expect(renotify.json().error).toBe(
      'journey.steps[0].notification.payload.web.renotify: needs collapse_key (the notification tag it renotifies)',
    );
  });
});
