import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';

/**
 * Idempotency-Key on the creating POSTs: a retry with the key answers the first answer and creates nothing, even
 * when the retries race the first request; the workers run, so a replay that enqueued again would deliver twice.
 */
/** What the README's example puts in the header: a random key from tools every Unix machine has. */
const README_KEY_COMMAND = "od -An -N16 -tx1 /dev/urandom | tr -d ' \\n'";

describe('Idempotency-Key', () => {
  let h: Harness;
  let gw: Gateways;
  let app: { id: string; keys: { read: string; write: string; sdk: string } };
  let device: RegisteredDevice;

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, env: { ...gw.env, RETRY_BASE_MS: '20', TRANSACTIONAL_TIMEOUT_MS: '5000' } });
    const created = await h.createApp();
    app = { id: created.app.id, keys: created.keys };
    await setCredentials(h, app.id, gw);
    device = await registerDevice(h, app.keys.sdk, { platform: 'android', user_id: 'ana' });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });
  beforeEach(() => {
    gw.reset();
    gw.fcm.faults.clear();
  });

  const nobody = [{ name: 'tags', criteria: ['nobody-has-this-tag'] }];
  const newKey = () => `key-${randomBytes(8).toString('hex')}`;
  const post = (url: string, body: unknown, key: string | undefined, apiKey = app.keys.write) =>
    h.server.inject({
      method: 'POST',
      url,
      headers: { authorization: basic(apiKey), ...(key === undefined ? {} : { 'idempotency-key': key }) },
      payload: body as Record<string, unknown>,
    });
  // By default to an audience no device is in, so that only the tests that count pushes send any.
  const notification = (alert: string, to: unknown = nobody) => ({ notification: { to, payload: { alert } } });
  const notificationsOf = async (appId: string) =>
    (await h.db.db.selectFrom('notifications').select('id').where('app_id', '=', appId).orderBy('id').execute()).map((r) => r.id);
  const pushesTo = (token: string) => gw.fcm.pushes.filter((p) => p.token === token).length;
  const finished = (id: string) =>
    waitFor(`notification ${id} to finish`, async () => {
      const n = await h.db.db.selectFrom('notifications').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      return n.state === 'sent' || n.state === 'failed' ? n : null;
    });

  describe('POST /v6/notifications', () => {
    it('the same key and body answer the first answer again and create nothing; key order does not matter', async () => {
      const key = newKey();
      const before = await notificationsOf(app.id);
      const first = await post('/v6/notifications', { notification: { to: nobody, payload: { alert: 'once', badge: 1 } } }, key);
      expect(first.statusCode, first.body).toBe(201);
      expect(first.headers['idempotent-replayed']).toBeUndefined();

      const again = await post('/v6/notifications', { notification: { payload: { badge: 1, alert: 'once' }, to: nobody } }, key);
      expect(again.statusCode).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toBe(first.body);
      expect(await notificationsOf(app.id)).toEqual([...before, first.json().id].sort());
      const stored = await h.db.db.selectFrom('idempotency_keys').selectAll().where('app_id', '=', app.id).where('key', '=', key).execute();
      expect(stored).toMatchObject([{ status: 201, body: first.json(), resource_id: null }]);
    });

    it('the same key with another body, or on another route, answers 422 and creates nothing', async () => {
      const key = newKey();
      expect((await post('/v6/notifications', notification('first'), key)).statusCode).toBe(201);
      const before = await notificationsOf(app.id);
      for (const [url, body] of [
        ['/v6/notifications', notification('second')],
        ['/v5/notifications', notification('first')],
      ] as const) {
        const res = await post(url, body, key);
        expect(res.statusCode, url).toBe(422);
        expect(res.json().error).toMatch(/^Idempotency-Key: /);
      }
      expect(await notificationsOf(app.id)).toEqual(before);
    });

    it('20 concurrent requests with one key create one notification and all answer it identically', async () => {
      const key = newKey();
      const before = await notificationsOf(app.id);
      const answers = await Promise.all(Array.from({ length: 20 }, () => post('/v6/notifications', notification('race'), key)));
      expect(new Set(answers.map((a) => a.statusCode))).toEqual(new Set([201]));
      expect(new Set(answers.map((a) => a.body)).size).toBe(1);
      expect(answers.filter((a) => a.headers['idempotent-replayed'] === 'true')).toHaveLength(19);
      expect(await notificationsOf(app.id)).toEqual([...before, answers[0]!.json().id].sort());
    });

    it('keys are per app: two apps with the same key get a notification each', async () => {
      const other = await h.createApp();
      const key = newKey();
      const mine = await post('/v6/notifications', notification('per app'), key);
      const theirs = await post('/v6/notifications', notification('per app'), key, other.keys.write);
      expect([mine.statusCode, theirs.statusCode]).toEqual([201, 201]);
      expect(theirs.headers['idempotent-replayed']).toBeUndefined();
      expect(theirs.json().id).not.toBe(mine.json().id);
      expect(await notificationsOf(other.app.id)).toEqual([theirs.json().id]);
    });

    it('a key older than 24 hours is free again', async () => {
      const key = newKey();
      const first = await post('/v6/notifications', notification('daily'), key);
      await h.db.db
        .updateTable('idempotency_keys')
        .set({ created_at: sql<Date>`now() - interval '24 hours 1 second'` })
        .where('app_id', '=', app.id)
        .where('key', '=', key)
        .execute();
      const later = await post('/v6/notifications', notification('daily'), key);
      expect(later.statusCode).toBe(201);
      expect(later.headers['idempotent-replayed']).toBeUndefined();
      expect(later.json().id).not.toBe(first.json().id);
      // and the key now answers the new notification
      expect((await post('/v6/notifications', notification('daily'), key)).body).toBe(later.body);
    });

    it('a request that fails records nothing: the key stays free', async () => {
      const key = newKey();
      const missing = await post('/v6/notifications', notification('nowhere', { audience: '00000000-0000-4000-8000-000000000000' }), key);
      expect(missing.statusCode).toBe(404);
      const res = await post('/v6/notifications', notification('somewhere'), key);
      expect(res.statusCode).toBe(201);
      expect(res.headers['idempotent-replayed']).toBeUndefined();
    });

    it.each([
      ['empty', ''],
      ['with a space', 'a key'],
      ['too long', 'k'.repeat(256)],
      ['not ASCII', 'clé'],
    ])('a key %s answers 400 and creates nothing', async (_what, key) => {
      const before = await notificationsOf(app.id);
      const res = await post('/v6/notifications', notification('bad key'), key);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatch(/^Idempotency-Key: /);
      expect(await notificationsOf(app.id)).toEqual(before);
    });

    it('255 visible characters are a key', async () => {
      const key = '!~'.repeat(127) + 'k';
      expect((await post('/v6/notifications', notification('long key'), key)).statusCode).toBe(201);
    });

    it("the README's key, made with od from /dev/urandom (no uuidgen on a fresh Debian), is a key", async () => {
      const key = execFileSync('sh', ['-c', README_KEY_COMMAND], { encoding: 'utf8' });
      expect(key).toMatch(/^[0-9a-f]{32}$/);
      const first = await post('/v6/notifications', notification('readme key'), key);
      expect(first.statusCode, first.body).toBe(201);
      const again = await post('/v6/notifications', notification('readme key'), key);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toBe(first.body);
    });

    it('a replay enqueues nothing: the device gets the push once', async () => {
      const key = newKey();
      const body = notification('exactly once', [{ name: 'device_id', criteria: [device.id] }]);
      const first = await post('/v6/notifications', body, key);
      expect(first.statusCode).toBe(201);
      await finished(first.json().id);
      expect(pushesTo(device.token)).toBe(1);

      const again = await post('/v6/notifications', body, key);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json()).toEqual(first.json()); // a notification cut at insert answers its first answer too
      // a second enqueue would be delivered within this time (the first one was)
      await new Promise((r) => setTimeout(r, 1000));
      expect(pushesTo(device.token)).toBe(1);
      const batches = await h.db.db.selectFrom('delivery_batches').select('seq').where('notification_id', '=', first.json().id).execute();
      expect(batches).toHaveLength(1);
    });
  });

  describe('POST /v6/transactional/notifications', () => {
    const transactional = (alert: string) => ({
      to: { field: 'device_id', value: device.id },
      group: 'receipts',
      notification: { payload: { alert } },
    });

    it('a replay answers the outcome of the first send and sends nothing', async () => {
      const key = newKey();
      const first = await post('/v6/transactional/notifications', transactional('sent once'), key);
      expect(first.statusCode, first.body).toBe(200);
      expect(first.json().results).toEqual({ success: 1, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 });
      const again = await post('/v6/transactional/notifications', transactional('sent once'), key);
      expect(again.statusCode).toBe(200);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toBe(first.body);
      expect(pushesTo(device.token)).toBe(1);
      expect((await post('/v6/transactional/notifications', transactional('another'), key)).statusCode).toBe(422);
    });

    it('a retry while the first is still sending answers 409 naming its notification, then the answer once it is sent', async () => {
      const key = newKey();
      // 3.5 s: the retry below comes while the first still sends on a busy machine too (under the 5 s timeout)
      gw.fcm.faults.forToken(device.token, { type: 'delay', ms: 3500 }, 1);
      const first = post('/v6/transactional/notifications', transactional('slow'), key);
      const id = await waitFor('the first send to commit', async () => {
        const row = await h.db.db
          .selectFrom('idempotency_keys')
          .select('resource_id')
          .where('app_id', '=', app.id)
          .where('key', '=', key)
          .executeTakeFirst();
        return row?.resource_id;
      });
      const meanwhile = await post('/v6/transactional/notifications', transactional('slow'), key);
      expect(meanwhile.statusCode).toBe(409);
      expect(meanwhile.json().error).toMatch(new RegExp(`^Idempotency-Key: .*${id}`));

      const answered = await first;
      expect(answered.json()).toEqual({ id, results: { success: 1, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 } });
      const after = await post('/v6/transactional/notifications', transactional('slow'), key);
      expect(after.headers['idempotent-replayed']).toBe('true');
      expect(after.body).toBe(answered.body);
      expect(pushesTo(device.token)).toBe(1);
    });
  });

  describe('devices and events', () => {
    it('registering with a key: a retry answers the same 201 and device, not a merge', async () => {
      const key = newKey();
      const body = { device: { platform: 'ios', token: randomBytes(32).toString('hex'), locale: 'fr_FR' } };
      const first = await post('/v6/devices', body, key, app.keys.sdk);
      expect(first.statusCode).toBe(201);
      const again = await post('/v6/devices', body, key, app.keys.sdk);
      expect(again.statusCode).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      // the same answer but the device's credential, which is answered once and kept nowhere in plain
      const { credential, ...device } = first.json().device;
      expect(credential).toEqual(expect.any(String));
      expect(again.json()).toEqual({ ...first.json(), device });
      const kept = await h.db.db.selectFrom('idempotency_keys').selectAll().where('key', '=', key).execute();
      expect(kept).toHaveLength(1);
      expect(JSON.stringify(kept)).not.toContain(credential);
      // without the key the same token is the merge answer, as before
      expect((await post('/v6/devices', body, undefined, app.keys.sdk)).statusCode).toBe(200);
    });

    it('events posted twice with one key count once, for a device and for a user', async () => {
      const events = { events: [{ name: 'purchase' }] };
      for (const url of [`/v6/devices/${device.id}/events`, '/v6/users/ana/events']) {
        const key = newKey();
        expect((await post(url, events, key)).statusCode).toBe(202);
        const again = await post(url, events, key);
        expect(again.statusCode).toBe(202);
        expect(again.headers['idempotent-replayed']).toBe('true');
      }
      const counted = await h.db.db
        .selectFrom('device_events')
        .select('count')
        .where('device_id', '=', device.id)
        .where('name', '=', 'purchase')
        .executeTakeFirstOrThrow();
      expect(counted.count).toBe(2); // one per URL
    });
  });

  it('the OpenAPI document declares the header on each create', async () => {
    const doc = (await h.server.inject({ method: 'GET', url: '/documentation/json' })).json() as {
      paths: Record<string, Record<string, { parameters?: { in: string; name: string }[] }>>;
    };
    const creates = ['/v3/notifications', '/v5/notifications', '/v6/notifications', '/v6/transactional/notifications', '/v6/devices'];
    for (const path of [...creates, '/v6/devices/{id}/events', '/v6/users/{user_id}/events']) {
      expect(doc.paths[path]!.post!.parameters, path).toContainEqual(expect.objectContaining({ in: 'header', name: 'idempotency-key' }));
    }
  });
});
