import { createHash, createHmac } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { WebPushMock } from '../mocks/web-push-mock.js';

/**
 * The drop-in scripts as served, run in a VM whose browser APIs are stand-ins (Node has no service worker or push
 * manager): sw.js shows pushd's document and opens its url; sdk.js registers a subscription with the real server.
 * No browser's own push stack is exercised here.
 */
describe('web push scripts', () => {
  let mock: WebPushMock;
  let h: Harness;
  let app: Awaited<ReturnType<Harness['createApp']>>;
  beforeAll(async () => {
    mock = await WebPushMock.start();
    h = await createHarness({ env: { WEB_PUSH_ALLOWED_ORIGINS: mock.origin } });
    app = await h.createApp(undefined, { identityVerification: true });
  });
  afterAll(async () => {
    await h?.close();
    await mock?.close();
  });

  /** The site's Cache Storage, shared by the page (sdk.js) and its service worker, as in a browser. */
  const cacheStore = new Map<string, string>();
  const caches = {
    open: async () => ({
      match: async (key: string) => (cacheStore.has(key) ? new Response(cacheStore.get(key)) : undefined),
      put: async (key: string, res: Response) => void cacheStore.set(key, await res.text()),
      delete: async (key: string) => cacheStore.delete(key),
    }),
  };

  const script = async (path: string) => {
    const res = await h.server.inject({ method: 'GET', url: path });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/javascript; charset=utf-8');
    return res.body;
  };

  it("sw.js shows the document with its options and opens the url (or the clicked action's) on click", async () => {
    const listeners: Record<string, (event: unknown) => void> = {};
    const shown: [string, Record<string, unknown>][] = [];
    const opened: string[] = [];
    const waits: Promise<unknown>[] = [];
    const self = {
      location: { origin: 'https://shop.example.com' },
      addEventListener: (name: string, fn: (event: unknown) => void) => (listeners[name] = fn),
      registration: { showNotification: async (title: string, options: Record<string, unknown>) => void shown.push([title, options]) },
      clients: { openWindow: async (url: string) => void opened.push(url) },
    };
    runInNewContext(await script('/web-push/sw.js'), { self, URL });
    const document = {
      title: 'Shop',
      body: 'Shipped',
      tag: 'o-1',
      icon: '/i.png',
      url: '/orders/1',
      actions: [{ action: 'track', title: 'Track', url: 'https://track.example.com/1' }],
      require_interaction: true,
      data: { order: 1, _nid: 'n-1' },
    };
    listeners.push!({ data: { json: () => document }, waitUntil: (p: Promise<unknown>) => waits.push(p) });
    await Promise.all(waits);
    expect(shown).toHaveLength(1);
    const [title, options] = shown[0]!;
    expect(title).toBe('Shop');
    expect(options).toMatchObject({ body: 'Shipped', tag: 'o-1', icon: '/i.png', requireInteraction: true });
    expect(options.actions).toEqual([{ action: 'track', title: 'Track', icon: undefined }]);
    const click = (action: string) =>
      listeners.notificationclick!({
        action,
        notification: { close: () => undefined, data: options.data },
        waitUntil: (p: Promise<unknown>) => waits.push(p),
      });
    click('');
    click('track');
    await Promise.all(waits);
    expect(opened).toEqual(['https://shop.example.com/orders/1', 'https://track.example.com/1']);
  });

  it("sdk.js subscribes with the app's VAPID key and registers the subscription with pushd", async () => {
    const vapid = await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setWebPush(app.app.id, {
      subject: 'mailto:ops@example.com',
    });
    await h.server.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(h.server.server.address() as AddressInfo).port}`;
    const stored = new Map<string, string>();
    let askedKey: unknown;
    let unsubscribed = false;
    let subscribeCalls = 0;
    const registration = {
      pushManager: {
        getSubscription: async () => null,
        subscribe: async (o: { applicationServerKey: string }) => {
          askedKey = o.applicationServerKey;
          subscribeCalls += 1;
          const json = mock.subscribe(o.applicationServerKey);
          const subscription = {
            options: { applicationServerKey: Buffer.from(o.applicationServerKey, 'base64url') },
            toJSON: () => json,
            unsubscribe: async () => {
              unsubscribed = true;
              registration.pushManager.getSubscription = async () => null;
            },
          };
          registration.pushManager.getSubscription = async () => subscription as never;
          return subscription;
        },
      },
    };
    const window: Record<string, unknown> = {
      PushManager: function PushManager() {},
      document: { currentScript: { src: `${base}/web-push/sdk.js` } },
      navigator: { serviceWorker: { register: async () => registration, ready: Promise.resolve(registration) } },
      localStorage: {
        setItem: (k: string, v: string) => stored.set(k, v),
        getItem: (k: string) => stored.get(k) ?? null,
        removeItem: (k: string) => stored.delete(k),
      },
      caches,
      Response,
      fetch,
      btoa,
      URL,
      Intl,
      JSON,
      Promise,
      Object,
      Array,
      Error,
    };
    window.self = window;
    runInNewContext(await script('/web-push/sdk.js'), window);
    const pushd = window.pushd as { subscribe: (o: unknown) => Promise<{ id: string }>; unsubscribe: (o: unknown) => Promise<unknown> };
    // the app verifies identities: the page passes the hash its backend made, as a phone does
    const user_id_auth_hash = createHmac('sha256', app.identity_secret).update('u-7').digest('hex');
    const device = await pushd.subscribe({ sdkKey: app.keys.sdk, user_id: 'u-7', user_id_auth_hash, tags: ['web'] });
    expect(askedKey).toBe(vapid.public_key);
    expect(stored.get('pushd.device')).toBe(device.id);
    const row = await h.db.db.selectFrom('devices').selectAll().where('id', '=', device.id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ platform: 'web', user_id: 'u-7', tags: ['web'], notifications_allowed: 'Enabled' });
    expect(row.token).toMatch(new RegExp(`^${mock.origin}/push/`));
    // the credential its creation answered is kept, and only its hash is in PostgreSQL
    const credential = stored.get('pushd.credential')!;
    expect(credential).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(row.credential_hash).toEqual(createHash('sha256').update(credential).digest());
    expect(row.credential_held).toBe(false);
    // the page subscribing again (a later visit) sends it back: from then on the device's changes need it
    expect(await pushd.subscribe({ sdkKey: app.keys.sdk })).toMatchObject({ id: device.id });
    expect(stored.get('pushd.credential')).toBe(credential);
    expect(
      (await h.db.db.selectFrom('devices').select('credential_held').where('id', '=', device.id).executeTakeFirstOrThrow()).credential_held,
    ).toBe(true);
    // what the service worker reads to report opens
    expect(JSON.parse(cacheStore.get('/pushd-web-push-device')!)).toEqual({ base, sdkKey: app.keys.sdk, device: device.id });
    await reportsOpen(device);

    // the device is bound to u-7: unsubscribing clears its subscription only with its credential, which sdk.js sends
    await pushd.unsubscribe({ sdkKey: app.keys.sdk });
    await new Promise((r) => setTimeout(r, 50));
    expect(cacheStore.has('/pushd-web-push-device')).toBe(false);
    expect(unsubscribed).toBe(true);
    const after = await h.db.db.selectFrom('devices').selectAll().where('id', '=', device.id).executeTakeFirstOrThrow();
    expect(after).toMatchObject({ token: null, notifications_allowed: 'Disabled' });

    // a subscription made with the app's key is kept; once the pair is rotated, the page subscribes anew
    const again = await pushd.subscribe({ sdkKey: app.keys.sdk });
    expect(stored.get('pushd.credential')).not.toBe(credential);
    expect(await pushd.subscribe({ sdkKey: app.keys.sdk })).toMatchObject({ id: again.id });
    expect(subscribeCalls).toBe(2);
    unsubscribed = false;
    const rotated = await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setWebPush(app.app.id, {
      subject: 'mailto:ops@example.com',
    });
    // the server's key cache hears of the rotation from PostgreSQL (LISTEN), a moment after it commits
    const authorization = `Basic ${Buffer.from(`:${app.keys.sdk}`).toString('base64')}`;
    const served = async () =>
      (await h.server.inject({ method: 'GET', url: '/v6/web-push/vapid-public-key', headers: { authorization } })).json<{
        public_key: string;
      }>().public_key;
    await expect.poll(served, { timeout: 5000 }).toBe(rotated.public_key);
    const renewed = await pushd.subscribe({ sdkKey: app.keys.sdk });
    expect(unsubscribed).toBe(true);
    expect(subscribeCalls).toBe(3);
    expect(askedKey).toBe(rotated.public_key);
    expect(renewed.id).not.toBe(again.id);
  });

  /**
   * sw.js, on a click, reports the open to pushd with what sdk.js left (the real server records it: the device
   * received the notification, as its delivery receipt says).
   */
  async function reportsOpen(device: { id: string }) {
    const posted = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: `Basic ${Buffer.from(`:${app.keys.write}`).toString('base64')}` },
      payload: { notification: { to: '*', payload: { alert: 'Shipped' } } },
    });
    expect(posted.statusCode, posted.body).toBe(201);
    const nid = posted.json().id as string;
    await h.db.db.insertInto('device_pushes').values({ device_id: device.id, notification_id: nid, received_at: new Date() }).execute();

    const listeners: Record<string, (event: unknown) => void> = {};
    const waits: Promise<unknown>[] = [];
    const self = {
      location: { origin: 'https://shop.example.com' },
      addEventListener: (name: string, fn: (event: unknown) => void) => (listeners[name] = fn),
      clients: { openWindow: async () => undefined },
    };
    runInNewContext(await script('/web-push/sw.js'), { self, URL, caches, fetch, btoa, JSON, Promise });
    listeners.notificationclick!({
      action: '',
      notification: { close: () => undefined, data: { pushd: { _nid: nid }, url: '/orders/1', actions: [] } },
      waitUntil: (p: Promise<unknown>) => waits.push(p),
    });
    await Promise.all(waits);
    const opens = await h.db.db.selectFrom('push_opens').select(['kind', 'device_id']).where('notification_id', '=', nid).execute();
    expect(opens).toEqual([{ kind: 'direct', device_id: device.id }]);
  }
});
