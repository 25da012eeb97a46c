import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways } from '../helpers/gateways.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/**
 * Outbound webhooks end to end: endpoints made through the API, pushes delivered by the real workers to the mock
 * gateways, events sent by the workers' sender to an HTTPS receiver in this process, verified with the public
 * Standard Webhooks library.
 */
describe('webhooks', () => {
  let h: Harness;
  let gw: Gateways;
  let rx: Receiver;
  let keys: { read: string; write: string; sdk: string };
  let appId: string;

  beforeAll(async () => {
    gw = await startGateways();
    rx = await startReceiver();
    h = await createHarness({
      workers: true,
      env: { ...gw.env, WEBHOOK_ALLOWED_ORIGINS: rx.origin, WEBHOOK_POLL_MS: '50', WEBHOOK_TIMEOUT_MS: '1500', WEBHOOK_BATCH_SIZE: '2' },
    });
    const created = await h.createApp('com.example.hooks');
    keys = created.keys;
    appId = created.app.id;
    // APNs only: an Android push fails (no_credentials)
    await setCredentials(h, appId, gw, { apns: true });
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

  const api = async (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, key: string, payload?: unknown) =>
    h.server.inject({ method, url, headers: { authorization: basic(key) }, ...(payload !== undefined && { payload: payload as object }) });
  const createEndpoint = async (body: Record<string, unknown> = {}) => {
    const res = await api('POST', '/v6/webhooks', keys.write, { url: rx.url, events: ['*'], ...body });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().webhook as { id: string; secret: string; enabled: boolean };
  };
  const deleteAll = async () => {
    for (const w of (await api('GET', '/v6/webhooks', keys.read)).json().webhooks) await api('DELETE', `/v6/webhooks/${w.id}`, keys.write);
  };
  const push = async () => {
    const res = await api('POST', '/v6/notifications', keys.write, { notification: { to: '*', payload: { alert: 'hi' } } });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };

  it('manages endpoints with the write key, lists them with the read key, never with the sdk key, and audits each change', async () => {
    const w = await createEndpoint({ description: 'crm' });
    expect(w.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect((await api('POST', '/v6/webhooks', keys.read, { url: rx.url, events: ['*'] })).statusCode).toBe(403);
    expect((await api('GET', '/v6/webhooks', keys.sdk)).statusCode).toBe(403);
    const listed = (await api('GET', '/v6/webhooks', keys.read)).json().webhooks;
    expect(listed).toHaveLength(1);
    expect(listed[0]).not.toHaveProperty('secret');
    const patched = await api('PATCH', `/v6/webhooks/${w.id}`, keys.write, { events: ['push.failed'], enabled: false });
    expect(patched.json().webhook).toMatchObject({ events: ['push.failed'], enabled: false });
    const rotated = (await api('POST', `/v6/webhooks/${w.id}/rotate-secret`, keys.write)).json().webhook;
    expect(rotated.secret).not.toBe(w.secret);
    // the secret is stored sealed, never plain
    const stored = await h.db.db.selectFrom('webhook_endpoints').select(['secret', 'previous_secret']).executeTakeFirstOrThrow();
    expect(stored.secret).toMatch(/^pushd:v1:/);
    expect(stored.previous_secret).toMatch(/^pushd:v1:/);
    expect((await api('DELETE', `/v6/webhooks/${w.id}`, keys.write)).statusCode).toBe(204);
    expect((await api('GET', `/v6/webhooks/${w.id}`, keys.read)).statusCode).toBe(404);
    const audit = (await api('GET', '/v6/audit', keys.write)).json().entries.map((e: { action: string }) => e.action);
    expect(audit).toEqual(expect.arrayContaining(['webhook.created', 'webhook.updated', 'webhook.secret_rotated', 'webhook.deleted']));
  });

  it.each([
    ['http://hooks.example.com/', 'url: must be an https URL'],
    ['https://127.0.0.1/hook', 'url: must not be a loopback'],
    ['https://10.1.2.3/hook', 'url: must not be a loopback'],
    ['https://169.254.169.254/latest/meta-data', 'url: must not be a loopback'],
    ['https://[::1]:8443/', 'url: must not be a loopback'],
    ['https://[::ffff:192.168.0.1]/', 'url: must not be a loopback'],
    ['https://localhost/hook', 'url: must not name this host'],
    ['https://user:pw@hooks.example.com/', 'url: must not hold a user name or password'],
  ])('refuses %s', async (url, error) => {
    const res = await api('POST', '/v6/webhooks', keys.write, { url, events: ['*'] });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toContain(error);
  });

  it('refuses unknown event types and fields as 400s', async () => {
    const res = await api('POST', '/v6/webhooks', keys.write, { url: rx.url, events: ['push.exploded'] });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/^events\[0\]: must be "\*" or one of/);
    expect((await api('POST', '/v6/webhooks', keys.write, { url: rx.url, events: ['*'], secret: 'x' })).statusCode).toBe(400);
  });

  it('answers a malformed id as it answers an unknown one: 404 "webhook not found", on every route', async () => {
    const window = { since: '2026-01-01T00:00:00Z', until: '2026-01-02T00:00:00Z' };
    const calls = [
      ['GET', '', keys.read],
      ['PATCH', '', keys.write, { enabled: true }],
      ['DELETE', '', keys.write],
      ['POST', '/rotate-secret', keys.write],
      ['POST', '/test', keys.write],
      ['POST', '/replay', keys.write, window],
      ['GET', '/attempts', keys.read],
    ] as const;
    for (const [method, tail, key, body] of calls) {
      const res = await api(method, `/v6/webhooks/not-a-uuid${tail}`, key, body);
      expect([res.statusCode, res.json()], `${method} ${tail}`).toEqual([404, { error: 'webhook not found' }]);
    }
  });

  it('records no event while the app has no endpoint', async () => {
    await deleteAll();
    await registerDevice(h, keys.sdk, { platform: 'ios' });
    const id = await push();
    await waitFor('the push to finish', async () => (await api('GET', `/v6/notifications/${id}`, keys.read)).json().state === 'sent');
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from webhook_events`.execute(h.db.db);
    expect(rows[0]!.n).toBe(0);
  });

  it('sends push.delivered, push.failed and device.unregistered, signed, each event id once', async () => {
    await deleteAll();
    const w = await createEndpoint();
    rx.verifyWith(w.secret);
    const ok = await registerDevice(h, keys.sdk, { platform: 'ios' });
    const dead = await registerDevice(h, keys.sdk, { platform: 'ios' });
    const android = await registerDevice(h, keys.sdk, { platform: 'android' });
    gw.apns.markUnregistered(dead.token);
    const id = await push();
    const mine = () => rx.events().filter((e) => e.data.notification_id === id);
    await waitFor('the events of the push', async () => (mine().length >= 3 + 1 ? true : null));
    const byDevice = (type: string, device: string) => mine().find((e) => e.type === type && e.data.device_id === device);
    expect(byDevice('push.delivered', ok.id)).toMatchObject({ app_id: appId, data: { platform: 'ios', attempt: 1 } });
    expect(byDevice('device.unregistered', dead.id)?.data.reason).toBeTruthy();
    expect(byDevice('push.failed', android.id)?.data).toMatchObject({ reason: 'no_credentials', platform: 'android', attempt: 1 });
    // WEBHOOK_BATCH_SIZE=2: several requests, each verified by the public library
    expect(rx.requests.every((r) => r.events.length <= 2 && r.verifiedWith.length === 1)).toBe(true);
    const ids = rx.eventIds();
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('sends notification.completed and .canceled, push.opened, conversion and journey events from their transactions', async () => {
    await deleteAll();
    await createEndpoint();
    const journey = await api('POST', '/v6/journeys', keys.write, {
      journey: {
        name: 'Cart',
        trigger: { event: 'cart_abandoned' },
        exit_on: ['purchase'],
        steps: [{ id: 'wait', type: 'delay', duration: '1h' }],
      },
    });
    expect(journey.statusCode, journey.body).toBe(201);
    const device = await registerDevice(h, keys.sdk, { platform: 'ios' });
    const id = await push();
    const of = (type: string) => rx.events().filter((e) => e.type === type);
    await waitFor('notification.completed', async () => of('notification.completed').find((e) => e.data.notification_id === id) ?? null);
    const completed = of('notification.completed').find((e) => e.data.notification_id === id)!;
    expect(completed.data).toMatchObject({ state: 'sent', pushes_succeeded: expect.any(Number) });
    expect(completed.data.pushes_succeeded).toBeGreaterThan(0);
    // only a change of state to an end writes one: later updates of the row, its state kept, write none
    await sql`update notifications set updated_at = now() where id = ${id}::uuid`.execute(h.db.db);
    await sql`update notifications set state = state, finished_at = now() where id = ${id}::uuid`.execute(h.db.db);
    const { rows: ends } = await sql<{ n: number }>`
      select count(*)::int as n from webhook_events where type = 'notification.completed' and data->>'notification_id' = ${id}`.execute(
      h.db.db,
    );
    expect(ends[0]!.n).toBe(1);

    // the SDK reports the open twice (a retry): one event
    for (let i = 0; i < 2; i++) {
      const opened = await api('POST', `/v6/devices/${device.id}/opens`, keys.sdk, { open: { _nid: id, tapped: true } });
      expect(opened.statusCode, opened.body).toBeLessThan(300);
    }
    for (const name of ['cart_abandoned', 'purchase']) {
      const res = await api('POST', `/v6/devices/${device.id}/events`, keys.sdk, { events: [{ name }] });
      expect(res.statusCode, res.body).toBeLessThan(300);
    }
    await waitFor('push.opened, conversion and the journey events', async () =>
      ['push.opened', 'conversion', 'journey.entered', 'journey.converted'].every((t) => of(t).some((e) => e.data.device_id === device.id))
        ? true
        : null,
    );
    expect(
      of('push.opened')
        .filter((e) => e.data.device_id === device.id)
        .map((e) => e.data),
    ).toEqual([expect.objectContaining({ notification_id: id, kind: 'direct' })]);
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from webhook_events where type = 'push.opened' and data->>'device_id' = ${device.id}`.execute(h.db.db);
    expect(rows[0]!.n).toBe(1);
    expect(of('conversion').find((e) => e.data.name === 'purchase')!.data).toMatchObject({ notification_id: id, count: 1 });
    expect(of('journey.converted')[0]!.data).toMatchObject({ journey_id: journey.json().journey.id, version: 1 });

    const later = await api('POST', '/v6/notifications', keys.write, {
      notification: { to: '*', payload: { alert: 'later' }, send_at: new Date(Date.now() + 3_600_000).toISOString() },
    });
    expect((await api('DELETE', `/v6/notifications/${later.json().id}`, keys.write)).statusCode).toBeLessThan(300);
    await waitFor('notification.canceled', async () =>
      of('notification.canceled').some((e) => e.data.notification_id === later.json().id) ? true : null,
    );
  });

  it('sends journey.exited for each entrant an archive takes out, from its statement, to endpoints that take it', async () => {
    await deleteAll();
    await createEndpoint({ events: ['journey.exited'] });
    const journey = await api('POST', '/v6/journeys', keys.write, {
      journey: { name: 'Parked', trigger: { event: 'parked' }, steps: [{ id: 'wait', type: 'delay', duration: '1d' }] },
    });
    expect(journey.statusCode, journey.body).toBe(201);
    const journeyId = journey.json().journey.id as string;
    const devices = [await registerDevice(h, keys.sdk, { platform: 'ios' }), await registerDevice(h, keys.sdk, { platform: 'ios' })];
    for (const d of devices) {
      const res = await api('POST', `/v6/devices/${d.id}/events`, keys.sdk, { events: [{ name: 'parked' }] });
      expect(res.statusCode, res.body).toBeLessThan(300);
    }
    const inside = async () =>
      (
        await sql<{
          n: number;
        }>`select count(*)::int as n from journey_entrants where journey_id = ${journeyId} and outcome is null`.execute(h.db.db)
      ).rows[0]!.n;
    await waitFor('both entered', async () => ((await inside()) === 2 ? true : null));
    expect((await api('POST', `/v6/journeys/${journeyId}/archive`, keys.write)).statusCode).toBeLessThan(300);
    const exited = () => rx.events().filter((e) => e.type === 'journey.exited' && e.data.journey_id === journeyId);
    await waitFor('journey.exited for both', async () => (exited().length === 2 ? true : null));
    expect(
      exited()
        .map((e) => e.data.device_id)
        .sort(),
    ).toEqual(devices.map((d) => d.id).sort());
    expect(exited()[0]!.data).toMatchObject({ version: 1, entrant: expect.stringMatching(/^d:/) });
    // the endpoint takes journey.exited only: the entries wrote no event for it
    const { rows } = await sql<{ type: string }>`
      select distinct type from webhook_events where data->>'journey_id' = ${journeyId}`.execute(h.db.db);
    expect(rows.map((r) => r.type)).toEqual(['journey.exited']);
  });

  it('retries a failing receiver after its Retry-After, and lists the attempts', async () => {
    await deleteAll();
    const w = await createEndpoint({ events: ['push.delivered'] });
    await registerDevice(h, keys.sdk, { platform: 'ios' });
    rx.answerNext({ status: 503, headers: { 'retry-after': '2' } });
    const id = await push();
    await waitFor('a failed request', async () => (rx.failures.length ? true : null));
    const failed = rx.failures[0]!;
    const retried = (eventId: string) => rx.requests.find((r) => r.events.some((e) => e.id === eventId));
    await waitFor('the retry', async () => (failed.events.every((e) => retried(e.id)) ? true : null));
    for (const e of failed.events) expect(retried(e.id)!.at - failed.at).toBeGreaterThanOrEqual(1900);
    expect(failed.events.every((e) => e.data.notification_id === id)).toBe(true);
    const attempts = (await api('GET', `/v6/webhooks/${w.id}/attempts`, keys.read)).json().attempts;
    expect(attempts.map((a: { status: number }) => a.status)).toEqual(expect.arrayContaining([503, 204]));
    expect(attempts.find((a: { status: number }) => a.status === 503).snippet).toBe('answer body');
  });

  it('disables an endpoint whose receiver answers 410, with an audit row by pushd', async () => {
    await deleteAll();
    const w = await createEndpoint();
    await registerDevice(h, keys.sdk, { platform: 'ios' });
    rx.answerAlways({ status: 410 });
    await push();
    await waitFor('the endpoint disabled', async () => {
      const got = (await api('GET', `/v6/webhooks/${w.id}`, keys.read)).json().webhook;
      return got.enabled ? null : got;
    });
    const entries = (await api('GET', '/v6/audit?action=webhook.disabled', keys.write)).json().entries;
    expect(entries[0]).toMatchObject({ actor: { role: 'system' }, details: { endpoint_id: w.id } });
  });

  it('sends a window again on replay, with the same event ids', async () => {
    await deleteAll();
    const w = await createEndpoint({ events: ['push.delivered'] });
    await registerDevice(h, keys.sdk, { platform: 'ios' });
    const since = new Date(Date.now() - 1000).toISOString();
    const id = await push();
    await waitFor('the events', async () => (rx.events().some((e) => e.data.notification_id === id) ? true : null));
    await new Promise((r) => setTimeout(r, 300));
    const first = rx.eventIds().sort();
    rx.reset();
    const res = await api('POST', `/v6/webhooks/${w.id}/replay`, keys.write, { since, until: new Date(Date.now() + 1000).toISOString() });
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json().events).toBeGreaterThan(0);
    await waitFor('the replay', async () => (rx.eventIds().length >= first.length ? true : null));
    expect(rx.eventIds().sort()).toEqual(first);
    const bad = await api('POST', `/v6/webhooks/${w.id}/replay`, keys.write, { since: 'yesterday', until: since });
    expect(bad.statusCode).toBe(400);
  });

  it('sends a ping on test, signed with both secrets for a day after a rotation', async () => {
    await deleteAll();
    const w = await createEndpoint({ events: ['conversion'] });
    const rotated = (await api('POST', `/v6/webhooks/${w.id}/rotate-secret`, keys.write)).json().webhook;
    rx.verifyWith(w.secret, rotated.secret);
    const res = await api('POST', `/v6/webhooks/${w.id}/test`, keys.write);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().status).toBe(204);
    expect(rx.requests[0]!.events[0]).toMatchObject({ type: 'ping', app_id: appId });
    expect(rx.requests[0]!.verifiedWith.sort()).toEqual([w.secret, rotated.secret].sort());
  });

  it('keeps pushing at full speed while the receiver is slow', async () => {
    await deleteAll();
    await createEndpoint();
    rx.answerAlways({ status: 204, delayMs: 30_000 });
    await registerDevice(h, keys.sdk, { platform: 'ios' });
    const started = Date.now();
    const id = await push();
    await waitFor('the push to finish', async () => (await api('GET', `/v6/notifications/${id}`, keys.read)).json().state === 'sent');
    expect(Date.now() - started).toBeLessThan(5000);
    const timedOut = await waitFor('a timed-out request', async () => {
      const w = (await api('GET', '/v6/webhooks', keys.read)).json().webhooks[0];
      const attempts = (await api('GET', `/v6/webhooks/${w.id}/attempts`, keys.read)).json().attempts;
      return attempts.find((a: { error: string | null }) => a.error?.includes('no answer within')) ?? null;
    });
    // WEBHOOK_TIMEOUT_MS=1500: the attempt shows how long it was waited for, and no answer
    expect(timedOut).toMatchObject({ status: null, snippet: null });
    expect(timedOut.latency_ms).toBeGreaterThanOrEqual(1400);
  });
});
