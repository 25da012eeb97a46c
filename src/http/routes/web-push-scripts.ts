import type { FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

/**
 * Drop-in scripts for a web app (docs/api/web-push.md). A service worker must come from the page's own origin, so the
 * app's sw.js is one line, `importScripts('<pushd>/web-push/sw.js')`; the page loads sdk.js from pushd and calls
 * `pushd.subscribe(...)`. Plain ES2017, no build step, no dependency: what a browser runs as served.
 */

/**
 * Where sdk.js leaves {base, sdkKey, device} for the service worker, which has no localStorage: an entry of the
 * site's Cache Storage, which both sides can read.
 */
const CONFIG = `caches.open('pushd').then(function (c) { return c`;

/**
 * The push handler: shows the document pushd sent (docs/api/web-push.md, "What the service worker receives"); a click opens its
 * url and reports the open (tapped) with the device id and sdk key sdk.js left.
 */
export const SERVICE_WORKER_JS = `/* pushd web push service worker: importScripts() it from your own sw.js */
function pushdReportOpen(nid) {
  if (!nid || typeof caches === 'undefined') return Promise.resolve();
  return ${CONFIG}.match('/pushd-web-push-device'); }).then(function (found) {
    return found ? found.json() : null;
  }).then(function (config) {
    if (!config) return;
    return fetch(config.base + '/v6/devices/' + config.device + '/opens', {
      method: 'POST',
      headers: { authorization: 'Basic ' + btoa(':' + config.sdkKey), 'content-type': 'application/json' },
      body: JSON.stringify({ open: { _nid: nid, tapped: true } })
    });
  }).catch(function () { /* an open not reported is not worth failing the click */ });
}
self.addEventListener('push', function (event) {
  var d = {};
  try { d = event.data ? event.data.json() : {}; } catch (e) { d = { body: event.data ? event.data.text() : '' }; }
  var actions = Array.isArray(d.actions) ? d.actions : [];
  var options = {
    body: d.body, tag: d.tag, icon: d.icon, image: d.image, badge: d.badge,
    requireInteraction: d.require_interaction, silent: d.silent, renotify: d.renotify, dir: d.dir, lang: d.lang,
    actions: actions.map(function (a) { return { action: a.action, title: a.title, icon: a.icon }; }),
    data: { pushd: d.data || {}, url: d.url, actions: actions }
  };
  event.waitUntil(self.registration.showNotification(d.title || '', options));
});
self.addEventListener('notificationclick', function (event) {
  event.notification.close();
  var data = event.notification.data || {};
  var action = (data.actions || []).filter(function (a) { return a.action === event.action; })[0];
  var url = (action && action.url) || data.url;
  var opened = url ? self.clients.openWindow(new URL(url, self.location.origin).href) : Promise.resolve();
  event.waitUntil(Promise.all([opened, pushdReportOpen((data.pushd || {})._nid)]));
});
`;

/** pushd.subscribe({sdkKey, serviceWorker, user_id?, tags?}) and pushd.unsubscribe(): the page's side. */
export const SDK_JS = `/* pushd web push sdk: <script src="<pushd>/web-push/sdk.js"></script> */
(function (global) {
  var script = document.currentScript;
  var base = script ? new URL(script.src).origin : '';
  var STORE = 'pushd.device';
  // the device's credential, answered once when it was created: every later change of it sends it back
  var CREDENTIAL = 'pushd.credential';
  function stored(name) {
    try { return localStorage.getItem(name); } catch (e) { return null; /* storage may be off */ }
  }
  function call(method, path, key, body) {
    return fetch(base + path, {
      method: method,
      headers: Object.assign({ authorization: 'Basic ' + btoa(':' + key) }, body ? { 'content-type': 'application/json' } : {}),
      body: body ? JSON.stringify(body) : undefined
    }).then(function (res) {
      return res.json().then(function (json) {
        if (!res.ok) throw new Error('pushd ' + res.status + ': ' + (json && json.error));
        return json;
      });
    });
  }
  function madeWith(subscription, publicKey) {
    var key = subscription.options && subscription.options.applicationServerKey;
    if (!key) return true; // a browser that does not say: keep it
    var text = '';
    new Uint8Array(key).forEach(function (b) { text += String.fromCharCode(b); });
    return btoa(text).replace(/\\+/g, '-').replace(/\\//g, '_').replace(/=+$/, '') === publicKey;
  }
  function subscribe(options) {
    if (!('serviceWorker' in navigator) || !('PushManager' in global)) return Promise.reject(new Error('web push is not supported here'));
    var key = options.sdkKey;
    return navigator.serviceWorker.register(options.serviceWorker || '/sw.js').then(function () {
      return navigator.serviceWorker.ready;
    }).then(function (registration) {
      return call('GET', '/v6/web-push/vapid-public-key', key).then(function (vapid) {
        return registration.pushManager.getSubscription().then(function (existing) {
          // a subscription is bound to the key it was made with: after the app's pair is rotated, subscribe anew
          if (existing && madeWith(existing, vapid.public_key)) return existing;
          return (existing ? existing.unsubscribe() : Promise.resolve()).then(function () {
            return registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: vapid.public_key });
          });
        });
      });
    }).then(function (subscription) {
      var device = { platform: 'web', subscription: subscription.toJSON(), notifications_allowed: 'Enabled' };
      // a change of user takes the proof of the one the browser leaves (docs/identity.md)
      var fields = ['user_id', 'user_id_auth_hash', 'previous_user_id_auth_hash', 'user_email', 'user_email_auth_hash',
        'previous_user_email_auth_hash', 'tags', 'locale', 'time_zone', 'custom'];
      fields.forEach(function (k) { if (options[k] !== undefined) device[k] = options[k]; });
      if (device.time_zone === undefined) device.time_zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
      if (stored(CREDENTIAL)) device.credential = stored(CREDENTIAL);
      return call('POST', '/v6/devices', key, { device: device });
    }).then(function (answer) {
      try {
        // a new device (a new subscription) has a new credential; the one kept is of the device answered again
        if (answer.device.credential) localStorage.setItem(CREDENTIAL, answer.device.credential);
        else if (stored(STORE) !== answer.device.id) localStorage.removeItem(CREDENTIAL);
        localStorage.setItem(STORE, answer.device.id);
      } catch (e) { /* storage may be off */ }
      // for the service worker, which reports the opens of what it shows
      var config = JSON.stringify({ base: base, sdkKey: key, device: answer.device.id });
      return (typeof caches === 'undefined' ? Promise.resolve() : ${CONFIG}.put('/pushd-web-push-device', new Response(config)); }))
        .catch(function () { /* opens go unreported */ })
        .then(function () { return answer.device; });
    });
  }
  function unsubscribe(options) {
    var id = stored(STORE);
    return navigator.serviceWorker.ready.then(function (registration) {
      return registration.pushManager.getSubscription();
    }).then(function (subscription) {
      return subscription ? subscription.unsubscribe() : false;
    }).then(function () {
      if (typeof caches !== 'undefined') ${CONFIG}.delete('/pushd-web-push-device'); }).catch(function () {});
      var forgotten = { device: { subscription: null, notifications_allowed: 'Disabled' } };
      if (stored(CREDENTIAL)) forgotten.device.credential = stored(CREDENTIAL);
      return id ? call('PUT', '/v6/devices/' + id, options.sdkKey, forgotten) : null;
    });
  }
  global.pushd = { subscribe: subscribe, unsubscribe: unsubscribe };
})(self);
`;

export function webPushScriptRoutes(): FastifyPluginAsyncZod {
  return async (app) => {
    const serve = (text: string) => async (_request: unknown, reply: FastifyReply) =>
      reply.header('content-type', 'text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(text);
    app.get('/web-push/sw.js', { schema: { hide: true } }, serve(SERVICE_WORKER_JS));
    app.get('/web-push/sdk.js', { schema: { hide: true } }, serve(SDK_JS));
  };
}
