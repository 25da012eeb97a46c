import { randomBytes, randomUUID } from 'node:crypto';
import type { Permission } from '../../src/domain/keys.js';
import { basic, type Harness } from '../helpers/harness.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import type { AppWithKeys } from './support.js';

/**
 * Every authenticated route, for the auth matrix in auth.test.ts: the roles here are the specification (README's
 * role table), not read from the code under test. The routes themselves are the server's: auth.test.ts fails for
 * any route the server registers without a row here or in PUBLIC_ROUTES, and for any row the server does not have.
 * - `path` may hold `:placeholders`, filled from the fixture's params (add what a new route needs to
 *   `prepareFixture`);
 * - `permission` is what the route demands (src/domain/keys.ts: read <- read, write; write <- write;
 *   device <- write, sdk); a list when any of them will do;
 * - `success` is the status a permitted, well-formed request answers; `body` builds that request's body
 *   (called once per request, so it may make each one unique);
 * - `fresh: true` when a successful call changes its target (erase): each case then gets a fixture of its own.
 */
export type Role = 'read' | 'write' | 'sdk';

export interface AuthRoute {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
  path: string;
  permission: Permission | Permission[];
  success: number;
  body?: (fx: Fixture) => unknown;
  fresh?: boolean;
}

export interface Fixture {
  app: AppWithKeys;
  /** Values for :placeholders in paths. */
  params: Record<string, string>;
}

const unique = () => randomBytes(6).toString('hex');
/** A webhook URL under a name that resolves nowhere (`.invalid`): a request to it fails at once. */
const FIXTURE_HOOK = 'https://hooks.pushd.invalid/in';
const FIXTURE_TEMPLATE = { name: 'fixture', payload: { alert: 'Hi {{ custom.first_name | default: "there" }}' } };
/** A journey entered through the API: one delay, then a send. */
const fixtureJourney = () => ({
  name: 'auth matrix',
  trigger: { api: true },
  steps: [
    { id: 'wait', type: 'delay', duration: '1h' },
    { id: 'send', type: 'send', notification: { payload: { alert: 'auth matrix' } } },
  ],
});

export const AUTH_ROUTES: AuthRoute[] = [
  // notifications
  ...(['v3', 'v5', 'v6'] as const).map((v): AuthRoute => ({
    method: 'POST',
    path: `/${v}/notifications`,
    permission: 'write',
    success: 201,
    body: () => ({ notification: { to: [{ name: 'locale', criteria: ['fr_FR'] }], payload: { alert: 'auth matrix' } } }),
  })),
  {
    method: 'POST',
    path: '/v6/transactional/notifications',
    permission: 'write',
    success: 200,
    body: () => ({ to: { field: 'user_id', value: 'nobody' }, group: 'auth-matrix', notification: { payload: { alert: 'auth matrix' } } }),
  },
  { method: 'GET', path: '/v6/notifications/:notificationId', permission: 'read', success: 200 },
  // cancel: the fixture's notification waits for a worker (the auth harness runs none), so it can be canceled
  { method: 'DELETE', path: '/v6/notifications/:notificationId', permission: 'write', success: 200, fresh: true },
  { method: 'GET', path: '/v6/stats/notifications/:notificationId/events', permission: 'read', success: 200 },
  // the fixture's notification is no A/B test: a key with the permission reaches the service, which answers 409
  {
    method: 'POST',
    path: '/v6/notifications/:notificationId/winner',
    permission: 'write',
    success: 409,
    body: () => ({ variant: 0 }),
  },
  // audiences
  { method: 'GET', path: '/v6/audiences', permission: 'read', success: 200 },
  { method: 'GET', path: '/v6/audiences/:audienceId', permission: 'read', success: 200 },
  { method: 'GET', path: '/v6/audiences/:audienceId/devices', permission: 'read', success: 200 },
  { method: 'GET', path: '/v6/audiences/:audienceId/filters', permission: 'read', success: 200 },
  {
    method: 'POST',
    path: '/v6/audiences/count',
    permission: 'read',
    success: 200,
    body: () => ({ filters: [{ name: 'locale', criteria: ['fr_FR'] }] }),
  },
  // the console's reads
  { method: 'GET', path: '/v6/key', permission: 'read', success: 200 },
  // the app's marketer settings (app-settings.ts)
  { method: 'GET', path: '/v6/app', permission: 'read', success: 200 },
  { method: 'PATCH', path: '/v6/app', permission: 'write', success: 200, body: () => ({ frequency_caps: [{ limit: 5, window: 'day' }] }) },
  // the audit log: a write key's own app only (a read key may not see who changed what)
  { method: 'GET', path: '/v6/audit', permission: 'write', success: 200 },
  { method: 'GET', path: '/v6/web-push/vapid-public-key', permission: 'device', success: 200 },
  { method: 'GET', path: '/v6/notifications', permission: 'read', success: 200 },
  {
    method: 'POST',
    path: '/v6/notifications/preview',
    permission: 'read',
    success: 200,
    body: () => ({ notification: { to: '*', payload: { alert: 'auth matrix' } } }),
  },
  { method: 'GET', path: '/v6/stats/devices', permission: 'read', success: 200 },
  { method: 'GET', path: '/v6/stats/pushes', permission: 'read', success: 200 },
  { method: 'GET', path: '/v6/stats/total_installs', permission: 'read', success: 200 },
  ...(['installs', 'opens', 'sessions', 'active_users'] as const).map((metric): AuthRoute => ({
    method: 'GET',
    path: `/v6/stats/${metric}`,
    permission: 'read',
    success: 200,
  })),
  // devices
  {
    method: 'POST',
    path: '/v6/devices',
    permission: 'device',
    success: 201,
    body: () => ({ device: { platform: 'ios', token: `tok-${unique()}` } }),
  },
  { method: 'GET', path: '/v6/devices/:deviceId', permission: ['read', 'device'], success: 200 },
  { method: 'PUT', path: '/v6/devices/:deviceId', permission: 'device', success: 200, body: () => ({ device: { locale: 'fr_FR' } }) },
  {
    method: 'POST',
    path: '/v6/devices/:deviceId/events',
    permission: 'device',
    success: 202,
    body: () => ({ events: [{ name: 'opened' }] }),
  },
  {
    method: 'POST',
    path: '/v6/devices/:deviceId/sessions',
    permission: 'device',
    success: 202,
    body: () => ({ session: { id: randomUUID() } }),
  },
  {
    method: 'POST',
    path: '/v6/devices/:deviceId/opens',
    permission: 'device',
    success: 202,
    body: (fx) => ({ open: { _nid: fx.params.notificationId, tapped: true } }),
  },
  { method: 'POST', path: '/v6/devices/:deviceId/erase', permission: 'write', success: 200, fresh: true },
  { method: 'GET', path: '/v6/devices/uninstalled', permission: 'read', success: 200 },
  // users: server to server, the write key only
  {
    method: 'PUT',
    path: '/v6/users/:userId',
    permission: 'write',
    success: 200,
    body: () => ({ user: { custom: { level: { type: 'integer', value: 3 } } } }),
  },
  {
    method: 'POST',
    path: '/v6/users/:userId/events',
    permission: 'write',
    success: 202,
    body: () => ({ events: [{ name: 'purchase' }] }),
  },
  { method: 'DELETE', path: '/v6/users/:userId/devices', permission: 'write', success: 200, fresh: true },
  // in-app messages: the app's side
  {
    method: 'POST',
    path: '/v6/messages',
    permission: 'write',
    success: 201,
    body: () => ({ message: { to: [{ name: 'locale', criteria: ['fr_FR'] }], title: 'auth matrix' } }),
  },
  { method: 'GET', path: '/v6/messages', permission: 'read', success: 200 },
  { method: 'GET', path: '/v6/messages/:messageId', permission: 'read', success: 200 },
  // cancel: the fixture's scheduled message waits for its send time
  { method: 'DELETE', path: '/v6/messages/:scheduledMessageId', permission: 'write', success: 200, fresh: true },
  { method: 'GET', path: '/v6/stats/messages/:messageId/events', permission: 'read', success: 200 },
  // journeys: the app's side
  { method: 'POST', path: '/v6/journeys', permission: 'write', success: 201, body: () => ({ journey: fixtureJourney() }) },
  { method: 'GET', path: '/v6/journeys', permission: 'read', success: 200 },
  { method: 'GET', path: '/v6/journeys/:journeyId', permission: 'read', success: 200 },
  { method: 'PUT', path: '/v6/journeys/:journeyId', permission: 'write', success: 200, body: () => ({ journey: fixtureJourney() }) },
  { method: 'POST', path: '/v6/journeys/:journeyId/pause', permission: 'write', success: 200 },
  { method: 'POST', path: '/v6/journeys/:journeyId/resume', permission: 'write', success: 200 },
  { method: 'POST', path: '/v6/journeys/:journeyId/archive', permission: 'write', success: 200, fresh: true },
  {
    method: 'POST',
    path: '/v6/journeys/:journeyId/entries',
    permission: 'write',
    success: 202,
    body: (fx) => ({ device_id: fx.params.deviceId }),
  },
  { method: 'GET', path: '/v6/journeys/:journeyId/entrants/:entrantKey', permission: 'read', success: 200 },
  // webhooks: the app's endpoints (the fixture's receiver does not exist: the test ping answers what came of it)
  { method: 'POST', path: '/v6/webhooks', permission: 'write', success: 201, body: () => ({ url: FIXTURE_HOOK, events: ['*'] }) },
  { method: 'GET', path: '/v6/webhooks', permission: 'read', success: 200 },
  { method: 'GET', path: '/v6/webhooks/:webhookId', permission: 'read', success: 200 },
  { method: 'PATCH', path: '/v6/webhooks/:webhookId', permission: 'write', success: 200, body: () => ({ description: 'changed' }) },
  { method: 'DELETE', path: '/v6/webhooks/:webhookId', permission: 'write', success: 204, fresh: true },
  { method: 'POST', path: '/v6/webhooks/:webhookId/rotate-secret', permission: 'write', success: 200 },
  { method: 'POST', path: '/v6/webhooks/:webhookId/test', permission: 'write', success: 200 },
  {
    method: 'POST',
    path: '/v6/webhooks/:webhookId/replay',
    permission: 'write',
    success: 202,
    body: () => ({ since: new Date(Date.now() - 3_600_000).toISOString(), until: new Date().toISOString() }),
  },
  { method: 'GET', path: '/v6/webhooks/:webhookId/attempts', permission: 'read', success: 200 },
  // stored templates and their versions
  { method: 'POST', path: '/v6/templates', permission: 'write', success: 201, body: () => ({ template: FIXTURE_TEMPLATE }) },
  { method: 'GET', path: '/v6/templates', permission: 'read', success: 200 },
  { method: 'GET', path: '/v6/templates/:templateId', permission: 'read', success: 200 },
  { method: 'GET', path: '/v6/templates/:templateId/versions', permission: 'read', success: 200 },
  { method: 'GET', path: '/v6/templates/:templateId/versions/:templateVersion', permission: 'read', success: 200 },
  { method: 'PUT', path: '/v6/templates/:templateId', permission: 'write', success: 200, body: () => ({ template: FIXTURE_TEMPLATE }) },
  {
    method: 'PATCH',
    path: '/v6/templates/:templateId',
    permission: 'write',
    success: 200,
    body: () => ({ template: { name: 'renamed' } }),
  },
  { method: 'DELETE', path: '/v6/templates/:templateId', permission: 'write', success: 204, fresh: true },
  // a device's message stream: what the SDK does
  // Live Activities: the registry on an iPhone, the pushes, the channels
  {
    method: 'PUT',
    path: '/v6/devices/:iosDeviceId/live-activities/:activityId',
    permission: 'device',
    success: 204,
    body: () => ({ activity_type: 'FixtureAttributes', token: randomBytes(40).toString('hex') }),
  },
  { method: 'DELETE', path: '/v6/devices/:iosDeviceId/live-activities/:activityId', permission: 'device', success: 204, fresh: true },
  {
    method: 'PUT',
    path: '/v6/devices/:iosDeviceId/live-activity-start-tokens/:activityType',
    permission: 'device',
    success: 204,
    body: () => ({ token: randomBytes(40).toString('hex') }),
  },
  {
    method: 'DELETE',
    path: '/v6/devices/:iosDeviceId/live-activity-start-tokens/:activityType',
    permission: 'device',
    success: 204,
    fresh: true,
  },
  {
    method: 'POST',
    path: '/v6/live-activities',
    permission: 'write',
    success: 201,
    body: (fx) => ({ live_activity: { event: 'update', activity_id: fx.params.activityId, content_state: { step: 1 } } }),
  },
  {
    method: 'POST',
    path: '/v6/live-activities/preview',
    permission: 'read',
    success: 200,
    body: (fx) => ({ live_activity: { event: 'update', activity_id: fx.params.activityId, content_state: { step: 1 } } }),
  },
  { method: 'GET', path: '/v6/live-activities/:liveActivityId', permission: 'read', success: 200 },
  { method: 'DELETE', path: '/v6/live-activities/:liveActivityId', permission: 'write', success: 200, fresh: true },
  { method: 'GET', path: '/v6/live-activities/channels', permission: 'read', success: 200 },
  // past auth, the fixture app (no APNs credentials) gets the channel API's own refusals
  { method: 'POST', path: '/v6/live-activities/channels', permission: 'write', success: 422, body: () => ({}) },
  { method: 'DELETE', path: '/v6/live-activities/channels/:channelId', permission: 'write', success: 404 },
  { method: 'GET', path: '/v6/devices/:deviceId/messages', permission: 'device', success: 200 },
  { method: 'GET', path: '/v6/devices/:deviceId/messages/:messageId', permission: 'device', success: 200 },
  {
    method: 'POST',
    path: '/v6/devices/:deviceId/messages/read',
    permission: 'device',
    success: 200,
    body: (fx) => ({ message_ids: [fx.params.messageId] }),
  },
  { method: 'DELETE', path: '/v6/devices/:deviceId/messages/:messageId', permission: 'device', success: 200, fresh: true },
  {
    method: 'POST',
    path: '/v6/devices/:deviceId/messages/impressions',
    permission: 'device',
    success: 202,
    body: (fx) => ({ impressions: [{ message_id: fx.params.messageId, kind: 'stream' }] }),
  },
];

/**
 * Routes without a key: every caller (any key, any role, a bad credential, none) gets the same answer. `url` is
 * a concrete request for a path with a parameter.
 */
export const PUBLIC_ROUTES: { method: 'GET'; path: string; url?: string }[] = [
  { method: 'GET', path: '/health' },
  { method: 'GET', path: '/ready' },
  { method: 'GET', path: '/metrics' },
  { method: 'GET', path: '/documentation/json' },
  { method: 'GET', path: '/console' },
  { method: 'GET', path: '/console/' },
  { method: 'GET', path: '/console/:file', url: '/console/index.html' },
  { method: 'GET', path: '/web-push/sw.js' },
  { method: 'GET', path: '/web-push/sdk.js' },
  // the API reference page (src/http/openapi.ts) and its files
  { method: 'GET', path: '/docs' },
  { method: 'GET', path: '/docs/' },
  { method: 'GET', path: '/docs/static/index.html' },
  { method: 'GET', path: '/docs/static/swagger-initializer.js' },
  { method: 'GET', path: '/docs/*', url: '/docs/static/swagger-ui.css' },
  { method: 'GET', path: '/docs/json' },
  { method: 'GET', path: '/docs/yaml' },
];

/** A fresh app with one notification (and so one audience) and one device of a user, for read routes to find. */
export async function prepareFixture(h: Harness): Promise<Fixture> {
  const app = await h.createApp();
  await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setWebPush(app.app.id, {
    subject: 'mailto:auth@example.com',
  });
  const send = async (url: string, payload: unknown, key: string) => {
    const res = await h.server.inject({
      method: 'POST',
      url,
      headers: { authorization: basic(key), 'content-type': 'application/json' },
      payload: JSON.stringify(payload),
    });
    if (res.statusCode >= 300) throw new Error(`fixture ${url} failed: ${res.statusCode} ${res.body}`);
    return res.json();
  };
  const created = await send(
    '/v6/notifications',
    { notification: { to: [{ name: 'locale', criteria: ['de_DE'] }], payload: { alert: 'fixture' } } },
    app.keys.write,
  );
  const userId = `user-${unique()}`;
  const device = await send(
    '/v6/devices',
    { device: { platform: 'android', token: `fixture-${unique()}`, user_id: userId } },
    app.keys.sdk,
  );
  // the device received the notification (the receipt delivery records; the auth harness runs no workers), so the
  // sdk key may report its open
  await h.db.db
    .insertInto('device_pushes')
    .values({ device_id: device.device.id, notification_id: created.id, received_at: new Date() })
    .execute();
  // an in-app message to every device (so in the device's stream), and one that waits for its send time
  const iphone = await send('/v6/devices', { device: { platform: 'ios', token: randomBytes(32).toString('hex') } }, app.keys.sdk);
  const activityId = randomUUID();
  const activityToken = { activity_type: 'FixtureAttributes', token: randomBytes(40).toString('hex') };
  for (const [path, body] of [
    [`/v6/devices/${iphone.device.id}/live-activities/${activityId}`, activityToken],
    [`/v6/devices/${iphone.device.id}/live-activity-start-tokens/FixtureAttributes`, { token: activityToken.token }],
  ] as const) {
    const res = await h.server.inject({ method: 'PUT', url: path, headers: { authorization: basic(app.keys.sdk) }, payload: body });
    if (res.statusCode !== 204) throw new Error(`fixture ${path} failed: ${res.statusCode} ${res.body}`);
  }
  // a push that waits for its send time, so it can be canceled
  const later = new Date(Date.now() + 86_400_000).toISOString();
  const live = await send(
    '/v6/live-activities',
    { live_activity: { event: 'update', activity_id: activityId, content_state: { step: 0 }, send_at: later } },
    app.keys.write,
  );
  const message = await send('/v6/messages', { message: { to: '*', title: 'fixture' } }, app.keys.write);
  const sendAt = new Date(Date.now() + 86_400_000).toISOString();
  const scheduled = await send('/v6/messages', { message: { to: '*', title: 'fixture later', send_at: sendAt } }, app.keys.write);
  const journey = await send('/v6/journeys', { journey: fixtureJourney() }, app.keys.write);
  const webhook = await send('/v6/webhooks', { url: FIXTURE_HOOK, events: ['*'] }, app.keys.write);
  const template = await send('/v6/templates', { template: FIXTURE_TEMPLATE }, app.keys.write);
  return {
    app,
    params: {
      appId: app.app.id,
      notificationId: created.id,
      audienceId: created.to.id,
      deviceId: device.device.id,
      userId,
      messageId: message.id,
      scheduledMessageId: scheduled.id,
      iosDeviceId: iphone.device.id,
      activityId,
      liveActivityId: live.live_activity.id,
      activityType: 'FixtureAttributes',
      channelId: 'no-such-channel',
      journeyId: journey.journey.id,
      entrantKey: `device:${device.device.id}`,
      webhookId: webhook.webhook.id,
      templateId: template.template.id,
      templateVersion: '1',
    },
  };
}

export function fillPath(path: string, params: Record<string, string>): string {
  return path.replace(/:([A-Za-z]+)/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new Error(`no fixture value for :${name} in ${path}`);
    return encodeURIComponent(value);
  });
}

/** Which roles a permission admits (mirrors the grants table; asserted against it in test/domain/keys.test.ts). */
export const ROLES_FOR: Record<Permission, readonly Role[]> = {
  read: ['read', 'write'],
  write: ['write'],
  device: ['write', 'sdk'],
};

export function rolesFor(route: AuthRoute): Role[] {
  const permissions = Array.isArray(route.permission) ? route.permission : [route.permission];
  return (['read', 'write', 'sdk'] as const).filter((r) => permissions.some((p) => ROLES_FOR[p].includes(r)));
}

/** Method + path (params as :id) of every route the server registered, read from its route tree. */
export function registeredRoutes(tree: string): { method: string; path: string }[] {
  const stack: string[] = [];
  const out: { method: string; path: string }[] = [];
  for (const line of tree.split('\n')) {
    const at = line.indexOf('── ');
    if (at < 0) continue;
    const depth = Math.round(at / 4);
    const m = /^(\S+)(?: \(([^)]+)\))?$/.exec(line.slice(at + 3).trim());
    if (!m) continue;
    stack.length = depth;
    const path = (stack[depth - 1] ?? '') + m[1]!;
    stack.push(path);
    for (const method of m[2]?.split(', ') ?? []) if (method !== 'HEAD') out.push({ method, path: path.replace(/:[A-Za-z_]+/g, ':id') });
  }
  return out;
}
