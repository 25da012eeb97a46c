import { systemClock } from '../../src/platform/clock.js';
import { createContext } from '../../src/app/context.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.js';
import { buildServer } from '../../src/http/server.js';
import { jobSpecs } from '../../src/delivery/jobs.js';
import { JobQueues } from '../../src/delivery/queues.js';
import { useHarness, redisUrl } from '../helpers/harness.js';
import { get, ISO_MS, postNotification, UUID, type AppWithKeys } from './support.js';

/** Response shapes field by field, cross-app isolation, and the ops endpoints. */

const near = (ms: string, before: number, after: number) => {
  const t = Date.parse(ms);
  return t >= before - 5 && t <= after + 5;
};

describe('response shapes', () => {
  const h = useHarness();
  let app: AppWithKeys;
  let other: AppWithKeys;
  beforeAll(async () => {
    app = await h.createApp();
    other = await h.createApp();
  });

  it('create answers 201 with exactly id, created_at, state, to and the submitted notification', async () => {
    const notification = { to: [{ name: 'locale', criteria: ['fr_FR'] }], payload: { alert: 'Bonjour', badge: 3, extra: { k: [1, 2] } } };
    const before = Date.now();
    const res = await postNotification(h, app.keys.write, { notification });
    const after = Date.now();
    expect(res.statusCode).toBe(201);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['created_at', 'id', 'notification', 'state', 'to']);
    expect(body.id).toMatch(UUID);
    expect(body.created_at).toMatch(ISO_MS);
    expect(near(body.created_at, before, after)).toBe(true);
    expect(body.state).toBe('scheduled');
    expect(body.to).toStrictEqual({ id: expect.stringMatching(UUID), type: 'Audience' });
    expect(body.notification).toStrictEqual(notification);
  });

  it('the create answer of a scheduled, local-time or paced notification echoes its send_at, local_time and throttle', async () => {
    const inAMonth = new Date(Date.now() + 30 * 86_400_000).toISOString();
    const notifications = [
      { to: '*', payload: { alert: 'later' }, send_at: `${inAMonth.slice(0, 19)}+01:00`, ttl: 600, priority: 'high' },
      { to: [{ name: 'tags', criteria: ['promo'] }], payload: { alert: 'at 9' }, send_at: inAMonth.slice(0, 16), local_time: true },
      { to: '*', payload: { alert: 'paced' }, throttle: { per_minute: 100000 } },
    ];
    for (const notification of notifications) {
      const res = await postNotification(h, app.keys.write, { notification });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().notification).toStrictEqual(notification);
      const read = await get(h, app.keys.read, `/v6/notifications/${res.json().id}`);
      expect(read.json().notification).toStrictEqual(notification);
    }
  });

  it.each(['v3', 'v5', 'v6'] as const)('/%s/notifications answers the same shape', async (version) => {
    const res = await postNotification(h, app.keys.write, { notification: { to: '*', payload: { alert: version } } }, { version });
    expect(res.statusCode).toBe(201);
    expect(Object.keys(res.json()).sort()).toEqual(['created_at', 'id', 'notification', 'state', 'to']);
    expect(res.json().notification).toStrictEqual({ to: '*', payload: { alert: version } });
  });

  it('GET /v6/audiences/:id answers {audience: {name, created_at, updated_at, id, test, device_count}}', async () => {
    const created = (
      await postNotification(h, app.keys.write, {
        notification: { to: [{ name: 'locale', criteria: ['en_GB'] }], payload: { alert: 'x' } },
      })
    ).json();
    const res = await get(h, app.keys.read, `/v6/audiences/${created.to.id}`);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body)).toEqual(['audience']);
    expect(Object.keys(body.audience).sort()).toEqual(['created_at', 'device_count', 'id', 'name', 'test', 'updated_at']);
    expect(body.audience.id).toBe(created.to.id);
    expect(body.audience.name).toMatch(/^api_audience_[A-Za-z0-9_-]+$/);
    expect(body.audience.created_at).toMatch(ISO_MS);
    expect(body.audience.updated_at).toMatch(ISO_MS);
    expect(Date.parse(body.audience.updated_at)).toBeGreaterThanOrEqual(Date.parse(body.audience.created_at));
    expect(body.audience.device_count).toBe(0);
    expect(body.audience.test).toBe(false);
  });

  it('two on-the-fly audiences get different generated names', async () => {
    const a = (
      await postNotification(h, app.keys.write, { notification: { to: [{ name: 'country', criteria: ['A1'] }], payload: { alert: 'x' } } })
    ).json();
    const b = (
      await postNotification(h, app.keys.write, { notification: { to: [{ name: 'country', criteria: ['B2'] }], payload: { alert: 'x' } } })
    ).json();
    const [na, nb] = await Promise.all(
      [a, b].map(async (n) => (await get(h, app.keys.read, `/v6/audiences/${n.to.id}`)).json().audience.name),
    );
    expect(na).not.toBe(nb);
  });

  it('device_count counts the live devices the audience selects', async () => {
    const fresh = await h.createApp();
    const devices = [
      { locale: 'fr_FR', erased_at: null },
      { locale: 'fr_FR', erased_at: null },
      { locale: 'de_DE', erased_at: null },
      { locale: 'fr_FR', erased_at: new Date() }, // erased: never counted
    ];
    await h.db.db
      .insertInto('devices')
      .values(
        devices.map((d, i) => ({
          app_id: fresh.app.id,
          platform: i % 2 ? ('ios' as const) : ('android' as const),
          token: `tok-${i}-${fresh.app.id}`,
          ...d,
        })),
      )
      .execute();
    // a device of another app never counts
    await h.db.db
      .insertInto('devices')
      .values({ app_id: other.app.id, platform: 'ios', token: `tok-other-${other.app.id}`, locale: 'fr_FR' })
      .execute();

    const fr = (
      await postNotification(h, fresh.keys.write, {
        notification: { to: [{ name: 'locale', criteria: ['fr_FR'] }], payload: { alert: 'x' } },
      })
    ).json();
    const all = (await postNotification(h, fresh.keys.write, { notification: { to: '*', payload: { alert: 'x' } } })).json();
    expect((await get(h, fresh.keys.read, `/v6/audiences/${fr.to.id}`)).json().audience.device_count).toBe(2);
    expect((await get(h, fresh.keys.read, `/v6/audiences/${all.to.id}`)).json().audience.device_count).toBe(3);
  });

  it('GET /v6/notifications/:id answers the record with the submitted notification', async () => {
    const notification = { to: '*', payload: { alert: 'record', sound: 'default', custom: { a: 1 } } };
    const created = (await postNotification(h, app.keys.write, { notification })).json();
    const res = await get(h, app.keys.read, `/v6/notifications/${created.id}`);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      id: created.id,
      created_at: created.created_at,
      state: 'scheduled',
      to: created.to,
      notification,
      devices_targeted: 0,
      pushes_succeeded: 0,
      pushes_failed: 0,
      published_at: null,
      finished_at: null,
    });
    expect(body.updated_at).toMatch(ISO_MS);
    // every timestamp the record carries is ISO 8601 with milliseconds, UTC
    for (const [k, v] of Object.entries(body)) if (k.endsWith('_at') && v !== null) expect(v, k).toMatch(ISO_MS);
  });

  it('GET /v6/stats/notifications/:id/events answers the stats of that notification', async () => {
    const created = (await postNotification(h, app.keys.write, { notification: { to: '*', payload: { alert: 'stats text' } } })).json();
    const res = await get(h, app.keys.read, `/v6/stats/notifications/${created.id}/events`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      id: created.id,
      audience_id: created.to.id,
      push_text: 'stats text',
      published_time: null,
      pushes_succeeded: 0,
      pushes_rejected: 0,
    });
  });

  it('a collapse_key makes a later request the same notification, payload updated', async () => {
    const first = (
      await postNotification(h, app.keys.write, { notification: { to: '*', payload: { alert: 'v1', collapse_key: 'score' } } })
    ).json();
    const second = await postNotification(h, app.keys.write, {
      notification: { to: '*', payload: { alert: 'v2', collapse_key: 'score' } },
    });
    expect(second.statusCode).toBe(201);
    expect(second.json().id).toBe(first.id);
    expect(second.json().notification.payload).toEqual({ alert: 'v2', collapse_key: 'score' });
    expect((await get(h, app.keys.read, `/v6/notifications/${first.id}`)).json().notification.payload.alert).toBe('v2');
    // the same key in another app is another notification
    const theirs = (
      await postNotification(h, other.keys.write, { notification: { to: '*', payload: { alert: 'v1', collapse_key: 'score' } } })
    ).json();
    expect(theirs.id).not.toBe(first.id);
  });

  describe('another app, an unknown or a malformed id -> 404', () => {
    let mine: { id: string; to: { id: string } };
    beforeAll(async () => {
      mine = (
        await postNotification(h, app.keys.write, {
          notification: { to: [{ name: 'locale', criteria: ['pt_BR'] }], payload: { alert: 'mine' } },
        })
      ).json();
    });

    it.each([
      ['notification', (id: string) => `/v6/notifications/${id}`, 'notification not found', () => mine.id],
      ['stats', (id: string) => `/v6/stats/notifications/${id}/events`, 'notification not found', () => mine.id],
      ['audience', (id: string) => `/v6/audiences/${id}`, 'audience not found', () => mine.to.id],
    ])('%s', async (_what, url, error, ownId) => {
      expect((await get(h, app.keys.read, url(ownId()))).statusCode).toBe(200);
      for (const [key, id] of [
        [other.keys.read, ownId()],
        [other.keys.write, ownId()],
        [app.keys.read, '00000000-0000-4000-8000-000000000000'],
        [app.keys.read, 'not-a-uuid'],
        [app.keys.read, "1' or '1'='1"],
      ] as const) {
        const res = await get(h, key, url(encodeURIComponent(id)));
        expect(res.json()).toEqual({ error });
        expect(res.statusCode).toBe(404);
      }
    });
  });

  it('an unknown route answers 404 {"error":"not found"}', async () => {
    const res = await get(h, app.keys.read, '/v6/nothing-here');
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: 'not found' });
  });

  it('GET /health answers 200 without credentials', async () => {
    const res = await h.server.inject({ method: 'GET', url: '/health' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok' });
  });

  it('GET /ready checks the database and the queue', async () => {
    const res = await h.server.inject({ method: 'GET', url: '/ready' });
    expect(res.json()).toEqual({ status: 'ok', checks: { database: 'ok', queue: 'ok' } });
    expect(res.statusCode).toBe(200);
  });

  it('GET /documentation/json is an OpenAPI 3 document with the API paths', async () => {
    const res = await h.server.inject({ method: 'GET', url: '/documentation/json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.info.title).toBe('pushd');
    for (const v of ['v3', 'v5', 'v6']) expect(doc.paths[`/${v}/notifications`]?.post, v).toBeDefined();
    expect(doc.paths['/v6/notifications/{id}']?.get).toBeDefined();
    expect(doc.paths['/v6/audiences/{id}']?.get).toBeDefined();
    // the request body schema documents the envelope
    const schema = doc.paths['/v6/notifications'].post.requestBody.content['application/json'].schema;
    expect(schema.properties.notification).toBeDefined();
    expect(schema.required).toContain('notification');
  });
});

describe('GET /ready when the database and queue store are unreachable', () => {
  const h = useHarness();

  it('answers 503 naming what is down, while /health stays 200', async () => {
    const deadUrl = 'postgres://postgres@127.0.0.1:1/none';
    const db = openDatabase(deadUrl);
    const queues = new JobQueues({ kind: 'postgres', databaseUrl: deadUrl, prefix: 'ready_test' }, jobSpecs({ deliveryAttempts: 1 }));
    // the real wiring, on a database and a queue store that do not answer
    const ctx = createContext({
      config: h.config,
      log: h.ctx.log,
      db: db.db,
      queues,
      scheduler: { schedule: async () => undefined, deliver: async () => undefined, decideWinner: async () => undefined },
      gateways: { get: () => ({ send: async () => [], close: async () => undefined }), close: async () => undefined },
      metrics: h.ctx.metrics,
      clock: systemClock,
      secrets: h.secrets,
    });
    const server = await buildServer(ctx);
    try {
      const res = await server.inject({ method: 'GET', url: '/ready' });
      expect(res.json()).toEqual({ status: 'unavailable', checks: { database: 'unreachable', queue: 'unreachable' } });
      expect(res.statusCode).toBe(503);
      expect((await server.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
    } finally {
      await server.close();
      await queues.close().catch(() => undefined);
      await db.close().catch(() => undefined);
    }
  });
});

describe.runIf(redisUrl())('GET /ready on the Redis queue backend', () => {
  const h = useHarness({ queue: 'redis' });

  it('answers 200 with the queue reachable', async () => {
    const res = await h.server.inject({ method: 'GET', url: '/ready' });
    expect(res.json()).toEqual({ status: 'ok', checks: { database: 'ok', queue: 'ok' } });
  });
});
