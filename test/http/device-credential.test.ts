import { createHash, createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { setCredentials, startGateways, type Gateways } from '../helpers/gateways.js';
import { randomApnsToken, randomFcmToken } from '../mocks/index.js';
import { browserSubscription } from '../mocks/web-push-browser.js';
import { call } from './device-support.js';

/**
 * The device credential (docs/identity.md): the sdk key ships in every app and a push token is no secret, so what
 * decides where a device's pushes go and whether it gets them (its token or subscription, platform, development
 * flag, permission) changes only with the secret its registration answered, or its user's proof.
 */
describe('device credential', () => {
  let h: Harness;
  let gw: Gateways;
  let app: Awaited<ReturnType<Harness['createApp']>>;
  const hashOf = (value: string) => createHmac('sha256', app.identity_secret).update(value).digest('hex');

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ env: { ...gw.env, TRANSACTIONAL_TIMEOUT_MS: '3000' } });
    app = await h.createApp('com.example.credential', { identityVerification: true });
    await setCredentials(h, app.app.id, gw);
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  const post = (device: Record<string, unknown>, key = app.keys.sdk) => call(h, 'POST', '/v6/devices', key, { device });
  const put = (id: string, device: Record<string, unknown>, key = app.keys.sdk) => call(h, 'PUT', `/v6/devices/${id}`, key, { device });
  const row = (id: string) => h.db.db.selectFrom('devices').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  const ofUser = (userId: string) => h.db.db.selectFrom('devices').select(['id', 'token']).where('user_id', '=', userId).execute();
  /** a phone the sdk registered for `userId` with its hash: its id, token and credential */
  const phone = async (userId: string | null, token = randomApnsToken()) => {
    const res = await post({ platform: 'ios', token, ...(userId && { user_id: userId, user_id_auth_hash: hashOf(userId) }) });
    expect(res.statusCode, res.body).toBe(201);
    const { id, credential } = res.json().device as { id: string; credential: string };
    return { id, token, credential };
  };
  const transactional = (userId: string) =>
    h.server.inject({
      method: 'POST',
      url: '/v6/transactional/notifications',
      headers: { authorization: basic(app.keys.write) },
      payload: { to: { field: 'user_id', value: userId }, group: 'login', notification: { payload: { alert: `code for ${userId}` } } },
    });

  describe('the two-step takeover of a bound phone (sdk key and its token only)', () => {
    it('is refused at the first step, and the victim keeps receiving its pushes', async () => {
      const victim = await phone('victim-1');
      // 1. the token answers the device id
      const found = await post({ platform: 'ios', token: victim.token });
      expect(found.statusCode, found.body).toBe(200);
      expect(found.json().device.id).toBe(victim.id);
      expect(found.json().device.credential).toBeUndefined();
      // 2. clearing the token by id
      const cleared = await put(victim.id, { token: null });
      expect(cleared.statusCode, cleared.body).toBe(403);
      expect(cleared.json().error).toMatch(/^device\.credential: /);
      // 3. the token as a new device of mallory, with mallory's valid hash
      const taken = await post({ platform: 'ios', token: victim.token, user_id: 'mallory-1', user_id_auth_hash: hashOf('mallory-1') });
      expect(taken.statusCode, taken.body).toBe(403);
      expect(taken.json().error).toMatch(/^device\.previous_user_id_auth_hash: /);
      expect(await row(victim.id)).toMatchObject({ token: victim.token, user_id: 'victim-1' });
      expect(await ofUser('mallory-1')).toEqual([]);

      gw.reset();
      const sent = await transactional('victim-1');
      expect(sent.statusCode, sent.body).toBe(200);
      expect(sent.json().results.success).toBe(1);
      expect((await transactional('mallory-1')).statusCode).toBeLessThan(500);
      expect(gw.apns.pushes.map((p) => [p.token, JSON.stringify(p.payload)])).toEqual([
        [victim.token, expect.stringContaining('victim-1')],
      ]);
    });

    it('the Web Push variant (subscription null) is refused the same way', async () => {
      const sub = browserSubscription(`https://fcm.googleapis.com/fcm/send/cred-${randomApnsToken().slice(0, 24)}`);
      const created = await post({
        platform: 'web',
        subscription: sub.json,
        user_id: 'web-victim',
        user_id_auth_hash: hashOf('web-victim'),
      });
      expect(created.statusCode, created.body).toBe(201);
      const id = created.json().device.id as string;
      expect((await post({ platform: 'web', subscription: sub.json })).json().device.id).toBe(id);
      const cleared = await put(id, { subscription: null });
      expect(cleared.statusCode, cleared.body).toBe(403);
      expect(cleared.json().error).toMatch(/^device\.credential: /);
      const taken = await post({ platform: 'web', subscription: sub.json, user_id: 'mallory-2', user_id_auth_hash: hashOf('mallory-2') });
      expect(taken.statusCode, taken.body).toBe(403);
      expect(await row(id)).toMatchObject({ token: sub.json.endpoint, web_push_p256dh: sub.json.keys.p256dh, user_id: 'web-victim' });
      expect(await ofUser('mallory-2')).toEqual([]);
    });

    it("taking the bound phone's token onto a device of one's own is refused too", async () => {
      const victim = await phone('victim-3');
      const mine = await phone('mallory-3');
      const moved = await put(mine.id, { token: victim.token, credential: mine.credential, user_id_auth_hash: hashOf('mallory-3') });
      expect(moved.statusCode, moved.body).toBe(403);
      expect(moved.json().error).toMatch(/^device\.token: /);
      expect(await row(victim.id)).toMatchObject({ token: victim.token, user_id: 'victim-3' });
      expect(await row(mine.id)).toMatchObject({ token: mine.token });
    });
  });

  describe("a bound device's delivery fields", () => {
    it.each([
      ['platform', () => ({ platform: 'android' })],
      ['development', () => ({ development: true })],
      ['notifications_allowed', () => ({ notifications_allowed: 'Disabled' })],
      ['token', () => ({ token: randomApnsToken() })],
    ])('%s: refused without proof by id and by token; the credential or the user hash changes it', async (field, change) => {
      const victim = await phone('bound-user');
      const before = await row(victim.id);
      const attempts = [await put(victim.id, change())];
      // a registration naming another token is another device: only the other fields change one by its token
      if (field !== 'token') attempts.push(await post({ platform: 'ios', token: victim.token, ...change() }));
      for (const res of attempts) {
        expect(res.statusCode, res.body).toBe(403);
        expect(res.json().error).toMatch(/^device\.credential: /);
      }
      const wrong = await put(victim.id, { ...change(), credential: 'A'.repeat(32) });
      expect(wrong.statusCode).toBe(403);
      expect(wrong.json().error).toMatch(/^device\.credential: does not match/);
      expect(await row(victim.id)).toEqual(before);

      const withCredential = change();
      expect((await put(victim.id, { ...withCredential, credential: victim.credential })).statusCode).toBe(200);
      expect(await row(victim.id)).toMatchObject(withCredential);
      const other = await phone('bound-user');
      const withHash = change();
      expect((await put(other.id, { ...withHash, user_id_auth_hash: hashOf('bound-user') })).statusCode).toBe(200);
      expect(await row(other.id)).toMatchObject(withHash);
    });

    it('re-sending what the device has needs nothing (an app launch registering again)', async () => {
      const victim = await phone('bound-again');
      const again = await post({ platform: 'iOS', token: victim.token, development: false, user_id: 'bound-again', badge: 3 });
      expect(again.statusCode, again.body).toBe(200);
      expect(await row(victim.id)).toMatchObject({ badge: 3 });
    });

    it('the write key (a backend) changes them freely', async () => {
      const victim = await phone('bound-backend');
      expect((await put(victim.id, { token: null, notifications_allowed: 'Disabled' }, app.keys.write)).statusCode).toBe(200);
      expect(await row(victim.id)).toMatchObject({ token: null, notifications_allowed: 'Disabled' });
    });
  });

  describe('the credential itself', () => {
    it('is answered once, on creation, and stored only as its SHA-256', async () => {
      const token = randomFcmToken();
      const created = await post({ platform: 'android', token });
      expect(created.statusCode).toBe(201);
      const { id, credential } = created.json().device as { id: string; credential: string };
      expect(credential).toMatch(/^[A-Za-z0-9_-]{32}$/);
      const again = await post({ platform: 'android', token });
      expect(again.json().device).not.toHaveProperty('credential');
      expect((await call(h, 'GET', `/v6/devices/${id}`, app.keys.sdk)).json().device).not.toHaveProperty('credential');
      const stored = await row(id);
      expect(stored.credential_hash).toEqual(createHash('sha256').update(credential).digest());
      expect(JSON.stringify(stored)).not.toContain(credential);
    });

    it('an unbound device: open to old SDKs until its credential is first sent, then required', async () => {
      const mine = await phone(null, randomApnsToken());
      // an SDK that ignores the credential keeps working (its token refresh, its permission)
      expect((await put(mine.id, { notifications_allowed: 'Enabled' })).statusCode).toBe(200);
      const held = await put(mine.id, { notifications_allowed: 'Disabled', credential: mine.credential });
      expect(held.statusCode, held.body).toBe(200);
      const refused = await put(mine.id, { token: null });
      expect(refused.statusCode, refused.body).toBe(403);
      expect(refused.json().error).toMatch(/^device\.credential: is required/);
      expect((await put(mine.id, { token: null, credential: mine.credential })).statusCode).toBe(200);
      expect(await row(mine.id)).toMatchObject({ token: null, notifications_allowed: 'Disabled' });
    });

    it('a device registered before credentials: open while unbound, its user hash once bound', async () => {
      const legacy = await phone(null);
      const bound = await phone('legacy-user');
      await h.db.db.updateTable('devices').set({ credential_hash: null }).where('id', 'in', [legacy.id, bound.id]).execute();
      expect((await put(legacy.id, { token: randomApnsToken() })).statusCode).toBe(200);
      const refused = await put(bound.id, { notifications_allowed: 'Disabled' });
      expect(refused.statusCode).toBe(403);
      expect(refused.json().error).toMatch(/^device\.user_id_auth_hash: /);
      expect((await put(bound.id, { notifications_allowed: 'Disabled', credential: bound.credential })).statusCode).toBe(403);
      expect((await put(bound.id, { notifications_allowed: 'Disabled', user_id_auth_hash: hashOf('legacy-user') })).statusCode).toBe(200);
    });
  });

  describe('APNs tokens in any case are one device', () => {
    it("the upper-case form of a bound phone's token is the same device, and no move without proof", async () => {
      const victim = await phone('case-victim');
      const upper = victim.token.toUpperCase();
      const same = await post({ platform: 'ios', token: upper, badge: 1 });
      expect(same.statusCode, same.body).toBe(200);
      expect(same.json().device.id).toBe(victim.id);
      const taken = await post({ platform: 'ios', token: upper, user_id: 'case-mallory', user_id_auth_hash: hashOf('case-mallory') });
      expect(taken.statusCode).toBe(403);
      expect(await ofUser('case-mallory')).toEqual([]);
      expect(await row(victim.id)).toMatchObject({ token: victim.token, user_id: 'case-victim' });
      // a new phone's token in upper case is stored as APNs gives it to pushd: lower-case
      const fresh = randomApnsToken();
      const created = await post({ platform: 'ios', token: fresh.toUpperCase() });
      expect(await row(created.json().device.id)).toMatchObject({ token: fresh });
      const renewed = randomApnsToken();
      expect((await put(victim.id, { token: renewed.toUpperCase(), credential: victim.credential })).statusCode).toBe(200);
      expect(await row(victim.id)).toMatchObject({ token: renewed });
    });

    it('an FCM token keeps its case', async () => {
      const token = `${randomFcmToken()}Ab`;
      const created = await post({ platform: 'android', token });
      expect(await row(created.json().device.id)).toMatchObject({ token });
    });
  });
});
