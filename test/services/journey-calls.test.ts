import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { ManualClock, useHarness, type Harness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';
import { journeyApi } from '../http/journey-support.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

type App = Awaited<ReturnType<Harness['createApp']>>;
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const T0 = '2026-06-01T10:00:00Z';

/**
 * The webhook and digest steps: requests signed (Standard Webhooks, checked by the public library) to an HTTPS
 * receiver in this process, retried on the engine's own schedule, their answers choosing the way on; digests counted
 * from the events the entrant records in its window. The test moves the clock and runs the engine itself.
 */
describe('journeys: webhook and digest steps', () => {
  const clock = new ManualClock(new Date(T0));
  let rx: Receiver;
  beforeAll(async () => {
    rx = await startReceiver();
  });
  afterAll(async () => rx?.close());
  const h = useHarness({ clock, env: () => ({ WEBHOOK_ALLOWED_ORIGINS: rx.origin, WEBHOOK_TIMEOUT_MS: '1500' }) });
  let app: App;
  beforeAll(async () => {
    app = await h.createApp();
  });
  beforeEach(() => rx.reset());

  const runDue = () => h.ctx.services.journeyEngine.runDue();
  const api = journeyApi(h, () => app);
  const { stepCounts, device, event } = api;
  const createWithSecret = async (definition: Record<string, unknown>) => {
    const res = await call(h, 'POST', '/v6/journeys', app.keys.write, { journey: { name: 'J', trigger: { api: true }, ...definition } });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().journey as { id: string; webhook_secret?: string };
  };
  const enter = (journeyId: string, who: { device_id: string }) => api.enter(journeyId, who.device_id);
  const history = async (journeyId: string, who: string) => (await api.entrants(journeyId, who))[0]!;
  const sentSteps = async (journeyId: string) =>
    (
      await h.db.db
        .selectFrom('notifications')
        .select(sql<string>`request->'journey'->>'step'`.as('step'))
        .where(sql<boolean>`request->'journey'->>'id' = ${journeyId}`)
        .execute()
    ).map((r) => r.step);
  const webhookJourney = (extra: Record<string, unknown> = {}) => ({
    steps: [
      { id: 'crm', type: 'webhook', url: rx.url, on_success: 'thanks', on_failure: 'sorry', ...extra },
      { id: 'thanks', type: 'send', notification: { payload: { alert: 'done' } }, next: 'end' },
      { id: 'sorry', type: 'send', notification: { payload: { alert: 'not done' } } },
    ],
  });

  it('webhook: POSTs the signed context once, shows the secret only when made, and a 2xx leads on by on_success', async () => {
    clock.set(T0);
    const j = await createWithSecret(webhookJourney());
    expect(j.webhook_secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    rx.verifyWith(j.webhook_secret!);
    expect((await call(h, 'GET', `/v6/journeys/${j.id}`, app.keys.read)).json().journey).not.toHaveProperty('webhook_secret');
    const stored = await h.db.db.selectFrom('journeys').select('webhook_secret').where('id', '=', j.id).executeTakeFirstOrThrow();
    expect(stored.webhook_secret).toMatch(/^pushd:v1:/);
    const d = await device();
    await enter(j.id, { device_id: d });
    await runDue();
    await runDue();
    expect(rx.requests).toHaveLength(1);
    const [request] = rx.requests;
    expect(request!.verifiedWith).toEqual([j.webhook_secret]);
    expect(JSON.parse(request!.body)).toEqual({
      type: 'journey.webhook',
      timestamp: T0.replace('Z', '.000Z'),
      journey: { id: j.id, version: 1, step: 'crm' },
      entrant: { device_id: d },
      device_id: d,
      entered_at: T0.replace('Z', '.000Z'),
      event: null,
      attempt: 1,
    });
    expect(request!.headers['webhook-id']).toMatch(/^jrn_/);
    expect(await sentSteps(j.id)).toEqual(['thanks']);
    const entry = await history(j.id, `device:${d}`);
    expect(entry.history.find((x) => x.what === 'webhook')).toEqual({
      at: T0.replace('Z', '.000Z'),
      step: 'crm',
      what: 'webhook',
      status: 204,
      attempt: 1,
      to: 'thanks',
    });
    // a new version keeps the secret, and does not show it again
    const put = await call(h, 'PUT', `/v6/journeys/${j.id}`, app.keys.write, {
      journey: { name: 'J2', trigger: { api: true }, ...webhookJourney() },
    });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json().journey).not.toHaveProperty('webhook_secret');
  });

  it("webhook: the trigger event's properties and a user entrant are in the context", async () => {
    clock.set(T0);
    const res = await call(h, 'POST', '/v6/journeys', app.keys.write, {
      journey: { name: 'E', trigger: { event: 'checkout' }, steps: webhookJourney().steps },
    });
    expect(res.statusCode, res.body).toBe(201);
    const j = res.json().journey;
    rx.verifyWith(j.webhook_secret);
    const user = `u-${randomUUID()}`;
    const d = await device({ user_id: user });
    const posted = await call(h, 'POST', `/v6/devices/${d}/events`, app.keys.sdk, {
      events: [{ name: 'checkout', properties: { total: 42 } }],
    });
    expect(posted.statusCode, posted.body).toBe(202);
    await runDue();
    expect(rx.requests[0]!.verifiedWith).toEqual([j.webhook_secret]);
    const body = JSON.parse(rx.requests[0]!.body);
    expect(body.journey).toEqual({ id: j.id, version: 1, step: 'crm' });
    expect(body.entrant).toEqual({ user_id: user });
    expect(body.event).toMatchObject({ name: 'checkout', properties: { total: 42 } });
  });

  it('webhook: no answer or a 503 is tried again after a backoff with the same request id; the last failure leads by on_failure', async () => {
    clock.set(T0);
    const j = await createWithSecret(webhookJourney({ max_attempts: 2 }));
    rx.verifyWith(j.webhook_secret!);
    const d = await device();
    rx.answerNext({ status: 503, headers: { 'retry-after': '120' } }, { status: 503 });
    await enter(j.id, { device_id: d });
    await runDue();
    expect(rx.failures).toHaveLength(1);
    let entry = await history(j.id, `device:${d}`);
    expect(entry).toMatchObject({ step: 'crm', phase: 'waiting' });
    const retry = entry.history.at(-1)!;
    expect(retry).toMatchObject({ what: 'webhook', status: 503, attempt: 1 });
    // the receiver's Retry-After holds it back at least that long
    expect(Date.parse(retry.until as string) - Date.parse(T0)).toBeGreaterThanOrEqual(2 * MINUTE);
    clock.advance(MINUTE);
    await runDue();
    expect(rx.failures).toHaveLength(1);
    clock.set(new Date(Date.parse(retry.until as string)));
    await runDue();
    await runDue();
    expect(rx.failures).toHaveLength(2);
    const [first, second] = rx.failures;
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(JSON.parse(second!.body).attempt).toBe(2);
    expect(second!.verifiedWith).toEqual([j.webhook_secret]);
    entry = await history(j.id, `device:${d}`);
    expect(entry.history.filter((x) => x.what === 'webhook').at(-1)).toMatchObject({ status: 503, attempt: 2, to: 'sorry' });
    expect(await sentSteps(j.id)).toEqual(['sorry']);
    expect((await stepCounts(j.id)).crm).toMatchObject({ entered: 1, waiting: 0, passed: 1 });
  });

  it('webhook: a 4xx is not tried again; no answer within the timeout is', async () => {
    clock.set(T0);
    const j = await createWithSecret(webhookJourney());
    const [refused, slow] = [await device(), await device()];
    rx.answerNext({ status: 422 });
    await enter(j.id, { device_id: refused });
    await runDue();
    await runDue();
    expect((await history(j.id, `device:${refused}`)).history.find((x) => x.what === 'webhook')).toMatchObject({
      status: 422,
      to: 'sorry',
    });
    rx.answerNext({ status: 200, delayMs: 2500 });
    await enter(j.id, { device_id: slow });
    await runDue();
    const waiting = (await history(j.id, `device:${slow}`)).history.at(-1)!;
    expect(waiting).toMatchObject({ what: 'webhook', attempt: 1 });
    expect(waiting.error).toMatch(/no answer within 1500 ms/);
    expect(waiting).not.toHaveProperty('status');
  });

  it('webhook: an address the guard refuses is a 400 naming the step, and no entrant is called there', async () => {
    const res = await call(h, 'POST', '/v6/journeys', app.keys.write, {
      journey: { name: 'X', trigger: { api: true }, steps: [{ id: 'meta', type: 'webhook', url: 'https://169.254.169.254/latest' }] },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/^journey\.steps\[0\]\.url: must not be a loopback/);
    const plain = await call(h, 'POST', '/v6/journeys', app.keys.write, {
      journey: { name: 'X', trigger: { api: true }, steps: [{ id: 'meta', type: 'webhook', url: 'http://hooks.example.com/' }] },
    });
    expect(plain.statusCode).toBe(400);
    expect(plain.json().error).toMatch(/^journey\.steps\[0\]\.url: must be an https URL/);
  });

  it('digest: counts the events of its name the entrant records in its window, then goes on once with the count', async () => {
    clock.set(T0);
    const j = await createWithSecret({
      steps: [
        { id: 'gather', type: 'digest', event: 'like', window: '1h' },
        { id: 'enough', type: 'branch', filters: [], digest_count: { at_least: 1 }, else: 'end' },
        { id: 'tell', type: 'send', notification: { payload: { alert: '{{ data.digest.count }} new likes' } } },
      ],
    });
    const [d, quiet] = [await device(), await device()];
    // events before the window are not counted
    await event(d, 'like');
    await enter(j.id, { device_id: d });
    await enter(j.id, { device_id: quiet });
    await runDue();
    for (let i = 0; i < 3; i++) await event(d, 'like');
    await event(d, 'comment');
    clock.advance(30 * MINUTE);
    await runDue();
    expect(await sentSteps(j.id)).toEqual([]);
    clock.advance(30 * MINUTE);
    await runDue();
    await runDue();
    const entry = await history(j.id, `device:${d}`);
    expect(entry.history.find((x) => x.what === 'digest')).toEqual({
      at: new Date(Date.parse(T0) + HOUR).toISOString(),
      step: 'gather',
      what: 'digest',
      event: 'like',
      count: 3,
      to: 'enough',
    });
    expect(entry.history.find((x) => x.what === 'branch')).toMatchObject({ read: { digest_count: 3 }, matched: true, to: 'tell' });
    const quietHistory = (await history(j.id, `device:${quiet}`)).history;
    expect(quietHistory.find((x) => x.what === 'digest')).toMatchObject({ count: 0 });
    // a branch reads the count: none, no push
    expect(quietHistory.find((x) => x.what === 'branch')).toMatchObject({ read: { digest_count: 0 }, matched: false, to: 'end' });
    // the send renders each entrant's count
    const rows = await h.db.db
      .selectFrom('notifications')
      .select('template_data')
      .where(sql<boolean>`request->'journey'->>'id' = ${j.id}`)
      .execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]!.template_data).toEqual({ data_by: { user_id: {}, device_id: { [d]: { digest: { event: 'like', count: 3 } } } } });
    expect((await stepCounts(j.id)).gather).toMatchObject({ entered: 2, waiting: 0, passed: 2 });
  });
});
