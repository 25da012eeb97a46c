import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { basic, useHarness } from '../helpers/harness.js';
import { registerDevice } from '../helpers/gateways.js';
import { generateApnsKey, generateServiceAccount } from '../mocks/index.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { CLI_ACTOR } from '../../src/domain/audit.js';

/**
 * The audit log: each change of consequence gets its row, made by the request's key (its id and role, the client
 * address, the request's id) or by the command line, with names and ids but no secret; written in the change's own
 * transaction (a refused row takes its change with it); read with a write key of the app only, by time, action and
 * notification, in cursor pages. A notification to a few devices keeps its actor on its own row.
 */
const h = useHarness({ env: { TRANSACTIONAL_TIMEOUT_MS: '500' } });

interface Entry {
  id: string;
  at: string;
  app_id: string;
  action: string;
  actor: { key_id: string | null; role: string };
  client_address: string | null;
  request_id: string | null;
  details: Record<string, unknown>;
}
type Created = Awaited<ReturnType<typeof h.createApp>>;

let app: Created;
let other: Created;
/** the app's key ids by role, as its `app.created` row names them */
let keyIds: Record<'read' | 'write' | 'sdk', string>;

const call = (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, key: string, payload?: unknown, headers = {}) =>
  h.server.inject({ method, url, headers: { authorization: basic(key), ...headers }, payload: payload as Record<string, unknown> });
const audit = (key: string, query = '') => call('GET', `/v6/audit${query}`, key);
const entries = async (query = '', key = app.keys.write): Promise<Entry[]> => {
  const res = await audit(key, query);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().entries;
};
/** The docs' cart-abandonment journey. */
const cartJourney = () => ({
  name: 'Cart reminder',
  trigger: { event: 'cart_abandoned' },
  exit_on: ['purchase'],
  steps: [{ id: 'wait', type: 'delay', duration: '1h' }],
});
const latest = async (action: string) => (await entries(`?action=${action}`))[0]!;

beforeAll(async () => {
  app = await h.createApp('com.example.audit');
  other = await h.createApp('com.example.audit-other');
  keyIds = (await latest('app.created')).details.key_ids as typeof keyIds;
});

describe('GET /v6/audit', () => {
  it('answers a write key its own app rows; a read or sdk key 403; another app sees none of them', async () => {
    expect((await audit(app.keys.read)).statusCode).toBe(403);
    expect((await audit(app.keys.sdk)).statusCode).toBe(403);
    expect((await audit('not-a-key')).statusCode).toBe(401);
    const own = await entries();
    expect(own.map((e) => e.action)).toEqual(['identity_verification.off', 'app.created']);
    expect(own.every((e) => e.app_id === app.app.id)).toBe(true);
    expect(own[1]).toMatchObject({
      actor: { key_id: null, role: 'cli' },
      client_address: null,
      request_id: null,
      details: { bundle_id: 'com.example.audit', name: 'com.example.audit' },
    });
    const theirs = await entries('', other.keys.write);
    expect(theirs.length).toBe(2);
    expect(theirs.every((e) => e.app_id === other.app.id)).toBe(true);
    expect(theirs.map((e) => e.id).filter((id) => own.some((o) => o.id === id))).toEqual([]);
  });

  it('records each operator change by cli, naming what changed and never a secret', async () => {
    const service = new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() });
    const id = app.app.id;
    const { key } = await service.createKey(id, 'read', CLI_ACTOR);
    await service.setKeyRateLimit(key, { perSecond: 5, burst: 10 }, CLI_ACTOR);
    await service.setKeyRateLimit(key, null, CLI_ACTOR);
    await service.revokeKey(key, CLI_ACTOR);
    const apns = generateApnsKey();
    await service.setPushCredentials(id, 'apns', apns.credentials, CLI_ACTOR);
    const fcm = generateServiceAccount();
    await service.setPushCredentials(id, 'fcm', fcm.json, CLI_ACTOR);
    await service.setWebPush(id, { subject: 'mailto:ops@example.com' }, CLI_ACTOR);
    const hmsSecret = `hms-secret-${randomUUID()}`;
    await service.setHms(id, { hmsAppId: '10000001', clientSecret: hmsSecret }, CLI_ACTOR);
    const on = await service.setIdentityVerification(id, 'on', CLI_ACTOR);
    const rotated = await service.setIdentityVerification(id, 'rotate', CLI_ACTOR);
    await service.setIdentityVerification(id, 'off', CLI_ACTOR);
    await service.setLimits(id, { maxPerMinute: null, defaultTimeZone: 'Europe/Paris' }, CLI_ACTOR);
    // what was refused changed nothing and recorded nothing
    await expect(service.revokeKey(key, CLI_ACTOR)).rejects.toThrow('active key');
    await expect(service.setLimits(randomUUID(), { maxPerMinute: 1 }, CLI_ACTOR)).rejects.toThrow('app');

    const all = await entries();
    const newKeyId = all.find((e) => e.action === 'key.created')!.details.key_id as string;
    expect(all.slice(0, 12).map((e) => [e.action, e.details])).toEqual([
      ['settings.changed', { changed: ['max_per_minute', 'default_time_zone'] }],
      ['identity_verification.off', {}],
      ['identity_verification.rotated', {}],
      ['identity_verification.on', {}],
      ['credentials.set', { platform: 'hms' }],
      ['credentials.set', { platform: 'web_push' }],
      ['credentials.set', { platform: 'fcm' }],
      ['credentials.set', { platform: 'apns' }],
      ['key.revoked', { key_id: newKeyId, role: 'read' }],
      ['key.limit_set', { key_id: newKeyId, role: 'read', limit: null }],
      ['key.limit_set', { key_id: newKeyId, role: 'read', limit: { per_second: 5, burst: 10 } }],
      ['key.created', { key_id: newKeyId, role: 'read' }],
    ]);
    expect(all.length).toBe(14);
    for (const e of all) expect(e).toMatchObject({ actor: { key_id: null, role: 'cli' }, client_address: null, request_id: null });

    const stored = await h.db.db.selectFrom('apps').select(['web_push_credentials']).where('id', '=', id).executeTakeFirstOrThrow();
    const vapidPrivate = String(h.secrets.openJson(stored.web_push_credentials!, 'web_push_credentials').private_key);
    const pemBody = (pem: string) => pem.split('\n').slice(1, 3).join('');
    const secrets = [
      key,
      ...Object.values(app.keys),
      app.identity_secret,
      on.identity_secret!,
      rotated.identity_secret!,
      pemBody(apns.credentials.keyPem),
      pemBody(fcm.json.private_key),
      vapidPrivate,
      hmsSecret,
    ];
    const text = JSON.stringify(await h.db.db.selectFrom('audit_log').selectAll().execute());
    for (const secret of secrets) expect(secret.length > 10 && text.includes(secret), secret).toBe(false);
  });

  it('records the changes of a write key with its id, role, client address and request id', async () => {
    const device = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
    const settings = await call('PATCH', '/v6/app', app.keys.write, { default_time_zone: 'Europe/Paris', frequency_caps: null });
    expect(settings.statusCode, settings.body).toBe(200);
    const unicast = await call('POST', '/v6/notifications', app.keys.write, {
      notification: { to: [{ name: 'device_id', criteria: [device.id] }], payload: { alert: 'one' } },
    });
    expect(unicast.statusCode, unicast.body).toBe(201);
    const keyed = { notification: { to: [{ name: 'device_id', criteria: [device.id, randomUUID()] }], payload: { alert: 'two' } } };
    const once = await call('POST', '/v6/notifications', app.keys.write, keyed, { 'idempotency-key': 'audit-1' });
    expect(once.statusCode, once.body).toBe(201);
    // a replay creates nothing: no row
    expect((await call('POST', '/v6/notifications', app.keys.write, keyed, { 'idempotency-key': 'audit-1' })).json().id).toBe(
      once.json().id,
    );
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const broadcast = await call('POST', '/v6/notifications', app.keys.write, {
      notification: { to: '*', payload: { alert: 'all' }, send_at: later },
    });
    expect(broadcast.statusCode, broadcast.body).toBe(201);
    expect((await call('DELETE', `/v6/notifications/${broadcast.json().id}`, app.keys.write)).statusCode).toBe(200);
    const sent = await call('POST', '/v6/transactional/notifications', app.keys.write, {
      to: { field: 'device_id', value: device.id },
      group: 'receipts',
      notification: { payload: { alert: 'paid' } },
    });
    expect(sent.statusCode, sent.body).toBe(200);

    const since = `?since=${encodeURIComponent(new Date(Date.now() - 60_000).toISOString())}`;
    // a notification to a few devices is not a change of the app: the log keeps the broadcast, its cancellation and
    // the settings, and answers who sent the others by their id, from their own rows
    const logged = (await entries(since)).filter((e) => e.actor.role === 'write');
    expect(logged.map((e) => [e.action, e.details])).toEqual([
      ['notification.canceled', { notification_id: broadcast.json().id }],
      ['notification.created', { notification_id: broadcast.json().id, audience_size: null }],
      ['settings.changed', { changed: ['default_time_zone', 'frequency_caps'] }],
    ]);
    const senders = await Promise.all([sent, once, unicast].map(async (r) => entries(`?notification_id=${r.json().id}`)));
    expect(senders.map((rows) => rows.map((e) => [e.id, e.action, e.details]))).toEqual([
      [[sent.json().id, 'notification.created', { notification_id: sent.json().id, audience_size: 1, transactional: true }]],
      [[once.json().id, 'notification.created', { notification_id: once.json().id, audience_size: 1 }]],
      [[unicast.json().id, 'notification.created', { notification_id: unicast.json().id, audience_size: 1 }]],
    ]);
    const byKey = [...logged, ...senders.flat()];
    for (const e of byKey) {
      expect(e.actor).toEqual({ key_id: keyIds.write, role: 'write' });
      expect(e.client_address).toBe('127.0.0.1');
      expect(e.request_id).toMatch(/\S/);
    }
    expect(new Set(byKey.map((e) => e.request_id)).size).toBe(byKey.length);
    expect(senders[2]![0]!.at).toBe(new Date(unicast.json().created_at).toISOString());
  });

  it("answers a notification's rows by its id: a broadcast's from the log, a few devices' creation from its row", async () => {
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const broadcast = await call('POST', '/v6/notifications', app.keys.write, {
      notification: { to: '*', payload: { alert: 'all' }, send_at: later },
    });
    expect((await call('DELETE', `/v6/notifications/${broadcast.json().id}`, app.keys.write)).statusCode).toBe(200);
    const rows = await entries(`?notification_id=${broadcast.json().id}`);
    expect(rows.map((e) => e.action)).toEqual(['notification.canceled', 'notification.created']);

    const unicast = await call('POST', '/v6/notifications', app.keys.write, {
      notification: { to: [{ name: 'user_id', criteria: ['nobody-here'] }], payload: { alert: 'one' } },
    });
    expect(unicast.statusCode, unicast.body).toBe(201);
    const id = unicast.json().id as string;
    expect((await entries(`?notification_id=${id}&action=notification.created`)).map((e) => e.id)).toEqual([id]);
    expect(await entries(`?notification_id=${id}&action=notification.canceled`)).toEqual([]);
    expect(await entries(`?notification_id=${id}&until=2000-01-01T00:00:00Z`)).toEqual([]);
    // another app's key, an unknown id and one that is no id find nothing
    expect(await entries(`?notification_id=${id}`, other.keys.write)).toEqual([]);
    expect(await entries(`?notification_id=${randomUUID()}`)).toEqual([]);
    expect(await entries('?notification_id=nope')).toEqual([]);
    // its one row pages as the others do: a cursor past it finds nothing more
    const page = (await audit(app.keys.write, `?notification_id=${id}&per=1`)).json();
    expect(page.entries).toHaveLength(1);
    expect((await audit(app.keys.write, `?notification_id=${id}&cursor=${page.meta.cursor}`)).json().entries).toEqual([]);
  });

  it('filters by since, until and action, and pages newest first with the cursor', async () => {
    const all = await entries('?per=1000');
    expect(all.length).toBeGreaterThan(10);
    const times = all.map((e) => Date.parse(e.at));
    expect([...times].sort((a, b) => b - a)).toEqual(times);

    const created = await entries('?action=notification.created');
    expect(created.length).toBe(all.filter((e) => e.action === 'notification.created').length);
    expect(created.every((e) => e.action === 'notification.created')).toBe(true);

    const middle = all[Math.floor(all.length / 2)]!.at;
    const since = await entries(`?since=${encodeURIComponent(middle)}&per=1000`);
    const until = await entries(`?until=${encodeURIComponent(middle)}&per=1000`);
    expect(since.every((e) => e.at >= middle) && until.every((e) => e.at < middle)).toBe(true);
    expect(since.length + until.length).toBe(all.length);
    expect(await entries('?since=2999-01-01T00:00:00Z')).toEqual([]);

    const paged: Entry[] = [];
    let cursor = '';
    for (;;) {
      const res = await audit(app.keys.write, `?per=3${cursor && `&cursor=${cursor}`}`);
      const page = res.json();
      if (!page.entries.length) break;
      paged.push(...page.entries);
      cursor = page.meta.cursor;
    }
    expect(paged.map((e) => e.id)).toEqual(all.map((e) => e.id));

    expect((await audit(app.keys.write, '?action=app.deleted')).json().error).toMatch(/^querystring.action: must be one of app.created, /);
    expect((await audit(app.keys.write, '?since=yesterday')).json()).toEqual({ error: 'querystring.since: must be an ISO 8601 date' });
    expect((await audit(app.keys.write, '?cursor=nope')).statusCode).toBe(404);
  });

  it("records a journey's changes by the write key; a refused change records nothing", async () => {
    const owner = await h.createApp('com.example.audit-journeys');
    const made = await call('POST', '/v6/journeys', owner.keys.write, { journey: cartJourney() });
    expect(made.statusCode, made.body).toBe(201);
    const id = made.json().journey.id as string;
    const changed = { ...cartJourney(), name: 'Cart reminder v2' };
    expect((await call('PUT', `/v6/journeys/${id}`, owner.keys.write, { journey: changed })).statusCode).toBe(200);
    for (const step of ['pause', 'resume', 'archive'])
      expect((await call('POST', `/v6/journeys/${id}/${step}`, owner.keys.write)).statusCode).toBe(200);
    expect((await call('POST', `/v6/journeys/${id}/resume`, owner.keys.write)).statusCode).toBe(409);
    const rows = (await entries('', owner.keys.write)).filter((e) => e.action.startsWith('journey.'));
    expect(rows.map((e) => [e.action, e.details, e.actor.role])).toEqual([
      ['journey.archived', { journey_id: id }, 'write'],
      ['journey.resumed', { journey_id: id }, 'write'],
      ['journey.paused', { journey_id: id }, 'write'],
      ['journey.updated', { journey_id: id, version: 2 }, 'write'],
      ['journey.created', { journey_id: id, name: 'Cart reminder' }, 'write'],
    ]);
  });

  it('records erasures, in-app messages and journey entries by the key that made them; a user erasure keeps no user id', async () => {
    const owner = await h.createApp('com.example.audit-erasures');
    const lone = await registerDevice(h, owner.keys.sdk, { platform: 'ios' });
    const users = [
      await registerDevice(h, owner.keys.sdk, { platform: 'ios', user_id: 'erased-user' }),
      await registerDevice(h, owner.keys.sdk, { platform: 'android', user_id: 'erased-user' }),
    ];
    const message = await call('POST', '/v6/messages', owner.keys.write, {
      message: { to: [{ name: 'device_id', criteria: [lone.id] }], title: 'Hello', text: 'in the app' },
    });
    expect(message.statusCode, message.body).toBe(201);
    const made = await call('POST', '/v6/journeys', owner.keys.write, {
      journey: { name: 'Onboarding', trigger: { api: true }, steps: [{ id: 'wait', type: 'delay', duration: '1h' }] },
    });
    const journeyId = made.json().journey.id as string;
    const entry = await call('POST', `/v6/journeys/${journeyId}/entries`, owner.keys.write, { device_id: lone.id });
    expect(entry.statusCode, entry.body).toBe(202);
    expect((await call('POST', `/v6/devices/${lone.id}/erase`, owner.keys.write)).statusCode).toBe(200);
    // erasing it again changes nothing: no row
    expect((await call('POST', `/v6/devices/${lone.id}/erase`, owner.keys.write)).statusCode).toBe(200);
    const erasure = await call('DELETE', '/v6/users/erased-user/devices', owner.keys.write);
    expect(erasure.statusCode, erasure.body).toBe(200);

    const rows = (await entries('', owner.keys.write)).filter((e) => e.actor.role !== 'cli' && e.action !== 'journey.created');
    expect(rows.map((e) => [e.action, e.actor.role, e.details])).toEqual([
      ['user.erased', 'write', { device_ids: users.map((d) => d.id).sort() }],
      ['device.erased', 'write', { device_id: lone.id }],
      ['journey.entered', 'write', { journey_id: journeyId, outcome: 'entered' }],
      ['message.created', 'write', { message_id: message.json().id }],
    ]);
    for (const e of rows) expect([e.client_address, e.request_id]).toEqual(['127.0.0.1', expect.stringMatching(/\S/)]);
    expect(JSON.stringify(rows)).not.toContain('erased-user');
  });

  it('writes the row with its change: a refused row leaves the change undone; a few devices write none', async () => {
    const notifications = async () =>
      Number(
        (await sql<{ n: string }>`select count(*) as n from notifications where app_id = ${other.app.id}::uuid`.execute(h.db.db)).rows[0]!
          .n,
      );
    const before = await notifications();
    // the other app's rows of this action are refused from now on (it has none yet)
    await sql`alter table audit_log add constraint refuse_created check (app_id <> ${sql.lit(other.app.id)} or action <> 'notification.created')`.execute(
      h.db.db,
    );
    try {
      const broadcast = await call('POST', '/v6/notifications', other.keys.write, { notification: { to: '*', payload: { alert: 'no' } } });
      expect(broadcast.statusCode).toBe(500);
      expect(await notifications()).toBe(before);
      const unicast = await call('POST', '/v6/notifications', other.keys.write, {
        notification: { to: [{ name: 'device_id', criteria: [randomUUID()] }], payload: { alert: 'no row' } },
      });
      expect(unicast.statusCode).toBe(201);
      expect(await notifications()).toBe(before + 1);
    } finally {
      await sql`alter table audit_log drop constraint refuse_created`.execute(h.db.db);
    }

    const later = new Date(Date.now() + 3_600_000).toISOString();
    const kept = await call('POST', '/v6/notifications', other.keys.write, {
      notification: { to: '*', payload: { alert: 'kept' }, send_at: later },
    });
    await sql`alter table audit_log add constraint refuse_canceled check (app_id <> ${sql.lit(other.app.id)} or action <> 'notification.canceled')`.execute(
      h.db.db,
    );
    try {
      expect((await call('DELETE', `/v6/notifications/${kept.json().id}`, other.keys.write)).statusCode).toBe(500);
      expect((await call('GET', `/v6/notifications/${kept.json().id}`, other.keys.read)).json().state).toBe('scheduled');
    } finally {
      await sql`alter table audit_log drop constraint refuse_canceled`.execute(h.db.db);
    }
    expect((await entries('?action=notification.canceled', other.keys.write)).length).toBe(0);
  });
});
