import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/**
 * Stored templates end to end: made and versioned through `/v6/templates`, named by id from a notification, a
 * transactional send, a journey's send step and a preview, rendered per device by the real workers and received by
 * the APNs and FCM mocks; a render too large for its gateway reported in the statistics and the push.failed event.
 */
describe('stored templates', () => {
  let h: Harness;
  let gw: Gateways;
  let rx: Receiver;
  let keys: { read: string; write: string; sdk: string };
  const d: Record<string, RegisteredDevice> = {};
  const custom = (c: Record<string, string>) => Object.fromEntries(Object.entries(c).map(([k, value]) => [k, { type: 'string', value }]));

  beforeAll(async () => {
    gw = await startGateways();
    rx = await startReceiver();
    const env = { ...gw.env, WEBHOOK_ALLOWED_ORIGINS: rx.origin, WEBHOOK_POLL_MS: '50', JOURNEY_POLL_MS: '50', RETRY_BASE_MS: '40' };
    h = await createHarness({ workers: true, env });
    const created = await h.createApp('com.example.stored-templates');
    keys = created.keys;
    await setCredentials(h, created.app.id, gw);
    const ana = { user_id: 'u-ana', custom: custom({ first_name: 'Ana' }) };
    d.ana = await registerDevice(h, keys.sdk, { platform: 'ios', locale: 'pt_BR', ...ana });
    d.anaPhone = await registerDevice(h, keys.sdk, { platform: 'android', locale: 'en_US', ...ana });
    d.bo = await registerDevice(h, keys.sdk, {
      platform: 'ios',
      locale: 'en_US',
      user_id: 'u-bo',
      custom: custom({ first_name: 'Bo', bio: 'x'.repeat(250) }),
    });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
    await rx?.close();
  });
  beforeEach(() => {
    gw.reset();
    rx.reset();
  });

  const api = (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: unknown, key = keys.write) =>
    h.server.inject({ method, url, headers: { authorization: basic(key) }, ...(payload !== undefined && { payload: payload as object }) });
  const make = async (template: Record<string, unknown>) => {
    const res = await api('POST', '/v6/templates', { template });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().template as { id: string; version: number };
  };
  const finished = (id: string) =>
    waitFor(`notification ${id} to finish`, async () => {
      const n = (await api('GET', `/v6/notifications/${id}`, undefined, keys.read)).json();
      return n.state === 'sent' || n.state === 'failed' ? n : null;
    });
  /** What each device was shown, by device name. */
  const shown = () => {
    const byToken = new Map(Object.entries(d).map(([name, dev]) => [dev.token, name]));
    const out: Record<string, unknown> = {};
    for (const p of gw.apns.pushes) out[byToken.get(p.token)!] = (p.payload as { aps: { alert: unknown } }).aps.alert;
    for (const p of gw.fcm.pushes)
      out[byToken.get(p.token)!] = (p.message as { android: { notification: { body: string } } }).android.notification.body;
    return out;
  };
  const greeting = {
    name: 'Order',
    payload: { alert: 'Hi {{ custom.first_name }} #{{ data.order }}', sound: 'default' },
    localized: { pt: { alert: 'Oi {{ custom.first_name }} #{{ data.order }}' } },
  };

  it('creates, versions, lists and deletes with the write key, reads with the read key, never with the sdk key, audited', async () => {
    expect((await api('POST', '/v6/templates', { template: greeting }, keys.sdk)).statusCode).toBe(403);
    expect((await api('POST', '/v6/templates', { template: greeting }, keys.read)).statusCode).toBe(403);
    expect((await api('GET', '/v6/templates', undefined, keys.sdk)).statusCode).toBe(403);
    const t = await make(greeting);
    expect(t).toMatchObject({ name: 'Order', version: 1, content_version: 1, payload: greeting.payload, localized: greeting.localized });
    // a new name alone is no new version; new content is
    const renamed = await api('PATCH', `/v6/templates/${t.id}`, { template: { name: 'Order shipped' } });
    expect(renamed.json().template).toMatchObject({ name: 'Order shipped', version: 1 });
    const changed = await api('PATCH', `/v6/templates/${t.id}`, { template: { payload: { alert: 'Hello {{ custom.first_name }}' } } });
    expect(changed.json().template).toMatchObject({
      version: 2,
      payload: { alert: 'Hello {{ custom.first_name }}' },
      localized: greeting.localized,
    });
    const replaced = await api('PUT', `/v6/templates/${t.id}`, { template: { name: 'Order', payload: { alert: 'Bye' } } });
    expect(replaced.json().template).toMatchObject({ version: 3, payload: { alert: 'Bye' }, localized: null });
    const versions = (await api('GET', `/v6/templates/${t.id}/versions`, undefined, keys.read)).json().versions;
    expect(versions.map((v: { version: number }) => v.version)).toEqual([3, 2, 1]);
    const first = (await api('GET', `/v6/templates/${t.id}/versions/1`, undefined, keys.read)).json().template;
    expect(first).toMatchObject({ version: 3, content_version: 1, payload: greeting.payload });
    expect((await api('GET', `/v6/templates/${t.id}/versions/9`, undefined, keys.read)).json()).toEqual({
      error: 'template version 9 not found',
    });
    const listed = (await api('GET', '/v6/templates', undefined, keys.read)).json().templates;
    expect(listed.map((x: { id: string }) => x.id)).toContain(t.id);
    expect((await api('DELETE', `/v6/templates/${t.id}`, undefined, keys.sdk)).statusCode).toBe(403);
    expect((await api('DELETE', `/v6/templates/${t.id}`)).statusCode).toBe(204);
    expect((await api('GET', `/v6/templates/${t.id}`, undefined, keys.read)).statusCode).toBe(404);
    const audit = (await api('GET', `/v6/audit`))
      .json()
      .entries.filter((e: { details: { template_id?: string } }) => e.details.template_id === t.id);
    expect(audit.map((e: { action: string }) => e.action).sort()).toEqual([
      'template.created',
      'template.deleted',
      'template.updated',
      'template.updated',
      'template.updated',
    ]);
  });

  it('refuses a template that does not parse or names an unknown variable, naming the field and the position', async () => {
    const bad = async (method: 'POST' | 'PATCH', url: string, template: Record<string, unknown>) => {
      const res = await api(method, url, { template });
      expect(res.statusCode, res.body).toBe(400);
      return res.json().error as string;
    };
    expect(await bad('POST', '/v6/templates', { name: 'x', payload: { alert: 'Hi {{ custom.name | shout }}' } })).toBe(
      'template.payload.alert: line 1, col 4: undefined filter: shout',
    );
    expect(
      await bad('POST', '/v6/templates', { name: 'x', payload: { alert: 'a' }, localized: { fr: { title: 'x {{ apps.key }}' } } }),
    ).toMatch(/^template\.localized\.fr\.title: line 1, col 6: unknown variable "apps"/);
    const t = await make(greeting);
    // a change is checked whole: the stored payload with the new languages
    expect(await bad('PATCH', `/v6/templates/${t.id}`, { localized: { de: { alert: '{% include "x" %}' } } })).toMatch(
      /^template\.localized\.de\.alert: line 1, col 1: tag "include" not found/,
    );
    expect((await api('GET', `/v6/templates/${t.id}`, undefined, keys.read)).json().template.version).toBe(1);
  });

  it('replays the answer of a retry with its Idempotency-Key after the template it used was deleted', async () => {
    const t = await make(greeting);
    const keyed = (url: string, body: unknown, key: string) =>
      h.server.inject({
        method: 'POST',
        url,
        headers: { authorization: basic(keys.write), 'idempotency-key': key },
        payload: body as object,
      });
    const post = { notification: { to: [{ name: 'device_id', criteria: [d.bo!.id] }], template_id: t.id, data: { order: '3' } } };
    const tx = { to: { field: 'user_id', value: 'u-ana' }, group: 'replayed', notification: { template_id: t.id, data: { order: '4' } } };
    const first = await keyed('/v6/notifications', post, 'tmpl-replay-1');
    const firstTx = await keyed('/v6/transactional/notifications', tx, 'tmpl-replay-2');
    expect([first.statusCode, firstTx.statusCode], first.body + firstTx.body).toEqual([201, 200]);
    await finished(first.json().id);
    expect((await api('DELETE', `/v6/templates/${t.id}`)).statusCode).toBe(204);

    for (const [again, answer] of [
      [await keyed('/v6/notifications', post, 'tmpl-replay-1'), first],
      [await keyed('/v6/transactional/notifications', tx, 'tmpl-replay-2'), firstTx],
    ] as const) {
      expect(again.statusCode, again.body).toBe(answer.statusCode);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json()).toEqual(answer.json());
    }
    // a new key: the template is gone
    expect((await keyed('/v6/notifications', post, 'tmpl-replay-3')).statusCode).toBe(404);
  });

  it('sends a template by id from a notification (its newest or a pinned version) and a transactional send', async () => {
    const t = await make(greeting);
    await api('PATCH', `/v6/templates/${t.id}`, { template: { payload: { alert: 'Hello {{ custom.first_name }} #{{ data.order }}' } } });
    const to = [{ name: 'device_id', criteria: [d.ana!.id, d.bo!.id] }];
    const newest = await api('POST', '/v6/notifications', { notification: { to, template_id: t.id, data: { order: '7' } } });
    expect(newest.statusCode, newest.body).toBe(201);
    await finished(newest.json().id);
    expect(shown()).toEqual({ ana: 'Oi Ana #7', bo: 'Hello Bo #7' });
    gw.reset();
    const pinned = await api('POST', '/v6/notifications', {
      notification: { to, template_id: t.id, template_version: 1, data: { order: '1' } },
    });
    await finished(pinned.json().id);
    expect(shown()).toEqual({ ana: 'Oi Ana #1', bo: 'Hi Bo #1' });
    gw.reset();
    const tx = await api('POST', '/v6/transactional/notifications', {
      to: { field: 'user_id', value: 'u-ana' },
      group: 'order-shipped',
      notification: { template_id: t.id, data: { order: '9' } },
    });
    expect(tx.statusCode, tx.body).toBe(200);
    expect(shown()).toEqual({ ana: 'Oi Ana #9', anaPhone: 'Hello Ana #9' });

    const refused = async (body: Record<string, unknown>, status: number) => {
      const res = await api('POST', '/v6/notifications', { notification: { to: '*', ...body } });
      expect(res.statusCode, res.body).toBe(status);
      return res.json().error;
    };
    expect(await refused({ template_id: '00000000-0000-0000-0000-000000000000' }, 404)).toBe('template not found');
    expect(await refused({ template_id: t.id, template_version: 5 }, 404)).toBe('template version 5 not found');
    expect(await refused({ template_id: t.id, payload: { alert: 'x' } }, 400)).toBe(
      'notification.payload: cannot be combined with template_id (the template has it)',
    );
    expect(await refused({ template_version: 1, payload: { alert: 'x' } }, 400)).toBe('notification.template_version: needs template_id');
    expect(await refused({}, 400)).toBe('notification.payload: must be an object');
  });

  it("sends from a journey's send step; the template cannot be deleted while a journey sends it (409 naming it)", async () => {
    const t = await make({ name: 'Cart', payload: { alert: '{{ custom.first_name }}, {{ event.properties.items | size }} items wait' } });
    const journey = (template_id: string) => ({
      journey: {
        name: 'Cart reminder',
        trigger: { event: 'cart_left' },
        steps: [{ id: 'remind', type: 'send', notification: { template_id } }],
      },
    });
    const unknown = await api('POST', '/v6/journeys', journey('00000000-0000-0000-0000-000000000000'));
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().error).toBe('journey.steps[0].notification.template_id: no such template');
    const made = await api('POST', '/v6/journeys', journey(t.id));
    expect(made.statusCode, made.body).toBe(201);
    const event = { events: [{ name: 'cart_left', properties: { items: [{ name: 'Tea' }, { name: 'Mug' }] } }] };
    expect((await api('POST', `/v6/devices/${d.bo!.id}/events`, event, keys.sdk)).statusCode).toBe(202);
    await waitFor('the reminder', async () => (gw.apns.pushes.length ? true : null));
    expect(shown()).toEqual({ bo: 'Bo, 2 items wait' });

    const inUse = await api('DELETE', `/v6/templates/${t.id}`);
    expect(inUse.statusCode).toBe(409);
    expect(inUse.json().error).toBe(`template: used by journey "Cart reminder" (${made.json().journey.id}); change or archive it first`);
    expect((await api('POST', `/v6/journeys/${made.json().journey.id}/archive`)).statusCode).toBe(200);
    // a journey may name the id in capitals, as any uuid may be written: it holds the template all the same
    const shouting = await api('POST', '/v6/journeys', journey(t.id.toUpperCase()));
    expect(shouting.statusCode, shouting.body).toBe(201);
    expect((await api('DELETE', `/v6/templates/${t.id}`)).statusCode).toBe(409);
    expect((await api('POST', `/v6/journeys/${shouting.json().journey.id}/archive`)).statusCode).toBe(200);
    expect((await api('DELETE', `/v6/templates/${t.id}`)).statusCode).toBe(204);
  });

  it("previews a template for a user: each of the user's devices, what its own gateway receives, rendered", async () => {
    const t = await make(greeting);
    const body = { notification: { to: '*', template_id: t.id, data: { order: '5' } } };
    const res = await api('POST', '/v6/notifications/preview?user_id=u-ana', body, keys.read);
    expect(res.statusCode, res.body).toBe(200);
    const { user_id, devices } = res.json();
    expect(user_id).toBe('u-ana');
    const byId = Object.fromEntries(devices.map((x: { device_id: string }) => [x.device_id, x]));
    expect(byId[d.ana!.id]).toMatchObject({ platform: 'ios', localized: 'pt' });
    expect(byId[d.ana!.id].apns.body.aps.alert).toBe('Oi Ana #5');
    expect(byId[d.ana!.id]).not.toHaveProperty('fcm');
    expect(byId[d.anaPhone!.id]).toMatchObject({ platform: 'android', localized: null });
    expect(byId[d.anaPhone!.id].fcm.body.message.android.notification.body).toBe('Hi Ana #5');
    expect((await api('POST', '/v6/notifications/preview?user_id=nobody', body, keys.read)).json()).toEqual({ error: 'user not found' });
    const both = await api('POST', `/v6/notifications/preview?user_id=u-ana&device_id=${d.ana!.id}`, body, keys.read);
    expect(both.json()).toEqual({ error: 'user_id: cannot be combined with device_id' });
  });

  it("fails alone a device whose render is too large: payload_too_large in the notification's statistics and push.failed", async () => {
    const hook = await api('POST', '/v6/webhooks', { url: rx.url, events: ['push.failed'] });
    expect(hook.statusCode, hook.body).toBe(201);
    const t = await make({ name: 'Bio', payload: { alert: '{% for i in (1..17) %}{{ custom.bio }}{% endfor %}!' } });
    const res = await api('POST', '/v6/notifications', {
      notification: { to: [{ name: 'device_id', criteria: [d.ana!.id, d.bo!.id] }], template_id: t.id },
    });
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().id;
    expect(await finished(id)).toMatchObject({ state: 'sent', pushes_succeeded: 1, pushes_failed: 1, failure_reason: 'payload_too_large' });
    expect(shown()).toEqual({ ana: '!' });
    const failed = await waitFor('the push.failed event', async () => {
      const events = rx.events().filter((e) => e.type === 'push.failed' && e.data.notification_id === id);
      return events.length ? events : null;
    });
    expect(failed.map((e) => e.data)).toEqual([expect.objectContaining({ device_id: d.bo!.id, reason: 'payload_too_large' })]);
    expect((await api('DELETE', `/v6/webhooks/${hook.json().webhook.id}`)).statusCode).toBe(204);
  });
});
