/**
 * Examples for the API reference (/docs), by route: request bodies and answers as a client sends and gets them.
 * test/http/openapi.test.ts checks each against the schema its route validates or serializes with.
 */
const ID = '0190f5d2-6c1e-7a3b-9d2e-5b1c0e8f4a21';
const AUDIENCE = '3f0b6c0e-1d2a-4b5c-8e9f-0a1b2c3d4e5f';
/**
 * The ids request examples name, one per kind of object, so test/http/api-examples.test.ts can send each example
 * with the id of an object it created in its place.
 */
export const EXAMPLE_IDS = {
  notification: ID,
  message: '0190f5d2-7d2f-7b4c-8e1f-6c2d1f9a5b32',
  activity: '6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f',
  device: '0190f5d2-8e3a-7c5d-9f2a-7d3e2a0b6c43',
  user: 'customer-42',
} as const;
/**
 * Times an example sends, as of when the server started (the document is built once): the API keeps a window (a
 * send_at within the coming year, a replay within the kept days), so a fixed date would fail once it has passed.
 */
const fromNow = (hours: number) => new Date(Math.floor(Date.now() / 3_600_000 + hours) * 3_600_000).toISOString();
const ACTIVITY_TOKEN = '7a3c9e1f5b2d8a4c6e0f2b4d6a8c0e2f4b6d8a0c2e4f6b8d0a2c4e6f8b0d2a4c6e8f0a2b4d6c8e0f2a4b6d8c0e2f4a6b';
const journey = {
  name: 'Cart reminder',
  trigger: { api: true },
  exit_on: ['purchase'],
  steps: [
    { id: 'wait', type: 'delay', duration: '30m' },
    { id: 'remind', type: 'send', notification: { payload: { alert: 'Your cart is waiting' } } },
  ],
};
const liveActivity = {
  live_activity: {
    event: 'update',
    activity_id: EXAMPLE_IDS.activity,
    content_state: { eta: 5 },
    stale_date: fromNow(2),
    priority: 'high',
  },
};
const AT = '2026-11-20T09:00:00.120Z';

const notificationCreate = {
  body: [
    { notification: { to: '*', payload: { alert: 'Hello everyone', badge: 1, sound: 'default' } } },
    {
      notification: {
        to: [
          { name: 'locale', criteria: ['fr_FR', 'fr_BE'] },
          { name: 'events.purchase', criteria: [{ gt: 'now-7d/d' }] },
          { name: 'development', criteria: [true], not_filter: true },
        ],
        payload: { alert: 'Soldes !', collapse_key: 'sale' },
        send_at: fromNow(24 * 30),
        ttl: 3600,
      },
    },
    // each device at its best hour of the next day (docs/api/notifications.md)
    { notification: { to: [{ name: 'tags', criteria: ['weekly'] }], payload: { alert: 'Your weekly summary' }, send_at: 'best_time' } },
  ],
  answers: {
    201: [
      {
        id: ID,
        created_at: AT,
        state: 'scheduled',
        to: { id: AUDIENCE, type: 'Audience' },
        notification: { to: '*', payload: { alert: 'Hello everyone', badge: 1, sound: 'default' } },
      },
    ],
    400: [
      { error: 'notification.payload.badge: must be an integer >= 0' },
      { error: 'notification.local_time: cannot be combined with send_at: "best_time"' },
    ],
  },
};

export const API_EXAMPLES: Record<string, { body?: unknown[]; answers?: Record<number, unknown[]> }> = {
  'POST /v3/notifications': notificationCreate,
  'POST /v5/notifications': notificationCreate,
  'POST /v6/notifications': notificationCreate,
  'POST /v6/notifications/preview': {
    body: [{ notification: { to: '*', payload: { alert: 'Hello' }, localized: { fr: { alert: 'Bonjour' } } } }],
  },
  'POST /v6/notifications/:id/winner': { body: [{ variant: 1 }] },
  'POST /v6/transactional/notifications': {
    body: [
      {
        to: { field: 'user_id', value: EXAMPLE_IDS.user },
        group: 'order-shipped',
        notification: { payload: { alert: 'Your order has shipped' } },
        extra_filters: [{ name: 'locale', criteria: ['en_US'] }],
      },
    ],
    answers: { 200: [{ id: ID, results: { success: 2, uninstalled: 0, failures: [] } }] },
  },
  'POST /v6/devices': {
    body: [
      {
        device: {
          platform: 'ios',
          token: '80f3a7c1e2d4b6a8c0e2f4a6b8d0c2e4f6a8b0d2c4e6f8a0b2d4c6e8f0a2b4c6',
          locale: 'fr_FR',
          time_zone: 'Europe/Paris',
          tags: ['vip'],
          user_id: EXAMPLE_IDS.user,
          user_id_auth_hash: '5d41c8a1f0f3e1c9b3a7d2e6f8a0b4c6d8e0f2a4b6c8d0e2f4a6b8c0d2e4f6a8',
          custom: { plan: { type: 'string', value: 'pro' } },
        },
      },
    ],
  },
  'PUT /v6/devices/:id': { body: [{ device: { badge: 3, custom: { plan: { type: 'string', value: 'free' }, age: null } } }] },
  'POST /v6/devices/:id/events': { body: [{ events: [{ name: 'purchase' }] }] },
  'POST /v6/users/:user_id/events': { body: [{ events: [{ name: 'signup' }] }] },
  'PUT /v6/users/:user_id': { body: [{ user: { custom: { plan: { type: 'string', value: 'pro' } } } }] },
  'POST /v6/devices/:id/sessions': {
    body: [{ session: { id: '0b6f3c9e-8a41-4d7a-9f1e-3c2b5a6d7e80' } }],
  },
  'POST /v6/devices/:id/opens': { body: [{ open: { _nid: ID, tapped: true } }] },
  'POST /v6/audiences/count': {
    body: [{ filters: [{ name: 'locale', criteria: ['fr_FR'] }] }],
    answers: { 200: [{ device_count: 1234 }] },
  },
  'PATCH /v6/app': {
    body: [{ default_time_zone: 'Europe/Paris', quiet_hours: { start: '22:00', end: '08:00', then: 'hold' } }],
  },
  'POST /v6/messages': {
    body: [
      {
        message: {
          to: [{ name: 'tags', criteria: ['vip'] }],
          title: 'Your VIP offer',
          text: '20 % off everything this week',
          url: 'myapp://offers/vip',
          custom: { coupon: 'VIP20' },
          notification: { payload: { alert: 'A new offer is waiting for you' } },
        },
      },
    ],
  },
  'POST /v6/devices/:id/messages/read': { body: [{ message_ids: [EXAMPLE_IDS.message] }] },
  'POST /v6/live-activities': { body: [liveActivity] },
  'POST /v6/live-activities/preview': { body: [liveActivity] },
  'PUT /v6/devices/:id/live-activities/:activity_id': { body: [{ activity_type: 'DeliveryAttributes', token: ACTIVITY_TOKEN }] },
  'PUT /v6/devices/:id/live-activity-start-tokens/:activity_type': { body: [{ token: ACTIVITY_TOKEN }] },
  'POST /v6/live-activities/channels': { body: [{ message_storage_policy: 1, development: false }] },
  'POST /v6/devices/:id/messages/impressions': { body: [{ impressions: [{ message_id: EXAMPLE_IDS.message, kind: 'stream' }] }] },
  'POST /v6/journeys': { body: [{ journey }] },
  'PUT /v6/journeys/:id': { body: [{ journey: { ...journey, steps: [{ ...journey.steps[0], duration: '1h' }, journey.steps[1]] } }] },
  'POST /v6/journeys/:id/entries': { body: [{ device_id: EXAMPLE_IDS.device }, { user_id: EXAMPLE_IDS.user }] },
  'POST /v6/webhooks': {
    body: [{ url: 'https://hooks.example.com/pushd', events: ['*'], description: 'Our analytics' }],
  },
  'POST /v6/templates': {
    body: [
      {
        template: {
          name: 'Order shipped',
          payload: { alert: 'Hi {{ custom.first_name | default: "there" }}, order {{ data.order }} has shipped', sound: 'default' },
          localized: { fr: { alert: 'Bonjour {{ custom.first_name | default: "" }}, la commande {{ data.order }} est partie' } },
        },
      },
    ],
    answers: { 400: [{ error: 'template.payload.alert: line 1, col 4: undefined filter: shout' }] },
  },
  'PUT /v6/templates/:id': {
    body: [{ template: { name: 'Order shipped', payload: { alert: 'Order {{ data.order }} has shipped', sound: 'default' } } }],
  },
  'PATCH /v6/templates/:id': { body: [{ template: { payload: { alert: 'Order {{ data.order }} is on its way' } } }] },
  'PATCH /v6/webhooks/:id': { body: [{ enabled: false }, { events: ['push.delivered', 'push.failed'] }] },
  'POST /v6/webhooks/:id/replay': { body: [{ since: fromNow(-24), until: fromNow(0) }] },
  'GET /health': { answers: { 200: [{ status: 'ok' }] } },
};

/** What every route that takes a key may answer for it. */
export const KEY_ERROR_EXAMPLES: Record<number, unknown[]> = {
  401: [{ error: 'unauthorized' }],
  403: [{ error: 'your api client does not have the correct roles' }],
  429: [{ error: 'rate limit exceeded: retry after 1 s' }],
};
