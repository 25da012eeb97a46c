import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways } from '../helpers/gateways.js';
import { randomApnsToken, randomFcmToken } from '../mocks/index.js';
import { browserSubscription } from '../mocks/web-push-browser.js';
import { call } from './device-support.js';

/**
 * Identity verification: the sdk key ships in every copy of the app, so binding a device to a user id (or an e-mail
 * address), which routes that user's pushes, takes the HMAC-SHA256 of the value made by the customer's backend with
 * the app's identity secret. Without it anyone could bind their own phone to another user and receive that user's
 * transactional pushes (the login code of the README's example).
 */
describe('identity verification', () => {
  let h: Harness;
  let gw: Gateways;
  let app: Awaited<ReturnType<Harness['createApp']>>;
  /** what the customer's backend does: node:crypto, the secret as printed */
  const hashOf = (value: string, secret = app.identity_secret) => createHmac('sha256', secret).update(value).digest('hex');

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ env: { ...gw.env, TRANSACTIONAL_TIMEOUT_MS: '3000' } });
    app = await h.createApp('com.example.identity', { identityVerification: true });
    await setCredentials(h, app.app.id, gw);
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  const post = (key: string, device: Record<string, unknown>) => call(h, 'POST', '/v6/devices', key, { device });
  const put = (key: string, id: string, device: Record<string, unknown>) => call(h, 'PUT', `/v6/devices/${id}`, key, { device });
  const stored = (token: string) =>
    h.db.db.selectFrom('devices').select(['id', 'user_id', 'user_email']).where('token', '=', token).executeTakeFirst();
  const userDevices = (userId: string) => h.db.db.selectFrom('devices').select('id').where('user_id', '=', userId).execute();

  it('a new app has it on: the app create answer carries a 64-hex secret', () => {
    expect(app.identity_secret).toMatch(/^[0-9a-f]{64}$/);
  });

  it('no API answer shows the secret', async () => {
    const answers = [
      ...(await Promise.all(Object.values(app.keys).map((key) => call(h, 'GET', '/v6/key', key)))),
      await post(app.keys.sdk, { platform: 'ios', token: randomApnsToken(), user_id: 'u-shown' }),
      await post(app.keys.sdk, { platform: 'ios', token: randomApnsToken(), user_id: 'u-shown', user_id_auth_hash: hashOf('u-shown') }),
    ];
    for (const res of answers) {
      expect(res.statusCode).toBeLessThan(500);
      expect(res.body).not.toContain(app.identity_secret);
    }
  });

  describe('the attack: an sdk key binding its phone to another user', () => {
    it('without a hash: 403 naming device.user_id_auth_hash, nothing stored', async () => {
      const token = randomApnsToken();
      const res = await post(app.keys.sdk, { platform: 'ios', token, user_id: 'a-user-1' });
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json().error).toMatch(/^device\.user_id_auth_hash: is required to set user_id with the sdk key/);
      expect(await stored(token)).toBeUndefined();
      expect(await userDevices('a-user-1')).toEqual([]);
    });

    it.each([
      ['a hash made with another secret', () => hashOf('a-user-1', 'guessed-secret')],
      ["the valid hash of the attacker's own user id", () => hashOf('attacker')],
      ['a hash that is not hex', () => 'z'.repeat(64)],
      ['a truncated hash', () => hashOf('a-user-1').slice(0, 40)],
      ['a number', () => 42],
    ])('with %s: 403 naming device.user_id_auth_hash, nothing stored', async (_what, hash) => {
      const token = randomApnsToken();
      const res = await post(app.keys.sdk, { platform: 'ios', token, user_id: 'a-user-1', user_id_auth_hash: hash() });
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json().error).toMatch(/^device\.user_id_auth_hash: does not match user_id/);
      expect(await stored(token)).toBeUndefined();
    });

    it('updating a device of its own to that user id without a hash: 403, the device unchanged', async () => {
      const token = randomFcmToken();
      const mine = await registerDevice(h, app.keys.sdk, { platform: 'android', token });
      const res = await put(app.keys.sdk, mine.id, { user_id: 'a-user-1', locale: 'fr_FR' });
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json().error).toMatch(/^device\.user_id_auth_hash: /);
      const device = (await call(h, 'GET', `/v6/devices/${mine.id}`, app.keys.read)).json().device;
      expect(device).toMatchObject({ user_id: null, locale: null });
      const wrong = await put(app.keys.sdk, mine.id, { user_id: 'a-user-1', user_id_auth_hash: hashOf('a-user-2') });
      expect(wrong.statusCode).toBe(403);
      expect((await stored(token))!.user_id).toBeNull();
    });
  });

  describe('what still binds', () => {
    it('the sdk key with the right hash (any case of hex) binds the user id', async () => {
      const token = randomApnsToken();
      const res = await post(app.keys.sdk, { platform: 'ios', token, user_id: 'u-proven', user_id_auth_hash: hashOf('u-proven') });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().device.user_id).toBe('u-proven');
      expect(res.json().dropped).toEqual([]);
      const other = randomApnsToken();
      const upper = await post(app.keys.sdk, {
        platform: 'ios',
        token: other,
        user_id: 'u-proven',
        user_id_auth_hash: hashOf('u-proven').toUpperCase(),
      });
      expect(upper.statusCode, upper.body).toBe(201);
      expect((await userDevices('u-proven')).length).toBe(2);
    });

    it("a device keeps the user it has: re-sending it needs no hash; changing or clearing it takes the leaving user's", async () => {
      const token = randomApnsToken();
      const device = await registerDevice(h, app.keys.sdk, {
        platform: 'ios',
        token,
        user_id: 'u-keeps',
        user_id_auth_hash: hashOf('u-keeps'),
      });
      // an app version released before the hash, registering again on launch
      const again = await post(app.keys.sdk, { platform: 'ios', token, user_id: 'u-keeps', badge: 2 });
      expect(again.statusCode, again.body).toBe(200);
      const same = await put(app.keys.sdk, device.id, { user_id: 'u-keeps', badge: 3 });
      expect(same.statusCode, same.body).toBe(200);

      const moved = await post(app.keys.sdk, { platform: 'ios', token, user_id: 'u-other' });
      expect(moved.statusCode).toBe(403);
      expect((await put(app.keys.sdk, device.id, { user_id: 'u-other' })).statusCode).toBe(403);
      expect(await stored(token)).toMatchObject({ user_id: 'u-keeps' });

      expect((await put(app.keys.sdk, device.id, { user_id: null })).statusCode).toBe(403);
      const cleared = await put(app.keys.sdk, device.id, { user_id: null, previous_user_id_auth_hash: hashOf('u-keeps') });
      expect(cleared.statusCode, cleared.body).toBe(200);
      expect(cleared.json().device.user_id).toBeNull();
      // and once cleared, binding it again takes the hash again
      expect((await put(app.keys.sdk, device.id, { user_id: 'u-keeps' })).statusCode).toBe(403);
      const proven = await put(app.keys.sdk, device.id, { user_id: 'u-keeps', user_id_auth_hash: hashOf('u-keeps') });
      expect(proven.statusCode, proven.body).toBe(200);
    });

    it("a new push token on a user's device (another phone behind the user) takes the user's proof too", async () => {
      const token = randomApnsToken();
      const { id } = await registerDevice(h, app.keys.sdk, {
        platform: 'ios',
        token,
        user_id: 'victim',
        user_id_auth_hash: hashOf('victim'),
      });
      // whoever learned the device's id (or its token, which answers it) puts their own phone's token on it
      const attacker = randomApnsToken();
      const moved = await put(app.keys.sdk, id, { token: attacker });
      expect(moved.statusCode, moved.body).toBe(403);
      expect(moved.json().error).toMatch(/^device\.credential: is required to change token .*user_id_auth_hash/);
      expect(await put(app.keys.sdk, id, { token: attacker, user_id: 'victim' })).toMatchObject({ statusCode: 403 });
      expect(await stored(token)).toMatchObject({ id, user_id: 'victim' });
      expect(await stored(attacker)).toBeUndefined();

      // the app itself, which holds the hash, moves to its new token; clearing the user takes the same proof
      const renewed = randomApnsToken();
      expect(await put(app.keys.sdk, id, { token: renewed, user_id_auth_hash: hashOf('victim') })).toMatchObject({ statusCode: 200 });
      expect(await stored(renewed)).toMatchObject({ id, user_id: 'victim' });
      const anonymous = randomApnsToken();
      expect(await put(app.keys.sdk, id, { token: anonymous, user_id: null })).toMatchObject({ statusCode: 403 });
      const logout = await put(app.keys.sdk, id, { token: anonymous, user_id: null, previous_user_id_auth_hash: hashOf('victim') });
      expect(logout.statusCode, logout.body).toBe(200);
      expect(await stored(anonymous)).toMatchObject({ id, user_id: null });
    });

    it('the write key (a backend) binds freely', async () => {
      const token = randomApnsToken();
      const res = await post(app.keys.write, { platform: 'ios', token, user_id: 'u-backend', user_email: 'b@example.com' });
      expect(res.statusCode, res.body).toBe(201);
      expect(await stored(token)).toMatchObject({ user_id: 'u-backend', user_email: 'b@example.com' });
      const moved = await put(app.keys.write, res.json().device.id, { user_id: 'u-backend-2' });
      expect(moved.statusCode).toBe(200);
    });
  });

  describe('found by the probe (issue 60): taking a bound phone or browser from its user', () => {
    const endpoint = () => `https://fcm.googleapis.com/fcm/send/probe-${randomApnsToken().slice(0, 24)}`;
    const bound = async (userId: string) =>
      registerDevice(h, app.keys.sdk, { platform: 'ios', user_id: userId, user_id_auth_hash: hashOf(userId) });
    /** the sdk key binding the phone of `token` to `userId` with its valid hash */
    const login = (token: string, userId: string, extra: Record<string, unknown> = {}) =>
      post(app.keys.sdk, { platform: 'ios', token, user_id: userId, user_id_auth_hash: hashOf(userId), ...extra });

    it("the sdk key, a bound phone's token and a valid hash of another user: 403, the phone stays its user's", async () => {
      const phone = await bound('customer-42-of-the-probe');
      const res = await login(phone.token, 'attacker-1');
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json().error).toMatch(/^device\.previous_user_id_auth_hash: is required to change user_id with the sdk key/);
      const byId = await put(app.keys.sdk, phone.id, { user_id: 'attacker-1', user_id_auth_hash: hashOf('attacker-1') });
      expect(byId.statusCode, byId.body).toBe(403);
      // clearing first, then binding the now anonymous phone, is the same move in two steps
      const cleared = await put(app.keys.sdk, phone.id, { user_id: null });
      expect(cleared.statusCode, cleared.body).toBe(403);
      const wrong = await put(app.keys.sdk, phone.id, { user_id: null, previous_user_id_auth_hash: hashOf('attacker-1') });
      expect(wrong.statusCode).toBe(403);
      expect(wrong.json().error).toMatch(/^device\.previous_user_id_auth_hash: does not match the user_id the device has/);
      expect(await stored(phone.token)).toMatchObject({ id: phone.id, user_id: 'customer-42-of-the-probe' });
      expect(await userDevices('attacker-1')).toEqual([]);
    });

    it('a user switch on a shared phone (logout, then login) proves the user it leaves, then the one it binds', async () => {
      const phone = await bound('u-leaves');
      const logout = await put(app.keys.sdk, phone.id, { user_id: null, previous_user_id_auth_hash: hashOf('u-leaves') });
      expect(logout.statusCode, logout.body).toBe(200);
      expect(logout.json().device.user_id).toBeNull();
      const next = await login(phone.token, 'u-comes');
      expect(next.statusCode, next.body).toBe(200);
      expect(await stored(phone.token)).toMatchObject({ id: phone.id, user_id: 'u-comes' });
      // or in one request, with both proofs
      const direct = await login(phone.token, 'u-third', { previous_user_id_auth_hash: hashOf('u-comes') });
      expect(direct.statusCode, direct.body).toBe(200);
      expect(direct.json().dropped).toEqual([]);
      expect(await stored(phone.token)).toMatchObject({ id: phone.id, user_id: 'u-third' });
    });

    it('the e-mail address a device holds takes the same proof to leave', async () => {
      const token = randomApnsToken();
      await registerDevice(h, app.keys.sdk, {
        platform: 'ios',
        token,
        user_email: 'kept@example.com',
        user_email_auth_hash: hashOf('kept@example.com'),
      });
      const taken = await post(app.keys.sdk, {
        platform: 'ios',
        token,
        user_email: 'thief@example.com',
        user_email_auth_hash: hashOf('thief@example.com'),
      });
      expect(taken.statusCode).toBe(403);
      expect(taken.json().error).toMatch(/^device\.previous_user_email_auth_hash: /);
      expect(await stored(token)).toMatchObject({ user_email: 'kept@example.com' });
    });

    it('the write key (a backend, trusted) moves a bound phone to another user with no proof', async () => {
      const phone = await bound('u-backend-from');
      const res = await post(app.keys.write, { platform: 'ios', token: phone.token, user_id: 'u-backend-to' });
      expect(res.statusCode, res.body).toBe(200);
      expect(await stored(phone.token)).toMatchObject({ id: phone.id, user_id: 'u-backend-to' });
    });

    it("new subscription keys on a bound browser take the user's hash, by POST or by PUT", async () => {
      const sub = browserSubscription(endpoint());
      const browser = await post(app.keys.sdk, {
        platform: 'web',
        subscription: sub.json,
        user_id: 'web-user',
        user_id_auth_hash: hashOf('web-user'),
      });
      expect(browser.statusCode, browser.body).toBe(201);
      const id = browser.json().device.id as string;
      const keysOf = () =>
        h.db.db.selectFrom('devices').select(['web_push_p256dh', 'web_push_auth']).where('id', '=', id).executeTakeFirstOrThrow();

      const forged = browserSubscription(sub.json.endpoint);
      const viaPost = await post(app.keys.sdk, { platform: 'web', subscription: forged.json });
      expect(viaPost.statusCode, viaPost.body).toBe(403);
      expect(viaPost.json().error).toMatch(/^device\.credential: is required to change subscription .*user_id_auth_hash/);
      const viaPut = await put(app.keys.sdk, id, { subscription: forged.json });
      expect(viaPut.statusCode, viaPut.body).toBe(403);
      expect(await keysOf()).toEqual({ web_push_p256dh: sub.json.keys.p256dh, web_push_auth: sub.json.keys.auth });

      // the same keys again change nothing and need nothing; the browser's own new keys come with its hash
      expect((await post(app.keys.sdk, { platform: 'web', subscription: sub.json })).statusCode).toBe(200);
      const renewed = browserSubscription(sub.json.endpoint);
      const proven = await put(app.keys.sdk, id, { subscription: renewed.json, user_id_auth_hash: hashOf('web-user') });
      expect(proven.statusCode, proven.body).toBe(200);
      expect(await keysOf()).toEqual({ web_push_p256dh: renewed.json.keys.p256dh, web_push_auth: renewed.json.keys.auth });
    });
  });

  describe('user_email, which audience filters target too', () => {
    it('takes user_email_auth_hash from the sdk key, under either field name', async () => {
      const token = randomApnsToken();
      const missing = await post(app.keys.sdk, { platform: 'ios', token, user_email: 'ana@example.com' });
      expect(missing.statusCode).toBe(403);
      expect(missing.json().error).toMatch(/^device\.user_email_auth_hash: is required to set user_email/);
      const alias = await post(app.keys.sdk, { platform: 'ios', token, email: 'ana@example.com', user_email_auth_hash: hashOf('x') });
      expect(alias.statusCode).toBe(403);
      expect(alias.json().error).toMatch(/^device\.user_email_auth_hash: does not match user_email/);
      expect(await stored(token)).toBeUndefined();

      const ok = await post(app.keys.sdk, {
        platform: 'ios',
        token,
        email: 'ana@example.com',
        user_email_auth_hash: hashOf('ana@example.com'),
      });
      expect(ok.statusCode, ok.body).toBe(201);
      expect(await stored(token)).toMatchObject({ user_email: 'ana@example.com' });
    });

    it('a request proving one field but not the other stores nothing', async () => {
      const token = randomApnsToken();
      const res = await post(app.keys.sdk, {
        platform: 'ios',
        token,
        user_id: 'u-half',
        user_id_auth_hash: hashOf('u-half'),
        user_email: 'half@example.com',
      });
      expect(res.statusCode).toBe(403);
      expect(res.json().error).toMatch(/^device\.user_email_auth_hash: /);
      expect(await stored(token)).toBeUndefined();
    });
  });

  it('an app with verification off binds as before, and hashes sent to it are neither stored nor reported', async () => {
    const legacy = await h.createApp('com.example.identity.legacy'); // as migration 019 leaves existing apps
    const token = randomApnsToken();
    const res = await post(legacy.keys.sdk, { platform: 'ios', token, user_id: 'a-user-1', user_id_auth_hash: 'whatever' });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().dropped).toEqual([]);
    expect(JSON.stringify(res.json())).not.toContain('whatever');
  });

  it('every API process applies a change of the setting or the secret at once, without a restart', async () => {
    const other = await h.createApp('com.example.identity.switch', { identityVerification: true });
    // the key (and with it the secret) is cached from here on
    expect((await post(other.keys.sdk, { platform: 'ios', token: randomApnsToken(), user_id: 'u-sw' })).statusCode).toBe(403);
    // the CLI's service, with no cache of its own to drop: only the trigger's announcement reaches the server
    const cli = new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() });
    await cli.setIdentityVerification(other.app.id, 'off');
    await waitFor(
      'verification off',
      async () => (await post(other.keys.sdk, { platform: 'ios', token: randomApnsToken(), user_id: 'u-sw' })).statusCode === 201,
    );

    const on = await cli.setIdentityVerification(other.app.id, 'on');
    expect(on).toEqual({ app_id: other.app.id, identity_verification: true, identity_secret: other.identity_secret });
    const proof = (secret: string) => ({
      platform: 'ios',
      token: randomApnsToken(),
      user_id: 'u-sw',
      user_id_auth_hash: hashOf('u-sw', secret),
    });
    await waitFor(
      'verification on',
      async () => (await post(other.keys.sdk, { platform: 'ios', token: randomApnsToken(), user_id: 'u-sw' })).statusCode === 403,
    );
    expect((await post(other.keys.sdk, proof(other.identity_secret))).statusCode).toBe(201);

    const rotated = await cli.setIdentityVerification(other.app.id, 'rotate');
    expect(rotated.identity_secret).toMatch(/^[0-9a-f]{64}$/);
    expect(rotated.identity_secret).not.toBe(other.identity_secret);
    await waitFor('the old secret refused', async () => (await post(other.keys.sdk, proof(other.identity_secret))).statusCode === 403);
    expect((await post(other.keys.sdk, proof(rotated.identity_secret!))).statusCode).toBe(201);
  });

  it("end to end: the backend's hash binds the phone, and the user's login code reaches it and not the attacker", async () => {
    const userId = 'customer-42';
    // the backend, after the user logged in, hands the app the hash of the user id
    const hash = createHmac('sha256', app.identity_secret).update(userId).digest('hex');
    const phone = await registerDevice(h, app.keys.sdk, { platform: 'ios', user_id: userId, user_id_auth_hash: hash });
    const attackerToken = randomApnsToken();
    const claim = await post(app.keys.sdk, { platform: 'ios', token: attackerToken, user_id: userId });
    expect(claim.statusCode).toBe(403);
    // the attacker registers anyway, then tries to move its device to the user
    const attacker = await registerDevice(h, app.keys.sdk, { platform: 'ios', token: attackerToken });
    expect((await put(app.keys.sdk, attacker.id, { user_id: userId, user_id_auth_hash: hashOf('attacker') })).statusCode).toBe(403);

    gw.reset();
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/transactional/notifications',
      headers: { authorization: basic(app.keys.write) },
      payload: {
        to: { field: 'user_id', value: userId },
        group: 'login-code',
        notification: { payload: { alert: 'Your login code: 314159' } },
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().results).toEqual({ success: 1, uninstalled: 0, failures: [], failure_reasons: [], not_allowed: 0 });
    expect(gw.apns.pushes.map((p) => p.token)).toEqual([phone.token]);
    expect(JSON.stringify(gw.apns.pushes)).toContain('314159');
    expect(gw.apns.pushes.map((p) => p.token)).not.toContain(attackerToken);
  });
});
